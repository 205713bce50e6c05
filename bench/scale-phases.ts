/**
 * The phases of a scale run (bench/scale.ts), in order: the levels (clients added at a steady rate, each level
 * sampled), then with every client connected: one-person notifications (wsload notify), broadcasts to everyone, a
 * rolling restart of every node, and every client leaving at once.
 */
import { attemptsFailedOf, connectingOf, Emitter, Histogram, type PoolSnapshot, reconnectFigures, registerFrame, type Roster, type RunReport, type WorkerPools } from '@herald/loadgen';
import { watchLeave } from './failover.ts';
import { ROOT, sleep, startLoad } from './procs.ts';
import type { Fleet } from './scale-fleet.ts';
import { kernelKb, reading, type MemorySeries, type Reading, type Watched } from './scale-memory.ts';
import { NOTIFY_LISTENERS, type Plan } from './scale-plan.ts';
import type { FleetSweeps, Level, ScaleResults } from './scale-results.ts';

export interface RunContext {
  plan: Plan;
  fleet: Fleet;
  clients: WorkerPools;
  roster: Roster;
  results: ScaleResults;
  series: MemorySeries;
  watched: Watched;
  runDir: string;
  began: number;
  log(line: string): void;
  /** Aborted when the run must end early (its time is up, Ctrl-C). */
  signal: AbortSignal;
  /** The held clients' figures as last read. */
  latest: { snapshot?: PoolSnapshot };
}

const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
/** The event every held client joins for the broadcasts (bench/scale.yaml): one more subscription each, without criteria. */
const AUDIENCE = 'everyone';
/** How fast the held clients join it, in all. */
const SUBSCRIBE_RATE = 20_000;
/** Clients that never got ready, as a share of those started, past which the run adds no more. */
const FAILED_SHARE = 0.01;

const mb = (kb: number): string => `${(kb / 1024).toLocaleString('en-US', { maximumFractionDigits: 0 })} MB`;
const n = (value: number): string => Math.round(value).toLocaleString('en-US');
const httpOf = (ctx: RunContext): string => `http://127.0.0.1:${ctx.fleet.nodes[0]!.port}`;

/** MemAvailable that must stay free: the plan's reserve of MemTotal. */
const reserveKb = (ctx: RunContext, r: Reading): number => (r.machine.totalKb * ctx.plan.options.reservePct) / 100;

export function describeReading(r: Reading): string {
  return `nodes ${mb(r.nodes.anonKb)}, load generator ${mb(r.loadgen.anonKb)}, Redis ${mb(r.redis.usedMemory / 1024)}, ` +
    `kernel ${mb(kernelKb(r.kernel))}, available ${mb(r.machine.availableKb)} (${Math.round((100 * r.machine.availableKb) / r.machine.totalKb)}%), CPU ${r.cpuPct ?? '-'}%`;
}

/**
 * Every process of the fleet and the load generator collects its garbage, twice a second apart (bench/gc-preload.ts).
 * The workers are forked with this process's Node.js options: they have the handler only if this process has it
 * (`make scale` starts it so); without it SIGUSR2 would end them.
 */
async function collectEverywhere(ctx: RunContext): Promise<void> {
  const workersCollect = typeof (globalThis as { gc?: unknown }).gc === 'function';
  for (let round = 0; round < 2; round++) {
    ctx.fleet.collectGarbage();
    if (workersCollect) for (const pid of ctx.clients.pids()) process.kill(pid, 'SIGUSR2');
    await sleep(1000);
  }
}

export async function sampleLevel(ctx: RunContext, phase: string, snapshot: PoolSnapshot | undefined): Promise<Level> {
  await collectEverywhere(ctx);
  await sleep(ctx.plan.options.settleS * 1000);
  const [connections, subscriptions, redisKeys] = await Promise.all([ctx.fleet.sum('herald_connections'), ctx.fleet.sum('herald_subscriptions'), ctx.fleet.redis!.db.dbsize()]);
  const level: Level = { ...(await reading(ctx.watched, ctx.began, phase, true)), connections, subscriptions, redisKeys, failed: snapshot?.failed ?? 0 };
  level.cpuPct = ctx.series.readings.at(-1)?.cpuPct;
  ctx.log(`level ${n(level.clients)}: ${n(connections)} connections, ${n(subscriptions)} subscriptions on the nodes, ${n(redisKeys)} Redis keys; ${describeReading(level)}`);
  return level;
}

