/**
 * What every scenario of the benchmark suite shares: the run's options (--quick, --only), its results and their
 * recording, the sampler, the targets' start and stop, the load generators' runs, and the fills that hold clients.
 * bench/run.ts runs the scenarios; this module holds their state, one run per process.
 */
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { GATEWAY_NODE_ARGS, median, metric, ROOT, start, startLoad, startRedis, stop, stopAll, waitFor, Sampler, type Proc } from './procs.ts';
import { watchNode } from './node-watch.ts';
import type { Results } from './report.ts';

export const QUICK = process.argv.includes('--quick');
export const LEVELS = QUICK ? [0, 2000, 6000] : [0, 2000, 6000, 10000, 14000, 18000];
export const CHURN_S = QUICK ? 10 : 20;
/**
 * Seconds of each churn run not counted, as the published methodology's 5: a server started afresh before its
 * churn is slower while it warms up (by hand, three 5-s bare-peer churns in a row on one server read 5,693,
 * 7,049 and 8,632/s; on a fresh server each, 5,398, 5,439 and 5,225/s).
 */
export const CHURN_WARMUP_S = QUICK ? 2 : 5;
export const NOTIFY_S = QUICK ? 5 : 10;
/**
 * Seconds of each paced one-person run: the published runs' 60. Its figure is a tail (p99 of 1,000 a second), which
 * ten seconds decide by the 100 slowest deliveries: one stall of ~120 ms (the node's ping sweep, when it pinged all
 * its clients at once; here a C process sleeping 1 ms at a time also wakes 5-35 ms late at this load) made a run read 20-30 ms.
 */
export const PACED_S = QUICK ? 5 : 60;
/**
 * Seconds of the same emits before each notify run, delivered but not counted. Each run connects its 1,000
 * listeners just before (the published runs' listeners were connected by another process before the HTTP load
 * began), and the young-generation collections of the next second copy their objects: pauses of 4-10 ms in the
 * gateway's `--trace-gc`, against 0.5-1.5 ms after. By hand, paced p99 over eight runs each, alternated: 1.98-4.27
 * ms (median 3.6) straight away, 1.59-2.68 ms (median 1.97) after 2 s of emits.
 */
export const NOTIFY_WARMUP_S = QUICK ? 1 : 2;
/** The figures are medians of two runs: each churn and notify run is made twice (once when quick). */
export const RATE_RUNS = QUICK ? 1 : 2;
export const RUN_DIR = `${ROOT}bench/.run`;
export const OUT_DIR = `${ROOT}docs/benchmarks`;
const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
const PEER_LOAD = `${ROOT}bench/peer-load.ts`;
export const ONLY = process.argv.includes('--only') ? new Set(process.argv[process.argv.indexOf('--only') + 1]?.split(',')) : undefined;
export const wanted = (scenario: string): boolean => ONLY === undefined || ONLY.has(scenario);

export type TargetName = 'gateway' | 'socketio' | 'bare';
export interface Target { name: TargetName; port: number; redisPort: number; server?: Proc }

export const results: Results = { quick: QUICK, startedAt: new Date().toISOString(), levels: LEVELS, figures: {}, memory: {}, runs: {}, errors: [], commands: [], samples: [] };
if (ONLY) keepEarlierRun();

/**
 * `--only` measures some scenarios again: the report keeps the earlier run's figures, memory levels and load
 * outputs (a full run of the same mode), and this run's replace those it measures.
 */
function keepEarlierRun(): void {
  let earlier: Partial<Results>;
  try {
    earlier = JSON.parse(readFileSync(`${OUT_DIR}/results.json`, 'utf8')) as Partial<Results>;
  } catch {
    return; // no earlier run
  }
  if (earlier.quick !== QUICK) return;
  Object.assign(results.figures, earlier.figures);
  Object.assign(results.memory, earlier.memory);
  // The failover scenarios measured again replace their series; the others' stay for the chart.
  if (earlier.reconnect) results.reconnect = { ...earlier.reconnect };
  // A scenario measured again replaces its earlier runs, also those it no longer makes (a changed design).
  const again = [...ONLY!];
  // Runs are keyed, and samples tagged, "<target> <phase words...>": one that names a scenario measured again goes.
  const measuredAgain = (label: string): boolean => again.some((name) => label.split(' ').includes(name));
  for (const [key, run] of Object.entries(earlier.runs ?? {})) {
    if (!measuredAgain(key)) results.runs[key] = run;
  }
  results.commands.push(...(earlier.commands ?? []));
  results.samples.push(...(earlier.samples ?? []).filter((sample) => !measuredAgain(sample.phase)));
  // "<full run>, with <scenarios> measured again on <date>, ...": a scenario list measured again replaces its own.
  const remeasured = `with ${again.join(', ')} measured again on `;
  const history = (earlier.startedAt ?? '?').split(', with ').map((part, i) => (i === 0 ? part : `with ${part}`));
  results.startedAt = [...history.filter((part) => !part.startsWith(remeasured)), `${remeasured}${results.startedAt}`].join(', ');
}
export let redis: Redis | undefined;
export const sampler = new Sampler(async () => (redis ? Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]) : undefined));

