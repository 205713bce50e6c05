#!/usr/bin/env node
/**
 * The benchmark suite (issue 4, first cut): for the gateway and its two peers in turn, start a fresh redis-server
 * and the server, run the scenarios against it, sample it once a second, stop it. Then results.json, README.md
 * and memory.svg in docs/benchmarks/.
 *
 *   node bench/run.ts --quick     levels 0, 2k, 6k; churn 10 s; notify 5 s     (make bench-quick)
 *   node bench/run.ts             levels 0 .. 18k;  churn 20 s; notify 10 s; each twice, medians (make bench)
 *   node bench/run.ts --only restart,kill [--quick]    just these scenarios, of: memory, churn, notify-person,
 *                                 broadcast-1k, notify-paced, broadcast-paced, every-client (the four again with
 *                                 18,000 clients connected), broadcast-18k, can-connect, pairs (the gateway and
 *                                 Socket.IO side by side: every `_vs_socketio` ratio, pairedRatios), floors (the
 *                                 machine's, floorScenario), restart, kill (bench/failover.ts)
 *
 * Ports 25000+ (below the ephemeral range). Logs in bench/.run/. Everything started is stopped in `finally`.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { restartScenario, killScenario, type FailoverContext } from './failover.ts';
import { floorScenario } from './floors.ts';
import { GATEWAY_NODE_ARGS, median, metric, ROOT, sleep, start, startLoad, startRedis, stop, stopAll, waitFor, rssKb, Sampler, type Proc } from './procs.ts';
import { writeReport, type Level, type Results } from './report.ts';

const QUICK = process.argv.includes('--quick');
const LEVELS = QUICK ? [0, 2000, 6000] : [0, 2000, 6000, 10000, 14000, 18000];
const CHURN_S = QUICK ? 10 : 20;
/**
 * Seconds of each churn run not counted, as the published methodology's 5: a server started afresh before its
 * churn is slower while it warms up (by hand, three 5-s bare-peer churns in a row on one server read 5,693,
 * 7,049 and 8,632/s; on a fresh server each, 5,398, 5,439 and 5,225/s).
 */
const CHURN_WARMUP_S = QUICK ? 2 : 5;
const NOTIFY_S = QUICK ? 5 : 10;
/**
 * Seconds of each paced one-person run: the published runs' 60. Its figure is a tail (p99 of 1,000 a second), which
 * ten seconds decide by the 100 slowest deliveries: one stall of ~120 ms (the node's ping sweep, when it pinged all
 * its clients at once; here a C process sleeping 1 ms at a time also wakes 5-35 ms late at this load) made a run read 20-30 ms.
 */
const PACED_S = QUICK ? 5 : 60;
/**
 * Seconds of the same emits before each notify run, delivered but not counted. Each run connects its 1,000
 * listeners just before (the published runs' listeners were connected by another process before the HTTP load
 * began), and the young-generation collections of the next second copy their objects: pauses of 4-10 ms in the
 * gateway's `--trace-gc`, against 0.5-1.5 ms after. By hand, paced p99 over eight runs each, alternated: 1.98-4.27
 * ms (median 3.6) straight away, 1.59-2.68 ms (median 1.97) after 2 s of emits.
 */
const NOTIFY_WARMUP_S = QUICK ? 1 : 2;
/** The issue's figures are medians of two runs: each churn and notify run is made twice (once when quick). */
const RATE_RUNS = QUICK ? 1 : 2;
const RUN_DIR = `${ROOT}bench/.run`;
const OUT_DIR = `${ROOT}docs/benchmarks`;
const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
const PEER_LOAD = `${ROOT}bench/peer-load.ts`;
const ONLY = process.argv.includes('--only') ? new Set(process.argv[process.argv.indexOf('--only') + 1]?.split(',')) : undefined;
const wanted = (scenario: string): boolean => ONLY === undefined || ONLY.has(scenario);
/** Scenarios with processes of their own, run after the targets. */
const FAILOVER: Array<[string, (ctx: FailoverContext) => Promise<void>]> = [['restart', restartScenario], ['kill', killScenario]];
/** Scenarios that start what they measure themselves, after the targets' own runs. */
const OWN_PROCESSES = new Set(['pairs', 'floors', ...FAILOVER.map(([name]) => name)]);
/** The three targets run in turn only when a scenario of theirs is wanted. */
const TARGETS_WANTED = ONLY === undefined || [...ONLY].some((name) => !OWN_PROCESSES.has(name));