/** Why the levels stop early, if they must: memory short of the reserve, or clients failing. */
function stopReason(ctx: RunContext, snapshot: PoolSnapshot): ScaleResults['stoppedBy'] | undefined {
  const latest = ctx.series.readings.at(-1);
  if (latest && latest.machine.availableKb < reserveKb(ctx, latest)) return 'memory';
  if (snapshot.failed > Math.max(100, snapshot.started * FAILED_SHARE)) return 'failures';
  return ctx.signal.aborted ? 'time' : undefined;
}

/** The levels, one after another: each filled at the plan's rate, then sampled. Answers the clients held. */
export async function fillLevels(ctx: RunContext): Promise<number> {
  const { rate } = ctx.plan.options;
  const { latest } = ctx;
  const stop = new AbortController();
  ctx.signal.addEventListener('abort', () => stop.abort(), { once: true });
  for (const level of ctx.plan.levels) {
    ctx.series.phase = `fill to ${level}`;
    const from = ctx.clients.pids().length === 0 ? 0 : (latest.snapshot?.ready ?? 0);
    const began = Date.now();
    const ticker = setInterval(() => void ctx.clients.snapshot().then((snapshot) => {
      latest.snapshot = snapshot;
      const why = stopReason(ctx, snapshot);
      if (why && !stop.signal.aborted) {
        ctx.results.stoppedBy = why;
        ctx.log(`stopping the levels: ${why === 'memory' ? `MemAvailable under ${ctx.plan.options.reservePct}% of the memory` : why}`);
        stop.abort();
      }
      const memory = ctx.series.readings.at(-1);
      ctx.log(`fill ${n(snapshot.ready)}/${n(level)} ready, ${n(connectingOf(snapshot))} connecting, ${n(snapshot.failed)} failed, ` +
        `${n(attemptsFailedOf(snapshot))} attempts failed, ` +
        `${n(snapshot.dropped)} dropped${memory ? `; ${describeReading(memory)}` : ''}`);
    }, () => undefined), 2000);
    try {
      await ctx.clients.growTo(level, rate, stop.signal);
    } finally {
      clearInterval(ticker);
    }
    latest.snapshot = await ctx.clients.snapshot();
    const record = await sampleLevel(ctx, `level ${level}`, latest.snapshot);
    record.fillRate = (latest.snapshot.ready - from) / Math.max(0.001, (Date.now() - began) / 1000 - ctx.plan.options.settleS - 2);
    ctx.results.levels.push(record);
    if (stop.signal.aborted) break;
  }
  ctx.results.stoppedBy ??= 'target';
  return latest.snapshot?.ready ?? 0;
}

/** wsload notify: 1,000 listeners of its own spread over the nodes, emits through the first node. */
export async function notifyRun(ctx: RunContext, name: string, extra: string[], seconds: number): Promise<void> {
  ctx.series.phase = `notify ${name}`;
  const jsonFile = `${ctx.runDir}/notify-${name}.json`;
  const args = ['notify', httpOf(ctx), '--ws', ctx.fleet.wsUrls.join(','), '--clients', String(NOTIFY_LISTENERS), '-w', '2', '-d', String(seconds), ...extra];
  ctx.results.commands.push(`node packages/loadgen/src/cli.ts ${args.join(' ').replace(/--ws \S+/, `--ws <the ${ctx.fleet.nodes.length} nodes' ws:// URLs>`)}`);
  ctx.log(`notify ${name}: ${args.slice(4).join(' ').replace(/--ws \S+ /, '')}`);
  const run = startLoad<RunReport>(`notify-${name}`, WSLOAD, [...args, '--quiet', '--json', jsonFile], { logFile: `${ctx.runDir}/notify-${name}.log`, timeoutS: seconds + 180, jsonFile });
  const report = await run.done;
  const delivery = report.latency.delivery!;
  ctx.results.notify[name] = {
    delivery, notificationsPerSecond: report.rates.notificationsPerSecond ?? 0, expected: report.counts.expected ?? 0, missing: report.counts.missing ?? 0,
    command: ctx.results.commands.at(-1)!,
  };
  ctx.log(`notify ${name}: ${n(report.rates.notificationsPerSecond ?? 0)}/s, delivery p50 ${delivery.p50.toFixed(2)} ms, p99 ${delivery.p99.toFixed(2)} ms, ${n(report.counts.missing ?? 0)} missing`);
}

/** Polls the held clients' figures until `done` says so or `timeoutMs` passes; answers the last figures. */
async function until(ctx: RunContext, done: (s: PoolSnapshot) => boolean, timeoutMs: number, everyMs = 250): Promise<PoolSnapshot> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const snapshot = await ctx.clients.snapshot();
    if (done(snapshot) || Date.now() >= end || ctx.signal.aborted) return snapshot;
    await sleep(everyMs);
  }
}