export function record(name: string, value: number | undefined): void {
  if (value !== undefined && Number.isFinite(value)) results.figures[name] = Math.round(value * 1000) / 1000;
}
export const prefix = (t: Target): string => (t.name === 'gateway' ? '' : `${t.name}_`);

/** A load generator run to its end; its report (wsload --json, or peer-load's last stdout line). */
export function runLoad(t: Target, args: string[], timeoutS: number): Promise<Record<string, any>> {
  const [script, jsonFile] = t.name === 'gateway' ? [WSLOAD, `${RUN_DIR}/${t.name}-${args[0]}-${Date.now()}.json`] : [PEER_LOAD, undefined];
  // As one would type it: without the file the bench collects the output in.
  results.commands.push(`node ${script.replace(ROOT, '')} ${args.join(' ')}`);
  const argv = jsonFile ? [...args, '--quiet', '--json', jsonFile] : args;
  const run = startLoad(`load-${t.name}`, script, argv, { logFile: `${RUN_DIR}/load-${t.name}.log`, timeoutS, jsonFile });
  watchLoad(run.proc);
  return run.done;
}

/** Every load generator is sampled under a name of its own that starts with "load", which the report sums. */
let loads = 0;
export function watchLoad(proc: Proc): void {
  sampler.watch(`load ${++loads}`, proc.child.pid!);
}

export async function serverStats(t: Target): Promise<{ clients: number; heapUsed: number | undefined }> {
  if (t.name !== 'gateway') return (await (await fetch(`http://127.0.0.1:${t.port}/stats`)).json()) as { clients: number; heapUsed: number };
  const [clients, heapUsed] = await Promise.all([metric(t.port, 'herald_subscriptions'), metric(t.port, 'nodejs_heap_size_used_bytes')]);
  return { clients: clients ?? NaN, heapUsed };
}

export async function startTarget(t: Target): Promise<void> {
  const redisProc = await startRedis('redis', t.redisPort, `${RUN_DIR}/redis-${t.name}.log`);
  redis = new Redis(t.redisPort, '127.0.0.1', { maxRetriesPerRequest: 1 });
  sampler.watch(`redis(${t.name})`, redisProc.child.pid!);
  const env = { PORT: String(t.port), REDIS_URL: `redis://127.0.0.1:${t.redisPort}`, LOG_LEVEL: 'warn' };
  const gc = ['--expose-gc', '--import', `${ROOT}bench/gc-preload.ts`];
  const script = t.name === 'gateway'
    ? [...gc, ...GATEWAY_NODE_ARGS, `${ROOT}packages/gateway/src/main.ts`]
    : [...gc, `${ROOT}bench/peers/${t.name === 'bare' ? 'bare-ws' : 'socketio'}.ts`];
  t.server = start(t.name, 'node', script, env, `${RUN_DIR}/${t.name}.log`);
  const ready = t.name === 'gateway' ? '/readyz' : '/stats';
  await waitFor(`${t.name} on ${t.port}`, async () => (await fetch(`http://127.0.0.1:${t.port}${ready}`)).ok, 60_000);
  sampler.watch(t.name, t.server.child.pid!);
}

/**
 * Grow what `fills` hold to `clients` by adding a fill for the difference, each client with both tokens and its
 * own subscription (client indexes from `firstIndex + held`), and wait until the server counts them all. Earlier
 * fills stay connected, as the clients of a real node do.
 */
export async function growFill(t: Target, clients: number, fills: Proc[], held: number, firstIndex = 0): Promise<void> {
  if (clients <= held) return;
  const url = `ws://127.0.0.1:${t.port}`;
  const delta = ['--clients', String(clients - held), '--first', String(firstIndex + held), '--hold', '900'];
  const args = t.name === 'gateway'
    ? [WSLOAD, 'fill', url, ...delta, '--rate', '2000', '--register', 'announcements', '--per-client', '--tokens', 'both', '--quiet']
    : [PEER_LOAD, 'fill', t.name, url, ...delta];
  results.commands.push(`node ${args.join(' ').replaceAll(ROOT, '')}`);
  const load = start(`fill-${t.name}`, 'node', args, {}, `${RUN_DIR}/fill-${t.name}-${clients}.log`);
  fills.push(load);
  watchLoad(load);
  await waitFor(`${clients} clients on ${t.name}`, async () => (await serverStats(t)).clients >= clients && (t.name === 'gateway' || load.stdout.includes('ready')), 120_000);
}

