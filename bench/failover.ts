/**
 * Scenarios 5 and 6 of issue 4: a node restarted under its clients, and one of three nodes killed behind the
 * load balancer. The clients are wsload's (`notify --await-return`): each one the node drops comes back as an
 * application using the client SDK does (a random wait: 0 to 1 s after a 1001, 1 to 5 s after any other drop or a
 * refused attempt; the same URL and tokens, the same REGISTER);
 * once every one is back, the emitter names each client in turn and the clients count what arrives, so what was
 * lost is counted in one place. The bench does to the nodes what a deploy or a crash does, and watches the
 * nodes and Redis for what follows.
 *
 *   restart  one node on Redis, N clients: a new node process on the same port (server.reusePort), then SIGTERM
 *            to the old one (it stops listening, takes its routes out of Redis, then closes its sockets with 1001
 *            in batches); then again with the new process started only once the old one has exited (restart_cold,
 *            for comparison). All back after, away p50/p99; then
 *            1,000 notifications a second for 20 s (5 s quick), each for one client: none may be lost. Then every
 *            client leaves at once: the node's sockets all closed after, Redis back to no client after.
 *   kill     three nodes on Redis behind HAProxy (the config `make cluster` renders), N clients through it: kill -9
 *            the node holding the most. Its clients back after; its entries gone from Redis after (a survivor
 *            sweeps them once its lease, 10 s, has run out); then each client is named once, 1,000 a second.
 *
 *   restart-gap, kill-gap  the same two while the emits go on, to an event with history, the listeners resuming
 *            (issue 25; recordGap below).
 *
 * Each is run twice (once with --quick), its figures the medians of the runs (run.ts). N is 18,000 (3,000 with
 * --quick). Ports 25110-25129, below the ephemeral range. Logs in the run directory.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { keyspace } from '../packages/gateway/src/broker/redis/keys.ts';
import type { RunReport } from '@herald/loadgen';
import { GATEWAY_NODE_ARGS, metric, ROOT, start, startLoad, startRedis, stop, waitFor, type Proc, type Sampler } from './procs.ts';
import type { Results } from './results.ts';

export interface FailoverContext {
  /** A smaller run: 3,000 clients, 5 s of emits. */
  quick: boolean;
  /** Which run of the scenario this is (from 1): each is made twice, as the rates are, and its figures are medians. */
  run: number;
  runDir: string;
  sampler: Sampler;
  results: Results;
  record(name: string, value: number | undefined): void;
}

const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
const GATEWAY = `${ROOT}packages/gateway/src/main.ts`;
const CLUSTER = `${ROOT}infra/local/cluster.sh`;
const RESTART = { port: 25110, redisPort: 25111 };
/** HAProxy on `port`, node i on port + i, as `make cluster` lays a fleet out. */
const KILL = { port: 25120, nodes: 3, redisPort: 25124, statsPort: 25129 };
const CONNECT_RATE = 2000;
/**
 * A client's handshake costs wsload about as much CPU as the node's: one process holding all 18,000 ran at 100%
 * of a core while the node, at 20%, waited for REGISTERs (all back in 35 s). Several processes share the storm.
 */
const CLIENTS_PER_WORKER = 6000;
const EMIT_RATE = 1000;
/** How long wsload waits for the dropped clients to be back before it emits anyway (and counts them missing). */
const AWAIT_RETURN_S = 120;
/** The Redis keys of the fleet, under the prefix a node uses (`gw`). */
const KEYS = keyspace('gw');

const clientsOf = (ctx: FailoverContext): number => (ctx.quick ? 3000 : 18_000);
const message = (error: unknown): string => (error as Error).message;

/** A figure the scenario waits on; NaN (never equal, never larger) while the node does not report it. */
const count = async (port: number, name: string): Promise<number> => (await metric(port, name)) ?? NaN;

/** Where a gateway process logs, who samples it, and its Node.js options (default: the gateway's launch options). */
export interface GatewayLaunch {
  runDir: string;
  sampler?: Sampler;
  nodeArgs?: readonly string[];
}

/**
 * Ready when it says it listens (logged once, at info; the node logs no line per request): /readyz could be
 * answered by another node sharing the port.
 */