const SWEEP_COUNTERS = ['herald_broker_sweeps_spared_total', 'herald_broker_swept_routes_total', 'herald_broker_resyncs_total'];
const NO_SWEEPS: FleetSweeps = { spared: 0, sweptRoutes: 0, resyncs: 0 };

/** The fleet's sweep counters now (added up over its nodes), less `since`. */
async function fleetSweeps(ctx: RunContext, since = NO_SWEEPS): Promise<FleetSweeps> {
  const [spared, sweptRoutes, resyncs] = await Promise.all(SWEEP_COUNTERS.map((name) => ctx.fleet.sum(name)));
  return { spared: spared! - since.spared, sweptRoutes: sweptRoutes! - since.sweptRoutes, resyncs: resyncs! - since.resyncs };
}

/** Every held client joins the broadcast audience (one more subscription each, sampled), then the broadcasts, one after another. */
export async function broadcastPhase(ctx: RunContext, held: number): Promise<void> {
  ctx.series.phase = 'one more subscription';
  const before = ctx.results.levels.at(-1)!;
  const latest = ctx.series.readings.at(-1)!;
  // One more subscription cost the nodes 1.3-2.6 KB a client in the small runs (docs/scale.md): room for 3 above the reserve.
  const needKb = held * 3;
  if (latest.machine.availableKb - reserveKb(ctx, latest) < needKb) {
    ctx.results.errors.push(`broadcasts left out: ${mb(latest.machine.availableKb)} available, one more subscription for ${n(held)} clients needs about ${mb(needKb)} above the reserve`);
    return;
  }
  const began = Date.now();
  ctx.log(`one more subscription: every held client joins '${AUDIENCE}' (no criteria), ${n(SUBSCRIBE_RATE)}/s`);
  await ctx.clients.subscribe(registerFrame(AUDIENCE, undefined), SUBSCRIBE_RATE);
  const joined = await until(ctx, (s) => s.subscribed + s.subscribeRefused >= held, 120_000, 500);
  const seconds = (Date.now() - began) / 1000;
  const after = await sampleLevel(ctx, 'one more subscription', joined);
  ctx.results.subscription = { clients: held, accepted: joined.subscribed, refused: joined.subscribeRefused, seconds, before, after };
  for (let b = 1; b <= ctx.plan.options.broadcasts && !ctx.signal.aborted; b++) {
    ctx.series.phase = `broadcast ${b}`;
    await ctx.clients.resetDelivery();
    const sweepsBefore = await fleetSweeps(ctx);
    const emitter = new Emitter({
      httpBase: httpOf(ctx), userPath: 'bench', apiToken: ctx.roster.apiToken, connections: 1, durationS: 0.5, rate: 1,
      event: AUDIENCE, recipients: [''], weights: [joined.subscribed], timeoutMs: 120_000,
    });
    const stats = await emitter.run();
    const told = await until(ctx, (s) => s.received >= stats.expected, 120_000);
    const delivery = Histogram.from(told.delivery).summary();
    const sweeps = await fleetSweeps(ctx, sweepsBefore);
    const result = { told: told.received, of: stats.expected, answeredMs: stats.latency.summary().max, firstMs: delivery.min, halfMs: delivery.p50, lastMs: delivery.max, sweeps };
    ctx.results.broadcasts.push(result);
    ctx.log(`broadcast ${b}: ${n(result.told)} of ${n(result.of)} told; answered after ${result.answeredMs.toFixed(0)} ms; first ${result.firstMs.toFixed(0)} ms, half ${result.halfMs.toFixed(0)} ms, last ${result.lastMs.toFixed(0)} ms; lapsed nodes spared ${n(sweeps.spared)}, routes swept ${n(sweeps.sweptRoutes)}, resyncs ${n(sweeps.resyncs)}`);
    await sleep(2000);
  }
}

