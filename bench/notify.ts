/**
 * Scenarios 2-4 on a target: churn, the notify runs with 1,000 listeners among the clients connected, the same again
 * with clients on the `ws` library (gateway; the unpaced broadcast also with those clients reading at half the rate
 * they were sent) and with every client connected; and the broadcast to every client.
 */
import { NOTIFY_CLIENTS, prefix, serverStats, untilNoClients, type BenchContext, type Target } from './context.ts';
import { waitFor, type Proc } from './procs.ts';
import type { Taken } from './results.ts';
import { churnStep, notifySteps } from './steps.ts';

/**
 * Against the same node, what clients on the `ws` library add to each figure (ws_*) is the client's part. They run in
 * two processes of their own, as two machines' clients would.
 */
const WS_CLIENTS = ['--client', 'ws', '--per-worker', String(NOTIFY_CLIENTS / 2)];
const wsFigure = (name: string): string => `ws_${name}`;
/** The same clients reading at half the rate the node sent them in the unpaced broadcast (slow_ws_*): slower than it. */
const slowWsFigure = (name: string): string => `slow_ws_${name}`;

/**
 * Each client's read rate for the slow clients' run: half what each was sent in the ws clients' unpaced broadcast;
 * undefined without that figure (the run is then skipped, not made at full speed under the slow run's name).
 */
function slowReadRate(ctx: BenchContext): string[] | undefined {
  const sent = ctx.results.figures[wsFigure('broadcast_1k_all_per_s')];
  return sent === undefined ? undefined : ['--read-rate', String(Math.max(1, Math.round(sent / NOTIFY_CLIENTS / 2)))];
}

export async function loadScenarios(ctx: BenchContext, t: Target): Promise<void> {
  const { rateRuns, connected } = ctx.options;
  const wsClients = t.name === 'gateway' && ctx.wanted('ws-clients');
  if (ctx.wanted('churn')) await ctx.runSteps(t, [churnStep(ctx, t)], rateRuns);
  if (wsClients) await ctx.runSteps(t, [churnStep(ctx, t, wsFigure, WS_CLIENTS)], rateRuns, 'ws-clients ');
  const steps = notifySteps(ctx, t, (name) => `${prefix(t)}${name}`).filter(([name]) => ctx.wanted(name));
  const everyClient = ctx.wanted('every-client') ? ctx.options.everyClient : undefined;
  if (steps.length === 0 && everyClient === undefined && !wsClients) return;
  const fills: Proc[] = [];
  try {
    ctx.sampler.phase = `${t.name} fill`;
    await ctx.growFill(t, connected - NOTIFY_CLIENTS, fills, 0, NOTIFY_CLIENTS);
    await ctx.runSteps(t, steps, rateRuns);
    // Paced broadcasts are the same few emits either way: the other three.
    if (wsClients) {
      await ctx.runSteps(t, notifySteps(ctx, t, wsFigure, WS_CLIENTS).filter(([name]) => name !== 'broadcast-paced'), rateRuns, 'ws-clients ');
      const readRate = slowReadRate(ctx);
      const slow = notifySteps(ctx, t, slowWsFigure, [...WS_CLIENTS, ...(readRate ?? [])]).filter(([name]) => name === 'broadcast-1k');
      if (readRate) await ctx.runSteps(t, slow, rateRuns, 'slow-ws-clients ');
      else console.error('bench: no ws_broadcast_1k_all_per_s to pace the slow ws clients by: their run is skipped');
    }
    if (everyClient === undefined) return;
    ctx.sampler.phase = `${t.name} fill`;
    await ctx.growFill(t, everyClient - NOTIFY_CLIENTS, fills, connected - NOTIFY_CLIENTS, NOTIFY_CLIENTS);
    // No target on these: one run each.
    await ctx.runSteps(t, notifySteps(ctx, t, (name) => `${prefix(t)}every_client_${name}`), 1, 'every-client ');
  } finally {
    await ctx.stopFills(t, fills);
  }
}

/**
 * Every client (the last level, over 3 processes) told by a broadcast a second for 10 s, while 100 other clients are
 * each named in turn, 100 emits a second for 5 s, so that some land while a broadcast is being written. A run's
 * slowest broadcast is one broadcast's tail: each figure is the median of its runs, and the run's first broadcasts
 * are not counted, as the other notify runs' first seconds (its code runs cold). Methodology: docs/benchmarks.
 */
export async function broadcastScenario(ctx: BenchContext, t: Target): Promise<void> {
  await ctx.medianOfRuns(`${t.name} broadcast-18k`, ctx.options.rateRuns, (run) => broadcastRun(ctx, t, run));
}

async function broadcastRun(ctx: BenchContext, t: Target, run: number): Promise<Taken> {
  const http = `http://127.0.0.1:${t.port}`;
  const everyone = ctx.options.levels.at(-1)!;
  // The listeners of the run before must have left, or they would pass for this run's.
  await untilNoClients(t, 60_000);
  ctx.sampler.phase = `${t.name} broadcast-18k ${run}`;
  const broadcasts = ctx.runLoad(t, ['notify', http, '--clients', String(everyone), '--per-worker', '6000', '-c', '1', '-R', '1', '-w', String(ctx.options.notifyWarmupS), '-d', '10', '--broadcast'], 300);
  await waitFor(`${everyone} listeners`, async () => (await serverStats(t)).clients >= everyone, 120_000);
  // Another event: the broadcast's listeners, without criteria, would get every `announcements` emit too.
  const person = await ctx.runLoad(t, ['notify', http, '--clients', '100', '--register', 'order-updates', '-c', '1', '-R', '100', '-d', '5'], 120);
  const broadcast = await broadcasts;
  ctx.results.runs[`${t.name} broadcast-18k ${run}`] = broadcast;
  ctx.results.runs[`${t.name} person-during-broadcast ${run}`] = person;
  return {
    broadcast_18k_last_ms: broadcast.latency?.delivery?.max,
    // No target: the median broadcast's last one told, to show whether the slowest of the ten is typical.
    broadcast_18k_last_p50_ms: broadcast.perEmit?.lastTold?.p50,
    person_during_broadcast_ms: person.latency?.delivery?.p99,
  };
}