export async function startGateway(ctx: GatewayLaunch, name: string, port: number, env: Record<string, string>): Promise<Proc> {
  const proc = start(name, 'node', [...(ctx.nodeArgs ?? GATEWAY_NODE_ARGS), GATEWAY], { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env }, `${ctx.runDir}/${name}.log`);
  await waitFor(`${name} on ${port}`, () => proc.stdout.includes('herald gateway listening'), 60_000, 200, proc);
  ctx.sampler?.watch(name, proc.child.pid!);
  return proc;
}

interface Clients {
  proc: Proc;
  /** wsload's report once it has emitted, counted and let its clients go. */
  done: Promise<RunReport>;
}

/**
 * wsload notify in the background: `clients` listeners that come back when dropped; `emitS` of emits once all are
 * back, or (`resume`) from the start, to announcements-kept (a history), each listener resuming from its position.
 */
function startClients(ctx: FailoverContext, name: string, http: string, clients: number, emitS: number, resume = false): Clients {
  const when = resume ? ['--register', 'announcements-kept', '--resume', '--grace', '15'] : ['--await-return', String(AWAIT_RETURN_S)];
  const args = ['notify', http, '--clients', String(clients), '--connect-rate', String(CONNECT_RATE), ...when,
    '-c', '10', '-R', String(EMIT_RATE), '-d', String(emitS), '--per-worker', String(CLIENTS_PER_WORKER)];
  ctx.results.commands.push(`node packages/loadgen/src/cli.ts ${args.join(' ')}`);
  const jsonFile = `${ctx.runDir}/${name}-${Date.now()}.json`;
  const timeoutS = clients / CONNECT_RATE + AWAIT_RETURN_S + emitS + 120;
  const { proc, done } = startLoad<RunReport>(`wsload-${name}`, WSLOAD, [...args, '--quiet', '--json', jsonFile], { logFile: `${ctx.runDir}/wsload-${name}.log`, timeoutS, jsonFile });
  ctx.sampler.watch('wsload', proc.child.pid!);
  return { proc, done };
}

/** Seconds from `fromMs` to `toMs`, as a figure. */
const seconds = (fromMs: number, toMs: number): number => (toMs - fromMs) / 1000;

/** The figures every failover has: drops, when all were back, away p50/p99; the series for the chart. */
function recordReturn(ctx: FailoverContext, scenario: RestartKind | 'kill', report: RunReport): void {
  const back = report.reconnect;
  if (!back) throw new Error('wsload reported no reconnect figures');
  ctx.results.runs[`gateway ${scenario} ${ctx.run}`] = report;
  ctx.record(`${scenario}_dropped`, back.dropped);
  ctx.record(`${scenario}_all_back_s`, back.allBackS ?? undefined);
  ctx.record(`${scenario}_away_p50_ms`, report.latency.away?.p50);
  ctx.record(`${scenario}_away_p99_ms`, report.latency.away?.p99);
  // The chart shows the first run of each.
  if (ctx.run === 1) (ctx.results.reconnect ??= {})[scenario] = { clients: report.counts.listeners ?? 0, series: back.series };
  if (back.allBackS === null) ctx.results.errors.push(`${scenario} ${ctx.run}: ${back.away} of ${back.dropped} dropped clients were not back after ${AWAIT_RETURN_S} s`);
}

/**
 * Once the clients are back on the node (or the fleet: `count` reads a figure of all its nodes), watch them leave:
 * when the last socket closes, and when Redis is back to its key count with no client (epoch ms). Watching from
 * before they leave keeps the load generator's exit out of it.
 */
export async function watchLeave(
  count: (figure: string) => Promise<number>, db: Redis, idleKeys: number, clients: number, timeoutMs: number, everyMs = 50,
): Promise<[number, number]> {
  await waitFor(`${clients} clients back`, async () => (await count('herald_subscriptions')) >= clients, timeoutMs);
  return Promise.all([
    waitFor('every socket closed', async () => (await count('herald_connections')) === 0, timeoutMs, everyMs),
    waitFor('Redis back to no client', async () => (await db.dbsize()) <= idleKeys, timeoutMs, everyMs),
  ]);
}

/** Redis for a scenario, and a client of it for the bench's own look. */
async function scenarioRedis(ctx: FailoverContext, name: string, port: number): Promise<{ proc: Proc; db: Redis }> {
  const proc = await startRedis(name, port, `${ctx.runDir}/${name}.log`);
  ctx.sampler.watch(name, proc.child.pid!);
  return { proc, db: new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }) };
}