export async function stopFills(t: Target, fills: Proc[]): Promise<void> {
  await Promise.all(fills.map((fill) => stop(fill, 'SIGINT', 20_000)));
  await untilNoClients(t, 30_000).catch(() => {});
}

/** Once every client has left the server; rejects after `timeoutMs`. */
export async function untilNoClients(t: Target, timeoutMs: number): Promise<void> {
  await waitFor(`${t.name} back to 0 clients`, async () => (await serverStats(t)).clients === 0, timeoutMs);
}

/** The listeners of each notify run. The other clients connected meanwhile (a fill) are idle, each with its own subscription. */
export const NOTIFY_CLIENTS = 1000;
/** Scenario 3: the clients connected during the notify runs. Scenario 4: every client (18,000), the runs once more. */
export const CONNECTED = QUICK ? 2000 : 10_000;
export const EVERY_CLIENT = QUICK ? undefined : LEVELS.at(-1)!;

export type Take = (r: Record<string, any>) => Record<string, number | undefined>;
export type Step = [name: string, args: string[], take: Take];

/**
 * Each step `runs` times; each figure is the median of its runs. Runs are kept as "<target> <phase><step> <run>"; a
 * gateway's with what the node reported over it (`node`: bench/node-watch.ts).
 */
export async function runSteps(t: Target, steps: Step[], runs: number, phase = ''): Promise<void> {
  for (const [name, args, take] of steps) {
    sampler.phase = `${t.name} ${phase}${name}`;
    await medianOfRuns(`${t.name} ${phase}${name}`, runs, async (run) => {
      const load = (): Promise<Record<string, any>> => runLoad(t, args, CHURN_WARMUP_S + NOTIFY_WARMUP_S + Math.max(CHURN_S, NOTIFY_S, PACED_S) + 120);
      const out = t.name === 'gateway' ? await watchNode(t.port, load).then(({ outcome, node }) => ({ ...outcome, node })) : await load();
      results.runs[`${t.name} ${phase}${name} ${run}`] = out;
      return take(out);
    });
  }
}

/** `run` made `runs` times (1, 2, ...), each figure the median of its runs; a failed run is listed as "<label> <run>". */
export async function medianOfRuns(label: string, runs: number, run: (n: number) => Promise<Record<string, number | undefined>>): Promise<void> {
  const taken: Array<Record<string, number | undefined>> = [];
  for (let n = 1; n <= runs; n++) {
    try { taken.push(await run(n)); } catch (error) { results.errors.push(`${label} ${n}: ${(error as Error).message}`); }
  }
  recordMedians(taken);
}

/**
 * Each figure of several runs, as the median of its values; a loss (`*_lost`, `*_duplicates`) or a reach
 * (`*_reached_pct`, `*_recovered_pct`) as the worst of them instead, since "none lost" must hold in every run.
 */
export function recordMedians(taken: Array<Record<string, number | undefined>>): void {
  for (const figure of new Set(taken.flatMap((values) => Object.keys(values)))) {
    const values = taken.map((run) => run[figure]).filter((value) => value !== undefined);
    const worst = /_(lost|duplicates)$/.test(figure) ? Math.max : /_(reached|recovered)_pct$/.test(figure) ? Math.min : undefined;
    record(figure, worst && values.length > 0 ? worst(...values) : median(values));
  }
}

/**
 * The rate scenarios run on a fresh server and Redis, not on what the memory levels left, so that they measure
 * themselves: an earlier gateway's churn and notify rates read 20-35% lower after 18,000 clients came and left
 * (Socket.IO's hardly moved). Today's churn reads the same on a fresh node and after such a fill (by hand:
 * 3,954-4,079/s fresh, 4,109-4,250/s after).
 */
export async function freshTarget(t: Target): Promise<void> {
  await stopTarget(t);
  await startTarget(t);
}

/** The Redis client startTarget opened (the memory levels' and the sampler's), closed. */
export function closeRedisClient(): void {
  redis?.disconnect();
  redis = undefined;
}

export async function stopTarget(t: Target): Promise<void> {
  sampler.unwatch(t.name);
  closeRedisClient();
  await stopAll();
}