type TargetName = 'gateway' | 'socketio' | 'bare';
interface Target { name: TargetName; port: number; redisPort: number; server?: Proc }

const results: Results = { quick: QUICK, startedAt: new Date().toISOString(), levels: LEVELS, figures: {}, memory: {}, runs: {}, errors: [], commands: [], samples: [] };
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
let redis: Redis | undefined;
const sampler = new Sampler(async () => (redis ? Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]) : undefined));

function record(name: string, value: number | undefined): void {
  if (value !== undefined && Number.isFinite(value)) results.figures[name] = Math.round(value * 1000) / 1000;
}
const prefix = (t: Target): string => (t.name === 'gateway' ? '' : `${t.name}_`);

/** A load generator run to its end; its report (wsload --json, or peer-load's last stdout line). */
function runLoad(t: Target, args: string[], timeoutS: number): Promise<Record<string, any>> {
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
function watchLoad(proc: Proc): void {
  sampler.watch(`load ${++loads}`, proc.child.pid!);
}

async function serverStats(t: Target): Promise<{ clients: number; heapUsed: number | undefined }> {
  if (t.name !== 'gateway') return (await (await fetch(`http://127.0.0.1:${t.port}/stats`)).json()) as { clients: number; heapUsed: number };
  const [clients, heapUsed] = await Promise.all([metric(t.port, 'herald_subscriptions'), metric(t.port, 'herald_nodejs_heap_size_used_bytes')]);
  return { clients: clients ?? NaN, heapUsed };
}

async function startTarget(t: Target): Promise<void> {
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
async function growFill(t: Target, clients: number, fills: Proc[], held: number, firstIndex = 0): Promise<void> {
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

async function stopFills(t: Target, fills: Proc[]): Promise<void> {
  await Promise.all(fills.map((fill) => stop(fill, 'SIGINT', 20_000)));
  await waitFor(`${t.name} back to 0 clients`, async () => (await serverStats(t)).clients === 0, 30_000).catch(() => {});
}

/** Kernel slab (/proc/meminfo), KB: every TCP socket lives there, both ends of a loopback connection alike. */
function slabKb(): number {
  return Number(/^Slab:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1]);
}

/** Grow to `clients`, force a GC in the server, and read RSS, heap, Redis and the kernel's slab. */
async function memoryLevel(t: Target, clients: number, fills: Proc[], held: number): Promise<Level> {
  await growFill(t, clients, fills, held);
  // The servers run with bench/gc-preload.ts: SIGUSR2 makes them collect, so heap and RSS hold live data only.
  // Twice: what the first collection frees only through weak callbacks and finalizers goes in the second.
  t.server!.child.kill('SIGUSR2');
  await sleep(1000);
  t.server!.child.kill('SIGUSR2');
  await sleep(2000);
  const stats = await serverStats(t);
  const level: Level = { clients, rssKb: rssKb(t.server!.child.pid!), redisUsedMemory: Number(/used_memory:(\d+)/.exec(await redis!.info('memory'))?.[1]), slabKb: slabKb() };
  if (stats.heapUsed !== undefined) level.heapUsed = stats.heapUsed;
  return level;
}

/** KB per client between 6k (or the first level with clients) and the last level. */
function slopeKb(levels: Level[], value: (l: Level) => number | undefined): number | undefined {
  const from = levels.find((l) => l.clients === 6000 && l !== levels.at(-1)) ?? levels.find((l) => l.clients > 0);
  const to = levels.at(-1);
  if (!from || !to || from === to) return undefined;
  const [a, b] = [value(from), value(to)];
  return a === undefined || b === undefined ? undefined : (b - a) / (to.clients - from.clients);
}

/** One pass over the levels, from a fresh server (the caller's): each level's reading. */
async function memoryLevels(t: Target, run: number): Promise<Level[]> {
  const levels: Level[] = [];
  const fills: Proc[] = [];
  try {
    for (const clients of LEVELS) {
      sampler.phase = `${t.name} memory ${run} ${clients}`;
      levels.push(await memoryLevel(t, clients, fills, levels.at(-1)?.clients ?? 0));
    }
  } finally {
    await stopFills(t, fills);
  }
  return levels;
}

const MEMORY_FIGURES: Array<[figure: string, value: (l: Level) => number | undefined]> = [
  ['node_rss_kb_per_client', (l) => l.rssKb],
  ['node_heap_kb_per_client', (l) => (l.heapUsed === undefined ? undefined : l.heapUsed / 1024)],
  ['redis_kb_per_client', (l) => l.redisUsedMemory / 1024],
  ['kernel_slab_kb_per_connection', (l) => l.slabKb],
];

/**
 * The levels twice, each pass on a fresh server, and each slope the median of the two passes (as the rates are):
 * one pass's heap slope read anywhere from 2.35 to 3.07 KB on the same code, a level now and then holding 5-10 MB
 * more than the passes before and after it. The table and chart show the last pass; results.json keeps both.
 */
async function memoryScenario(t: Target): Promise<void> {
  const passes: Level[][] = [];
  for (let run = 1; run <= RATE_RUNS; run++) {
    if (run > 1) await freshTarget(t);
    const levels = await memoryLevels(t, run);
    passes.push(levels);
    results.runs[`${t.name} memory ${run}`] = Object.fromEntries(MEMORY_FIGURES.map(([figure, value]) => [figure, slopeKb(levels, value)]));
  }
  results.memory[t.name] = passes.at(-1)!;
  for (const [figure, value] of MEMORY_FIGURES) {
    record(`${prefix(t)}${figure}`, median(passes.map((levels) => slopeKb(levels, value)).filter((slope) => slope !== undefined)));
  }
}

/** The listeners of each notify run. The other clients connected meanwhile (a fill) are idle, each with its own subscription. */
const NOTIFY_CLIENTS = 1000;
/** Scenario 3: the clients connected during the notify runs. Scenario 4: every client (18,000), the runs once more. */
const CONNECTED = QUICK ? 2000 : 10_000;
const EVERY_CLIENT = QUICK ? undefined : LEVELS.at(-1)!;

type Take = (r: Record<string, any>) => Record<string, number | undefined>;
type Step = [name: string, args: string[], take: Take];

/** Each step `runs` times; each figure is the median of its runs. Runs are kept as "<target> <phase><step> <run>". */
async function runSteps(t: Target, steps: Step[], runs: number, phase = ''): Promise<void> {
  for (const [name, args, take] of steps) {
    sampler.phase = `${t.name} ${phase}${name}`;
    const taken: Array<Record<string, number | undefined>> = [];
    for (let run = 1; run <= runs; run++) {
      try {
        const out = await runLoad(t, args, CHURN_WARMUP_S + NOTIFY_WARMUP_S + Math.max(CHURN_S, NOTIFY_S, PACED_S) + 120);
        results.runs[`${t.name} ${phase}${name} ${run}`] = out;
        taken.push(take(out));
      } catch (error) { results.errors.push(`${t.name} ${phase}${name} ${run}: ${(error as Error).message}`); }
    }
    recordMedians(taken);
  }
}

/**
 * Each figure of several runs, as the median of its values; a loss (`*_lost`) or a reach (`*_reached_pct`) as the
 * worst of them instead, since "none lost" must hold in every run.
 */
function recordMedians(taken: Array<Record<string, number | undefined>>): void {
  for (const figure of new Set(taken.flatMap((values) => Object.keys(values)))) {
    const values = taken.map((run) => run[figure]).filter((value) => value !== undefined);
    const worst = figure.endsWith('_lost') ? Math.max : figure.endsWith('_reached_pct') ? Math.min : undefined;
    record(figure, worst && values.length > 0 ? worst(...values) : median(values));
  }
}

/**
 * The server's CPU per emit over a notify run's measured seconds: its samples wholly inside them (one a second, each
 * over the second before it), their mean share of a core, over the emits answered a second. Undefined without them.
 */
function usPerEmit(t: Target, r: Record<string, any>): number | undefined {
  const { from, to } = (r.window ?? {}) as { from?: number; to?: number };
  const emitsPerSecond = r.rates?.emitsPerSecond as number | undefined;
  if (from === undefined || to === undefined || !emitsPerSecond) return undefined;
  const shares = sampler.samples.filter((s) => s.t - 1000 >= from && s.t <= to && s.procs[t.name]).map((s) => s.procs[t.name]!.cpuPct);
  return shares.length === 0 ? undefined : (shares.reduce((a, b) => a + b, 0) / shares.length) * 1e4 / emitsPerSecond;
}

/** Scenario 3's runs (and 4's, with `figure` naming them apart): one person each, unpaced and at 1,000/s; a broadcast to the 1,000 listeners, unpaced and 5/s. */
function notifySteps(t: Target, figure: (name: string) => string): Step[] {
  const listeners = ['--clients', String(NOTIFY_CLIENTS), '-c', '100', '-w', String(NOTIFY_WARMUP_S)];
  const notify = (seconds: number, ...extra: string[]): string[] => (t.name === 'gateway'
    ? ['notify', `http://127.0.0.1:${t.port}`, ...listeners, '-d', String(seconds), ...extra]
    : ['notify', t.name, `ws://127.0.0.1:${t.port}`, ...listeners, '-d', String(seconds), ...extra]);
  const rate = (r: Record<string, any>): number | undefined => r.rates?.notificationsPerSecond;
  const delivery = (r: Record<string, any>): Record<string, number> | undefined => r.latency?.delivery;
  return [
    ['notify-person', notify(NOTIFY_S), (r) => ({ [figure('notify_person_per_s')]: rate(r), [figure('notify_person_us_per_emit')]: usPerEmit(t, r) })],
    ['broadcast-1k', notify(NOTIFY_S, '--broadcast'), (r) => ({ [figure('broadcast_1k_per_s')]: rate(r) })],
    ['notify-paced', notify(PACED_S, '-R', '1000'), (r) => ({ [figure('paced_p50_ms')]: delivery(r)?.p50, [figure('paced_p99_ms')]: delivery(r)?.p99 })],
    ['broadcast-paced', notify(NOTIFY_S, '--broadcast', '-R', '5'), (r) => ({ [figure('broadcast_paced_p50_ms')]: delivery(r)?.p50, [figure('broadcast_paced_last_ms')]: delivery(r)?.max })],
  ];
}

/** Scenario 2's run: both tokens, REGISTER, leave, 100 at a time. */
function churnStep(t: Target, figure = (name: string): string => `${prefix(t)}${name}`): Step {
  const ws = `ws://127.0.0.1:${t.port}`;
  const args = t.name === 'gateway'
    ? ['churn', ws, '-c', '100', '-w', String(CHURN_WARMUP_S), '-d', String(CHURN_S), '--register', 'announcements', '--per-client', '--tokens', 'both']
    : ['churn', t.name, ws, '-c', '100', '-w', String(CHURN_WARMUP_S), '-d', String(CHURN_S)];
  return ['churn', args, (r) => ({ [figure('churn_subscribe_per_s')]: r.rates?.clientsPerSecond })];
}

async function loadScenarios(t: Target): Promise<void> {
  if (wanted('churn')) await runSteps(t, [churnStep(t)], RATE_RUNS);
  const steps = notifySteps(t, (name) => `${prefix(t)}${name}`).filter(([name]) => wanted(name));
  const everyClient = EVERY_CLIENT !== undefined && wanted('every-client');
  if (steps.length === 0 && !everyClient) return;
  const fills: Proc[] = [];
  try {
    sampler.phase = `${t.name} fill`;
    await growFill(t, CONNECTED - NOTIFY_CLIENTS, fills, 0, NOTIFY_CLIENTS);
    await runSteps(t, steps, RATE_RUNS);
    if (!everyClient) return;
    sampler.phase = `${t.name} fill`;
    await growFill(t, EVERY_CLIENT - NOTIFY_CLIENTS, fills, CONNECTED - NOTIFY_CLIENTS, NOTIFY_CLIENTS);
    // No target on these: one run each.
    await runSteps(t, notifySteps(t, (name) => `${prefix(t)}every_client_${name}`), 1, 'every-client ');
  } finally {
    await stopFills(t, fills);
  }
}

/**
 * Scenario 4 with every client there: 18,000 listeners (over 3 processes) told by a broadcast a second for 10 s;
 * once they are all connected, 100 other clients are each named in turn, 100 emits a second for 5 s, so that
 * some of those land while a broadcast is being written. The slowest delivery of the broadcasts is the last
 * client told of the slowest one; the one-person p99 is what a fan-out costs a person's notification.
 */
async function broadcastScenario(t: Target): Promise<void> {
  const http = `http://127.0.0.1:${t.port}`;
  const everyone = LEVELS.at(-1)!;
  sampler.phase = `${t.name} broadcast-18k`;
  const broadcasts = runLoad(t, ['notify', http, '--clients', String(everyone), '--per-worker', '6000', '-c', '1', '-R', '1', '-d', '10', '--broadcast'], 300);
  await waitFor(`${everyone} listeners`, async () => (await serverStats(t)).clients >= everyone, 120_000);
  // Another event: the broadcast's listeners, without criteria, would get every `announcements` emit too.
  const person = await runLoad(t, ['notify', http, '--clients', '100', '--register', 'order-updates', '-c', '1', '-R', '100', '-d', '5'], 120);
  const broadcast = await broadcasts;
  results.runs[`${t.name} broadcast-18k`] = broadcast;
  results.runs[`${t.name} person-during-broadcast`] = person;
  record('broadcast_18k_last_ms', broadcast.latency?.delivery?.max);
  // No target: the median broadcast's last one told, to show whether the slowest of the ten is typical.
  record('broadcast_18k_last_p50_ms', broadcast.perEmit?.lastTold?.p50);
  record('person_during_broadcast_ms', person.latency?.delivery?.p99);
}

/**
 * Issue 5: the subscribe rate (both tokens + REGISTER + leave, 100 at a time) of an event without code and of the
 * three events with can-connect code. Each event with code runs beside a run without code, and its ratio is
 * taken against that run: on this machine the rate drifts by 10-20% over a few minutes (the no-code rate rose
 * from 4,222 to 5,500/s over one scenario), and a pair measured a few seconds apart shares the drift. The pair's
 * order alternates from round to round (no code first, then second), so that a drift within pairs does not
 * lean every ratio the same way; five rounds, since one pair's ratio still swings ±15% here (the isolate's read
 * 79%, 88% and 69% in three rounds of one run, 79-108% in another). Figures: the median over the rounds of each
 * event's rate and of its ratio to its own no-code run.
 */
const CODE_EVENTS: Array<[string, string]> = [
  ['checked-token', 'subscribe_isolate_token'],
  ['checked-database', 'subscribe_isolate_database'],
  ['checked-sandbox', 'subscribe_sandbox'],
];
const NO_CODE_EVENT = 'announcements';

async function codeScenario(t: Target): Promise<void> {
  const seconds = QUICK ? 5 : 10;
  const churn = async (event: string, run: string): Promise<number> => {
    sampler.phase = `${t.name} can-connect ${event}`;
    const args = ['churn', `ws://127.0.0.1:${t.port}`, '-c', '100', '-w', '2', '-d', String(seconds), '--register', event, '--tokens', 'both'];
    const out = await runLoad(t, args, seconds + 60);
    results.runs[`${t.name} can-connect ${run}`] = out;
    return out.rates?.clientsPerSecond;
  };
  const noCode: number[] = [];
  const rates = new Map<string, number[]>(CODE_EVENTS.map(([, figure]) => [figure, []]));
  const ratios = new Map<string, number[]>(CODE_EVENTS.map(([, figure]) => [figure, []]));
  for (let round = 1; round <= (QUICK ? 1 : 5); round++) {
    for (const [event, figure] of CODE_EVENTS) {
      const noCodeRun = (): Promise<number> => churn(NO_CODE_EVENT, `${NO_CODE_EVENT} beside ${event} ${round}`);
      const codeRun = (): Promise<number> => churn(event, `${event} ${round}`);
      let base: number;
      let rate: number;
      if (round % 2 === 0) {
        rate = await codeRun();
        base = await noCodeRun();
      } else {
        base = await noCodeRun();
        rate = await codeRun();
      }
      noCode.push(base);
      rates.get(figure)!.push(rate);
      ratios.get(figure)!.push(rate / base);
    }
  }
  record('subscribe_no_code_per_s', median(noCode));
  for (const [, figure] of CODE_EVENTS) {
    record(`${figure}_per_s`, median(rates.get(figure)!));
    record(`${figure}_vs_no_code`, median(ratios.get(figure)!));
  }
}

/**
 * The rate scenarios run on a fresh server and Redis, not on what the memory levels left, so that they measure
 * themselves: an earlier gateway's churn and notify rates read 20-35% lower after 18,000 clients came and left
 * (Socket.IO's hardly moved). Today's churn reads the same on a fresh node and after such a fill (by hand:
 * 3,954-4,079/s fresh, 4,109-4,250/s after).
 */
async function freshTarget(t: Target): Promise<void> {
  await stopTarget(t);
  await startTarget(t);
}

/** The Redis client startTarget opened (the memory levels' and the sampler's), closed. */
function closeRedisClient(): void {
  redis?.disconnect();
  redis = undefined;
}

async function stopTarget(t: Target): Promise<void> {
  sampler.unwatch(t.name);
  closeRedisClient();
  await stopAll();
}

async function benchTarget(t: Target): Promise<void> {
  try {
    await startTarget(t);
    if (wanted('memory')) {
      try { await memoryScenario(t); } catch (error) { results.errors.push(`${t.name} memory: ${(error as Error).message}`); }
      await freshTarget(t);
    }
    await loadScenarios(t);
    if (t.name === 'gateway' && wanted('broadcast-18k')) {
      try { await broadcastScenario(t); } catch (error) { results.errors.push(`${t.name} broadcast-18k: ${(error as Error).message}`); }
    }
    if (t.name === 'gateway' && wanted('can-connect')) {
      try { await codeScenario(t); } catch (error) { results.errors.push(`${t.name} can-connect: ${(error as Error).message}`); }
    }
  } catch (error) {
    results.errors.push(`${t.name}: ${(error as Error).message}`);
  } finally {
    await stopTarget(t);
  }
}

/**
 * The `_vs_socketio` ratios, from runs made side by side. Each target's own runs above are 10-20 minutes from the
 * other's, and rates here swing up to 2× from one run to the next (Socket.IO's unpaced one-person notify read
 * 16,082 then 8,883/s in two consecutive runs of 2026-12-01): the ratio of such medians fell either side of its
 * target (2.28× and 1.71× half an hour apart). So the gateway and Socket.IO are both started and run the steps of
 * their own runs in the same order, as the reference's server does: churn, then a fill of 9,000 idle clients each
 * (held), the unpaced one-person notify, the unpaced broadcast to 1,000. In each round of a step the two run one
 * after the other, the gateway first in odd rounds and Socket.IO first in even ones, so that a drift within a round
 * does not lean every ratio the same way; each ratio is the median of its rounds' ratios. The server not measured
 * idles meanwhile (its clients' pings only). The churn comes first, as in the targets' own runs, so that the pairs
 * measure servers in the state those runs do: one that has seen clients come and go is not a fresh one (by hand on
 * 2026-12-02, two Socket.IO servers side by side, one after two churns: 9,550, 12,022 and 13,033/s against the
 * fresh one's 12,110, 13,451 and 14,330/s; the notify ratio of the first full run so made, 1.57×, is within what
 * three rounds on fresh servers had read, 1.62-2.00×). `--only pairs` runs them all.
 */
const PAIR_ROUNDS = QUICK ? 1 : 5;

async function pairedRatios(pair: [Target, Target]): Promise<void> {
  const fills = new Map<Target, Proc[]>(pair.map((t) => [t, []]));
  // The pairs' own figures (rates, CPU per emit) apart from the targets' own runs': `pairs_…`, `socketio_pairs_…`.
  const named = (t: Target) => (name: string): string => `${prefix(t)}pairs_${name}`;
  const stepOf = (t: Target, name: string): Step => notifySteps(t, named(t)).find(([step]) => step === name)!;
  try {
    for (const t of pair) {
      await startTarget(t);
      // Its Redis client serves the memory levels and one target's sampling: one per target would leak the first.
      closeRedisClient();
    }
    await pairedRounds(pair, (t) => churnStep(t, named(t)), 'churn_subscribe_vs_socketio');
    for (const t of pair) {
      sampler.phase = `${t.name} pairs fill`;
      await growFill(t, CONNECTED - NOTIFY_CLIENTS, fills.get(t)!, 0, NOTIFY_CLIENTS);
    }
    await pairedRounds(pair, (t) => stepOf(t, 'notify-person'), 'notify_person_vs_socketio');
    await pairedRounds(pair, (t) => stepOf(t, 'broadcast-1k'), 'broadcast_1k_vs_socketio');
  } catch (error) {
    results.errors.push(`pairs: ${(error as Error).message}`);
  } finally {
    for (const [t, held] of fills) await stopFills(t, held);
    for (const t of pair) sampler.unwatch(t.name);
    await stopAll();
  }
}

/**
 * PAIR_ROUNDS rounds of one step on both targets, order alternating; `figure` is the median of ours / theirs, and
 * each target's figures of the step are the medians of its rounds.
 */
async function pairedRounds(pair: [Target, Target], stepFor: (t: Target) => Step, figure: string): Promise<void> {
  const steps = new Map(pair.map((t) => [t, stepFor(t)]));
  const taken = new Map(pair.map((t): [Target, Array<Record<string, number | undefined>>] => [t, []]));
  const ratios: number[] = [];
  for (let round = 1; round <= PAIR_ROUNDS; round++) {
    const rates = new Map<Target, number | undefined>();
    for (const t of round % 2 === 1 ? pair : pair.toReversed()) {
      const [name, args, take] = steps.get(t)!;
      sampler.phase = `${t.name} pairs ${name}`;
      const out = await runLoad(t, args, CHURN_WARMUP_S + NOTIFY_WARMUP_S + Math.max(CHURN_S, NOTIFY_S) + 120);
      results.runs[`${t.name} pairs ${name} ${round}`] = out;
      taken.get(t)!.push(take(out));
      rates.set(t, out.rates?.notificationsPerSecond ?? out.rates?.clientsPerSecond);
    }
    const [ours, theirs] = pair.map((t) => rates.get(t));
    if (ours !== undefined && theirs) ratios.push(ours / theirs);
  }
  record(figure, median(ratios));
  for (const t of pair) recordMedians(taken.get(t)!);
}

mkdirSync(RUN_DIR, { recursive: true });
mkdirSync(OUT_DIR, { recursive: true });
const targets: Target[] = [
  { name: 'gateway', port: 25010, redisPort: 25001 },
  { name: 'socketio', port: 25020, redisPort: 25002 },
  { name: 'bare', port: 25030, redisPort: 25003 },
];
const stopOnSignal = (): void => void stopAll().finally(() => process.exit(130));
process.once('SIGINT', stopOnSignal);
process.once('SIGTERM', stopOnSignal);
try {
  for (const t of TARGETS_WANTED ? targets : []) {
    console.error(`bench: ${t.name}`);
    await benchTarget(t);
  }
  if (wanted('floors')) {
    console.error('bench: this machine\'s floors');
    await floorScenario({ runDir: RUN_DIR, results, record, clients: LEVELS.at(-1)!, seconds: NOTIFY_S });
  }
  if (wanted('pairs')) {
    console.error('bench: gateway and socketio side by side');
    await pairedRatios([targets[0]!, targets[1]!]);
  }
  for (const [name, scenario] of FAILOVER.filter(([name]) => wanted(name))) {
    const taken: Array<Record<string, number | undefined>> = [];
    for (let run = 1; run <= RATE_RUNS; run++) {
      console.error(`bench: gateway ${name} ${run}`);
      const figures: Record<string, number | undefined> = {};
      await scenario({ quick: QUICK, run, runDir: RUN_DIR, sampler, results, record: (figure, value) => { figures[figure] = value; } });
      taken.push(figures);
    }
    recordMedians(taken);
  }
} finally {
  sampler.close();
  await stopAll();
  results.samples.push(...sampler.samples);
  // A command run twice (each rate run, an earlier run kept by --only) is listed once.
  results.commands = [...new Set(results.commands)];
  // Figures at the top level, by name, so a reader (or CI) finds them without knowing the layout.
  writeFileSync(`${OUT_DIR}/results.json`, `${JSON.stringify({ ...results.figures, ...results }, null, 2)}\n`);
  writeReport(results, OUT_DIR);
  console.error(`bench: figures ${JSON.stringify(results.figures)}${results.errors.length ? `\nbench: errors ${results.errors.join('; ')}` : ''}`);
}