/** Nodes and clients first (a draining node still talks to Redis), then Redis. */
async function stopScenario(procs: Proc[], redis: { proc: Proc; db: Redis } | undefined): Promise<void> {
  redis?.db.disconnect();
  await Promise.all(procs.map((proc) => stop(proc)));
  if (redis) await stop(redis.proc);
}

/**
 * How the node is restarted. `restart`, a deploy's: the new process first, on the same port (server.reusePort),
 * then SIGTERM to the old one, which stops listening, takes its routes out of Redis, closes its sockets with 1001
 * in batches and exits. `restart_cold`, for comparison: SIGTERM, and the new process once the old one has exited.
 */
type RestartKind = 'restart' | 'restart_cold';

export async function restartScenario(ctx: FailoverContext): Promise<void> {
  await restartOnce(ctx, 'restart');
  await restartOnce(ctx, 'restart_cold');
}

async function restartOnce(ctx: FailoverContext, kind: RestartKind): Promise<void> {
  const clients = clientsOf(ctx);
  const { port, redisPort } = RESTART;
  const mine: Proc[] = [];
  let redis: { proc: Proc; db: Redis } | undefined;
  try {
    ctx.sampler.phase = `gateway ${kind}`;
    redis = await scenarioRedis(ctx, 'redis-restart', redisPort);
    const { db } = redis;
    const env = { REDIS_URL: `redis://127.0.0.1:${redisPort}`, HERALD_REUSE_PORT: kind === 'restart' ? '1' : '0' };
    const first = await startGateway(ctx, 'gateway-restart', port, env);
    mine.push(first);
    const idleKeys = await db.dbsize();
    const emitS = ctx.quick ? 5 : 20;
    const load = startClients(ctx, kind, `http://127.0.0.1:${port}`, clients, emitS);
    mine.push(load.proc);
    await waitFor(`${clients} clients registered`, async () => (await count(port, 'herald_subscriptions')) >= clients, 120_000, 200, load.proc);
    if (kind === 'restart') {
      mine.push(await startGateway(ctx, 'gateway-restart-next', port, env));
      await stop(first, 'SIGTERM', 40_000);
    } else {
      await stop(first, 'SIGTERM', 40_000);
      mine.push(await startGateway(ctx, 'gateway-restart-next', port, env));
    }
    const leave = watchLeave((figure) => count(port, figure), db, idleKeys, clients, (AWAIT_RETURN_S + emitS + 120) * 1000);
    // wsload's figures even when the watch fails (clients that never came back).
    const [done, left] = await Promise.allSettled([load.done, leave]);
    if (done.status === 'rejected') throw done.reason;
    recordReturn(ctx, kind, done.value);
    ctx.record(`${kind}_lost`, done.value.counts.missing);
    if (left.status === 'rejected') throw left.reason;
    if (kind !== 'restart') return;
    // wsload let every client go at once (a TCP reset each) at `leftAt`.
    const leftAt = Date.parse(done.value.leftAt!);
    ctx.record('leave_sockets_closed_s', seconds(leftAt, left.value[0]));
    ctx.record('leave_redis_clean_s', seconds(leftAt, left.value[1]));
  } catch (error) {
    ctx.results.errors.push(`${kind} ${ctx.run}: ${message(error)}`);
  } finally {
    await stopScenario(mine, redis);
  }
}

/** Where a fleet listens: HAProxy on `port`, node i (from 1) on port + i, as `make cluster` lays a fleet out. */
export interface FleetLayout { port: number; nodes: number; statsPort: number }

/**
 * HAProxy in front of the fleet, configured as `make cluster` does it, with enough processes for `clients`; its config
 * (named after `name`) and logs in `runDir`.
 */
