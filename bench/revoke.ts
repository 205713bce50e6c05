/**
 * Issue 26: `revoke_all_nodes_ms`, how fast the control API reaches a person on every node. Three nodes on one Redis,
 * each holding idle clients of other people (a fill); one person with two connections on each node; one call to
 * POST .../disconnect on the first node, timed from the call to the last of the person's six sockets closed. Made
 * again with the person connected anew, 100 times (20 with --quick): the figure is the p99 of the cycles, beside
 * their p50. The first WARMUP cycles are not counted, as the other scenarios' first seconds: the first of a run runs
 * cold code on every node. It times a disconnect, not a revoke: a revoke makes the same broadcast and the same closes,
 * after one more write to Redis (its record), and its tokens would then need a new second to be issued in for every
 * cycle.
 */
import WebSocket from 'ws';
import { startGateway, type FailoverContext } from './failover.ts';
import { ROOT, start, startRedis, stop, waitFor, type Proc } from './procs.ts';

/** Node i on BASE_PORT + i, Redis on REDIS_PORT; below the ephemeral range. */
const BASE_PORT = 25130;
const REDIS_PORT = 25139;
const NODES = 3;
const CONNECTIONS_PER_NODE = 2;
const WARMUP = 3;
const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;

interface Timing { p50: number; p99: number; max: number }

function percentiles(values: number[]): Timing {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { p50: at(0.5), p99: at(0.99), max: sorted.at(-1)! };
}

async function token(http: string, body: object): Promise<string> {
  const response = await fetch(`${http}/api/system-api/bench/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const envelope = (await response.json()) as { data?: { token: string } };
  if (!envelope.data) throw new Error(`token refused: ${JSON.stringify(envelope)}`);
  return envelope.data.token;
}

/** A socket of the person, once CONNECTED; `closed` resolves with the time its close arrived. */
function connect(port: number, api: string, person: string): Promise<{ closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/?x-am-authorization=${api}&x-am-user-authorization=${person}`);
    const closed = new Promise<number>((done) => socket.once('close', () => done(performance.now())));
    socket.once('message', () => resolve({ closed }));
    socket.once('error', reject);
  });
}

/** One cycle: the person's sockets on every node, one disconnect call, the time until the last socket closed. */
async function cycle(api: string, person: string): Promise<number> {
  const sockets = await Promise.all(
    Array.from({ length: NODES * CONNECTIONS_PER_NODE }, (_, i) => connect(BASE_PORT + 1 + (i % NODES), api, person)),
  );
  const calledAt = performance.now();
  const response = await fetch(`http://127.0.0.1:${BASE_PORT + 1}/api/system-api/bench/disconnect`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-am-authorization': api },
    body: JSON.stringify({ person: { generator: 'customers', id: 'NICK' }, reconnect: true, reason: 'bench' }),
  });
  if (response.status !== 200) throw new Error(`disconnect answered ${response.status}: ${await response.text()}`);
  const closedAt = await Promise.all(sockets.map((socket) => socket.closed));
  return Math.max(...closedAt) - calledAt;
}

export async function revokeScenario(ctx: FailoverContext): Promise<void> {
  const cycles = ctx.quick ? 20 : 100;
  const bystanders = ctx.quick ? 300 : 2000;
  const mine: Proc[] = [];
  try {
    ctx.sampler.phase = 'gateway revoke';
    const redis = await startRedis('redis-revoke', REDIS_PORT, `${ctx.runDir}/redis-revoke.log`);
    mine.push(redis);
    for (let i = 1; i <= NODES; i++) {
      const env = { REDIS_URL: `redis://127.0.0.1:${REDIS_PORT}`, HERALD_NODE_ID: `bench-revoke-${i}` };
      mine.push(await startGateway(ctx, `gateway-revoke-${i}`, BASE_PORT + i, env));
    }
    for (let i = 1; i <= NODES; i++) {
      const args = ['fill', `ws://127.0.0.1:${BASE_PORT + i}`, '--clients', String(bystanders), '--rate', '2000', '--register', 'announcements', '--per-client', '--hold', '600', '--quiet'];
      ctx.results.commands.push(`node packages/loadgen/src/cli.ts ${args.join(' ')}`);
      mine.push(start(`fill-revoke-${i}`, 'node', [WSLOAD, ...args], {}, `${ctx.runDir}/fill-revoke-${i}.log`));
    }
    const http = `http://127.0.0.1:${BASE_PORT + 1}`;
    const api = await token(http, { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } });
    const person = await token(http, { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'NICK', p: 'WAHLBERG' } });
    await waitFor(`${bystanders} bystanders on each node`, async () => {
      const held = await Promise.all(Array.from({ length: NODES }, (_, i) => fetch(`http://127.0.0.1:${BASE_PORT + 1 + i}/metrics`).then((r) => r.text())));
      return held.every((text) => Number(/^herald_subscriptions (\S+)/m.exec(text)?.[1]) >= bystanders);
    }, 120_000);
    for (let i = 0; i < WARMUP; i++) await cycle(api, person);
    const times: number[] = [];
    for (let i = 0; i < cycles; i++) times.push(await cycle(api, person));
    const { p50, p99, max } = percentiles(times);
    ctx.results.runs[`gateway revoke ${ctx.run}`] = { cycles, bystandersPerNode: bystanders, connectionsPerNode: CONNECTIONS_PER_NODE, p50, p99, max, times };
    ctx.record('revoke_all_nodes_ms', p99);
    ctx.record('revoke_all_nodes_p50_ms', p50);
  } catch (error) {
    ctx.results.errors.push(`revoke ${ctx.run}: ${(error as Error).message}`);
  } finally {
    for (const proc of mine.reverse()) await stop(proc, 'SIGTERM', 10_000);
  }
}