/** Each node in turn restarted under its clients; then, all back, a sample of them named once each: none may be missing. */
export async function restartPhase(ctx: RunContext, held: number): Promise<void> {
  ctx.series.phase = 'rolling restart';
  const from = Date.now();
  const drainsS: number[] = [];
  ctx.log(`rolling restart of ${ctx.fleet.nodes.length} nodes`);
  await ctx.fleet.rollingRestart(from, ctx.signal, (node, drainS) => {
    drainsS.push(drainS);
    ctx.log(`restarted ${node.id} (port ${node.port}): the old process drained in ${drainS.toFixed(1)} s`);
  });
  const rollS = (Date.now() - from) / 1000;
  const back = await until(ctx, (s) => s.dropped > 0 && s.back >= s.dropped, 180_000, 1000);
  const figures = reconnectFigures(back);
  ctx.log(`rolling restart: ${rollS.toFixed(1)} s; ${n(figures.dropped)} dropped, ${n(figures.back)} back, ${n(figures.away)} away; all back after ${figures.allBackS ?? '-'} s from the first drop`);
  ctx.series.phase = 'named after the restart';
  const named = Math.min(ctx.plan.options.afterRestart, held);
  const step = held / Math.max(1, named);
  const recipients = Array.from({ length: named }, (_, k) => String(NOTIFY_LISTENERS + Math.floor(k * step)));
  await ctx.clients.resetDelivery();
  const stats = named === 0 ? undefined : await new Emitter({
    httpBase: httpOf(ctx), userPath: 'bench', apiToken: ctx.roster.apiToken, connections: 10, durationS: (named - 0.5) / 1000, rate: 1000,
    event: 'announcements', recipients, weights: recipients.map(() => 1), timeoutMs: 30_000,
  }).run();
  const expected = stats?.expected ?? 0;
  const arrived = await until(ctx, (s) => s.received >= expected, 30_000);
  ctx.results.restart = {
    nodes: ctx.fleet.nodes.length, rollS, dropped: figures.dropped, back: figures.back, away: figures.away, allBackS: figures.allBackS,
    awayMs: Histogram.from(back.away).summary(), named: expected, received: arrived.received, lost: Math.max(0, expected - arrived.received), drainsS, series: figures.series,
  };
  ctx.log(`after the restart: ${n(expected)} clients named once each, ${n(arrived.received)} told, ${n(Math.max(0, expected - arrived.received))} lost`);
}

/** Every held client leaves at once (a TCP reset each): until the nodes have closed every socket, and Redis holds nothing of them. */
export async function leavePhase(ctx: RunContext, held: number, idleKeys: number): Promise<void> {
  ctx.series.phase = 'every client leaves';
  // Every node scraped at each look: twice a second, not the single node's twenty, so that the looking costs the nodes little.
  const watching = watchLeave((figure) => ctx.fleet.sum(figure), ctx.fleet.redis!.db, idleKeys, 0, 300_000, 500);
  const leftAt = Date.now();
  ctx.log(`every client leaves at once (${n(held)})`);
  await ctx.clients.close();
  const [closedAt, cleanAt] = await watching;
  ctx.results.leave = { clients: held, socketsClosedS: (closedAt - leftAt) / 1000, redisCleanS: (cleanAt - leftAt) / 1000 };
  ctx.log(`every socket closed after ${ctx.results.leave.socketsClosedS.toFixed(1)} s, Redis held nothing of them after ${ctx.results.leave.redisCleanS.toFixed(1)} s`);
}