export async function startBalancer(runDir: string, layout: FleetLayout, clients: number, name: string): Promise<Proc[]> {
  // The emitter's and the token calls' connections pass through it too.
  const lbClients = clients + 1000;
  const env = { ...process.env, PORT: String(layout.port), N: String(layout.nodes), STATS_PORT: String(layout.statsPort), LB_CLIENTS: String(lbClients) };
  const config = execFileSync(CLUSTER, ['render-haproxy'], { env, encoding: 'utf8' });
  const file = `${runDir}/haproxy-${name}.cfg`;
  writeFileSync(file, config);
  // One process holds what the open-file limit allows; past it, several share the port (SO_REUSEPORT).
  const perProcess = Number(/^\s*maxconn (\d+)/m.exec(config)?.[1]);
  const procs = Array.from({ length: Math.ceil(lbClients / perProcess) }, (_, k) =>
    start(`haproxy-${k + 1}`, 'haproxy', ['-db', '-f', file], { PATH: `${process.env.PATH}:/usr/sbin` }, `${runDir}/haproxy-${k + 1}.log`));
  await waitFor('HAProxy', async () => (await fetch(`http://127.0.0.1:${layout.port}/readyz`)).ok, 30_000);
  return procs;
}

interface FleetNode { id: string; port: number; proc: Proc }

/** The node holding the most connections, and how many. */
async function busiest(nodes: FleetNode[]): Promise<[FleetNode, number]> {
  const held = await Promise.all(nodes.map((node) => count(node.port, 'herald_connections')));
  const most = Math.max(...held);
  return [nodes[held.indexOf(most)]!, most];
}

/** A kill scenario's processes, for `run`: its Redis (and the bench's client of it), three nodes behind HAProxy. */
interface KillFleet {
  db: Redis;
  nodes: FleetNode[];
  clients: number;
  /** What the scenario starts besides, stopped with the rest. */
  procs: Proc[];
}

/** Redis, three nodes and HAProxy, `run` with them; a failure is listed as `<name> <run>`; everything stopped after. */
async function onKillFleet(ctx: FailoverContext, name: string, phase: string, run: (fleet: KillFleet) => Promise<void>): Promise<void> {
  const mine: Proc[] = [];
  let redis: { proc: Proc; db: Redis } | undefined;
  try {
    ctx.sampler.phase = `gateway ${phase}`;
    redis = await scenarioRedis(ctx, `redis-${name}`, KILL.redisPort);
    const nodes = await Promise.all(Array.from({ length: KILL.nodes }, async (_, i): Promise<FleetNode> => {
      const [id, port] = [`bench-node-${i + 1}`, KILL.port + i + 1];
      const proc = await startGateway(ctx, `gateway-${id}`, port, { REDIS_URL: `redis://127.0.0.1:${KILL.redisPort}`, HERALD_NODE_ID: id });
      return { id, port, proc };
    }));
    const clients = clientsOf(ctx);
    mine.push(...nodes.map((node) => node.proc), ...(await startBalancer(ctx.runDir, KILL, clients, 'kill')));
    await run({ db: redis.db, nodes, clients, procs: mine });
  } catch (error) {
    ctx.results.errors.push(`${name} ${ctx.run}: ${message(error)}`);
  } finally {
    await stopScenario(mine, redis);
  }
}

/** Until the fleet's nodes hold `clients` subscriptions, or `feeder` exits. */
async function allRegistered({ nodes, clients }: KillFleet, feeder: Proc): Promise<void> {
  const registered = async (): Promise<number> => (await Promise.all(nodes.map((node) => count(node.port, 'herald_subscriptions')))).reduce((a, b) => a + b);
  await waitFor(`${clients} clients registered`, async () => (await registered()) >= clients, 120_000, 200, feeder);
}

export function killScenario(ctx: FailoverContext): Promise<void> {
  return onKillFleet(ctx, 'kill', 'kill -9', async (fleet) => {
    const { db, nodes, clients } = fleet;
    // Each client named once, after every one is back.
    const load = startClients(ctx, 'kill', `http://127.0.0.1:${KILL.port}`, clients, (clients - 0.5) / EMIT_RATE);
    fleet.procs.push(load.proc);
    await allRegistered(fleet, load.proc);
    const [victim, held] = await busiest(nodes);
    const killedAt = Date.now();
    victim.proc.child.kill('SIGKILL');
    const swept = waitFor(`${victim.id} swept from Redis`, async () =>
      (await db.exists(KEYS.nodeBuckets(victim.id))) === 0 && (await db.zscore(KEYS.nodes, victim.id)) === null, 60_000, 50);
    const [sweptAt, report] = await Promise.all([swept, load.done]);
    recordReturn(ctx, 'kill', report);
    ctx.record('kill_held', held);
    ctx.record('kill_swept_s', seconds(killedAt, sweptAt));
    const named = report.counts.emitsSent ?? 0;
    if (named > 0) ctx.record('kill_next_emit_reached_pct', (100 * Math.min(report.counts.received ?? 0, named)) / named);
  });
}

