/** The load runs the targets' own scenarios and the side-by-side pairs share: churn and the four notify runs. */
import { NOTIFY_CLIENTS, prefix, type BenchContext, type Step, type Target } from './context.ts';
import type { LatencySummary } from '@herald/loadgen';
import type { LoadReport, Taken } from './results.ts';

/**
 * The server's CPU per emit over a notify run's measured seconds: its samples wholly inside them (one a second, each
 * over the second before it), their mean share of a core, over the emits answered a second. Undefined without them.
 */
export function usPerEmit(ctx: BenchContext, t: Target, r: LoadReport): number | undefined {
  const from = r.window?.from;
  const to = r.window?.to;
  const emitsPerSecond = r.rates?.emitsPerSecond;
  if (from === undefined || to === undefined || !emitsPerSecond) return undefined;
  const shares = ctx.sampler.samples.filter((s) => s.t - 1000 >= from && s.t <= to && s.procs[t.name]).map((s) => s.procs[t.name]!.cpuPct);
  return shares.length === 0 ? undefined : (shares.reduce((a, b) => a + b, 0) / shares.length) * 1e4 / emitsPerSecond;
}

/**
 * Scenario 3's runs (and 4's, with `figure` naming them apart): one person each, unpaced and at 1,000/s; a broadcast to
 * the 1,000 listeners, unpaced and 5/s. `clients`: wsload's extra arguments for the gateway (--client ws). The unpaced
 * broadcast's figure counts what arrived within a second of its emit (wsload's ON_TIME_MS), so that a backlog growing
 * through the run cannot raise it; the whole rate and the delivery p99 are kept beside it. For the gateway, its own
 * fan-out time (p99 over the run's emits) and its delivery backlog (the largest of four readings a second).
 */
export function notifySteps(ctx: BenchContext, t: Target, figure: (name: string) => string, clients: string[] = []): Step[] {
  const { notifyS, notifyWarmupS, pacedS } = ctx.options;
  const listeners = ['--clients', String(NOTIFY_CLIENTS), '-c', '100', '-w', String(notifyWarmupS)];
  const notify = (seconds: number, ...extra: string[]): string[] => (t.name === 'gateway'
    ? ['notify', `http://127.0.0.1:${t.port}`, ...listeners, '-d', String(seconds), ...extra, ...clients]
    : ['notify', t.name, `ws://127.0.0.1:${t.port}`, ...listeners, '-d', String(seconds), ...extra]);
  const rate = (r: LoadReport): number | undefined => r.rates?.notificationsPerSecond;
  const delivery = (r: LoadReport): LatencySummary | undefined => r.latency?.delivery;
  const node = (r: LoadReport, name: string): Taken => ({
    [figure(`${name}_node_fanout_p99_ms`)]: r.node?.fanOutP99Ms,
    [figure(`${name}_backlog_max_mb`)]: r.node === undefined ? undefined : r.node.backlogMaxBytes / 2 ** 20,
  });
  return [
    ['notify-person', notify(notifyS), (r) => ({ [figure('notify_person_per_s')]: rate(r), [figure('notify_person_us_per_emit')]: usPerEmit(ctx, t, r), [figure('notify_person_p99_ms')]: delivery(r)?.p99, ...node(r, 'notify_person') })],
    ['broadcast-1k', notify(notifyS, '--broadcast'), (r) => ({
      [figure('broadcast_1k_per_s')]: r.rates?.notificationsOnTimePerSecond, [figure('broadcast_1k_all_per_s')]: rate(r),
      [figure('broadcast_1k_p99_ms')]: delivery(r)?.p99, [figure('broadcast_1k_refused_per_s')]: r.counts?.emitsRefused === undefined || !r.durationS ? undefined : r.counts.emitsRefused / r.durationS,
      [figure('broadcast_1k_closed')]: r.counts?.listenersDropped,
      ...node(r, 'broadcast_1k'),
    })],
    ['notify-paced', notify(pacedS, '-R', '1000'), (r) => ({ [figure('paced_p50_ms')]: delivery(r)?.p50, [figure('paced_p99_ms')]: delivery(r)?.p99, ...node(r, 'paced') })],
    ['broadcast-paced', notify(notifyS, '--broadcast', '-R', '5'), (r) => ({ [figure('broadcast_paced_p50_ms')]: delivery(r)?.p50, [figure('broadcast_paced_last_ms')]: delivery(r)?.max })],
  ];
}

/** Scenario 2's run: both tokens, REGISTER, leave, 100 at a time (`clients`: as notifySteps'). */
export function churnStep(ctx: BenchContext, t: Target, figure = (name: string): string => `${prefix(t)}${name}`, clients: string[] = []): Step {
  const { churnS, churnWarmupS } = ctx.options;
  const ws = `ws://127.0.0.1:${t.port}`;
  const args = t.name === 'gateway'
    ? ['churn', ws, '-c', '100', '-w', String(churnWarmupS), '-d', String(churnS), '--register', 'announcements', '--per-client', '--tokens', 'both', ...clients]
    : ['churn', t.name, ws, '-c', '100', '-w', String(churnWarmupS), '-d', String(churnS)];
  return ['churn', args, (r) => ({ [figure('churn_subscribe_per_s')]: r.rates?.clientsPerSecond })];
}