/**
 * Issue 25: the same failovers while the emits go on, to an event with history (announcements-kept), the listeners
 * resuming from their last position as the client SDK does (`wsload notify --resume`): every notification emitted to
 * a listener while it was away should reach it once it is back. Of those, the share that did:
 * `<scenario>_gap_recovered_pct` = replayed / (replayed + missing), replayed counted by the nodes the listeners came
 * back to (herald_history_replayed_total), missing by wsload (answered emits whose notification never arrived; it
 * drops and counts repeats: `_gap_duplicates`). `_gap_missed` is replayed + missing: how many the gap held.
 */
function recordGap(ctx: FailoverContext, scenario: string, report: RunReport, replayed: number): void {
  ctx.results.runs[`gateway ${scenario} ${ctx.run}`] = report;
  const missing = report.counts.missing ?? 0;
  ctx.record(`${scenario}_missed`, replayed + missing);
  if (replayed + missing > 0) ctx.record(`${scenario}_recovered_pct`, (100 * replayed) / (replayed + missing));
  ctx.record(`${scenario}_duplicates`, report.counts.duplicates);
  ctx.record(`${scenario}_unrecovered`, report.counts.unrecovered);
}

/** Once the emits have begun (the nodes' appends), and a little more: the failover lands in the middle of them. */
async function emitsUnderWay(ports: number[]): Promise<void> {
  const appends = async (): Promise<number> => (await Promise.all(ports.map((port) => count(port, 'herald_history_appends_total')))).reduce((a, b) => a + b, 0);
  await waitFor('emits under way', async () => (await appends()) > 0, 120_000);
  await new Promise((resolve) => setTimeout(resolve, 2000));
}

/** The restart (new process first) while emits go on: replays on the new process. */
export async function restartGapScenario(ctx: FailoverContext): Promise<void> {
  const clients = clientsOf(ctx);
  const { port, redisPort } = RESTART;
  const mine: Proc[] = [];
  let redis: { proc: Proc; db: Redis } | undefined;
  try {
    ctx.sampler.phase = 'gateway restart-gap';
    redis = await scenarioRedis(ctx, 'redis-restart-gap', redisPort);
    const env = { REDIS_URL: `redis://127.0.0.1:${redisPort}`, HERALD_REUSE_PORT: '1' };
    const first = await startGateway(ctx, 'gateway-restart-gap', port, env);
    mine.push(first);
    const load = startClients(ctx, 'restart-gap', `http://127.0.0.1:${port}`, clients, ctx.quick ? 10 : 20, true);
    mine.push(load.proc);
    await waitFor(`${clients} clients registered`, async () => (await count(port, 'herald_subscriptions')) >= clients, 120_000, 200, load.proc);
    await emitsUnderWay([port]);
    mine.push(await startGateway(ctx, 'gateway-restart-gap-next', port, env));
    await stop(first, 'SIGTERM', 40_000);
    const report = await load.done;
    recordGap(ctx, 'restart_gap', report, await count(port, 'herald_history_replayed_total'));
  } catch (error) {
    ctx.results.errors.push(`restart-gap ${ctx.run}: ${message(error)}`);
  } finally {
    await stopScenario(mine, redis);
  }
}

/** kill -9 of the busiest of three nodes while emits go on: replays on the survivors. */
export function killGapScenario(ctx: FailoverContext): Promise<void> {
  return onKillFleet(ctx, 'kill-gap', 'kill-gap', async (fleet) => {
    const { nodes, clients } = fleet;
    const load = startClients(ctx, 'kill-gap', `http://127.0.0.1:${KILL.port}`, clients, ctx.quick ? 10 : 20, true);
    fleet.procs.push(load.proc);
    await allRegistered(fleet, load.proc);
    await emitsUnderWay(nodes.map((node) => node.port));
    const [victim] = await busiest(nodes);
    victim.proc.child.kill('SIGKILL');
    const report = await load.done;
    const survivors = nodes.filter((node) => node !== victim);
    const replayed = (await Promise.all(survivors.map((node) => count(node.port, 'herald_history_replayed_total')))).reduce((a, b) => a + b, 0);
    recordGap(ctx, 'kill_gap', report, replayed);
  });
}
