/**
 * A local fleet for tests: gateway node processes sharing one Redis, behind HAProxy rendered from the same
 * template as `make cluster` (infra/haproxy/haproxy.cfg.tmpl). Everything on loopback, stopped by stop().
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { stringify } from 'yaml';
import { defaultRawConfig, type RawConfig } from './gateway.ts';
import { freePort } from './redis.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
const HAPROXY_TEMPLATE = new URL('../../../../infra/haproxy/haproxy.cfg.tmpl', import.meta.url).pathname;

/** The people of the default data set, as [first name, last name] (their login): customer_id i + 1 at index i. */
export const PEOPLE = [
  ['PENELOPE', 'GUINESS'], ['NICK', 'WAHLBERG'], ['ED', 'CHASE'], ['JENNIFER', 'DAVIS'], ['JOHNNY', 'LOLLOBRIGIDA'],
  ['BETTE', 'NICHOLSON'], ['GRACE', 'MOSTEL'], ['MATTHEW', 'JOHANSSON'], ['JOE', 'SWANK'],
] as const;

export interface FleetNode {
  id: string;
  port: number;
  http: string;
  ws: string;
  child: ChildProcess;
  exited: Promise<number | null>;
  /** What the process has logged (pino's JSON lines on stdout), parsed. */
  log: Record<string, unknown>[];
}

export interface Fleet {
  nodes: FleetNode[];
  /** The load balancer. */
  http: string;
  ws: string;
  /**
   * A new process for node `at` on its port (HAProxy knows it there), in its place in `nodes`: once the old one has
   * exited, or (`successorFirst`, the config's server.reusePort) beside it, ready before the old one is told to go.
   */
  restart(at: number, how?: { successorFirst?: boolean }): Promise<FleetNode>;
  stop(): Promise<void>;
}

/** Poll until `check` holds: for states that announce themselves by no event (a process being ready). */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await delay(50);
  }
}

const ok = async (url: string) => (await fetch(url)).status === 200;

function writeConfig(dir: string, adjust: (raw: RawConfig) => void): string {
  const raw = defaultRawConfig();
  raw.redis = { url: 'redis://overridden-by-REDIS_URL:1', leaseMs: 2000, sweepIntervalMs: 300 };
  raw.drain = { batchSize: 2, batchIntervalMs: 50, deadlineMs: 10_000 };
  // Fleet tests count every emit and every notification: on a loaded machine the test's own clients fall behind, and
  // the lag bounds (e2e/lag.test.ts's) would refuse emits and close clients for the machine's speed.
  raw.emit = { ...raw.emit, maxLagMs: 60_000 };
  raw.websocket = { ...raw.websocket, maxLagMs: 120_000 };
  adjust(raw);
  const file = join(dir, 'fleet.yaml');
  writeFileSync(file, stringify(raw));
  return file;
}

/**
 * A node process; ready once it says it listens (its port may be shared with the node it succeeds, whose /readyz
 * would answer too).
 */
/** A node process, handed to `spawned` as soon as it exists (so that a fleet stopped meanwhile still ends it). */
async function startNode(id: string, config: string, redisUrl: string, spawned: (node: FleetNode) => void, port?: number): Promise<FleetNode> {
  port ??= await freePort();
  const env = { ...process.env, PORT: String(port), HOST: '127.0.0.1', HERALD_CONFIG: config, REDIS_URL: redisUrl, HERALD_NODE_ID: id, LOG_LEVEL: 'info' };
  const child = spawn(process.execPath, ['--no-node-snapshot', MAIN], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const node = { id, port, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}`, child, exited, log: [] as Record<string, unknown>[] };
  spawned(node);
  let out = '';
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    out += `${line}\n`;
    try {
      node.log.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      node.log.push({ msg: line });
    }
  });
  const listening = new Promise<void>((resolve) => lines.on('line', (line) => line.includes('herald gateway listening') && resolve()));
  await Promise.race([listening, exited.then((code) => Promise.reject(new Error(`${id} exited (${code}) before it listened: ${out}`)))]);
  await until(() => ok(`${node.http}/readyz`), `${id} to be ready`);
  return node;
}

async function startHaproxy(dir: string, nodes: FleetNode[]): Promise<{ port: number; child: ChildProcess }> {
  const [port, statsPort] = [await freePort(), await freePort()];
  const servers = nodes.map((node) => `    server ${node.id} 127.0.0.1:${node.port}`).join('\n');
  const config = readFileSync(HAPROXY_TEMPLATE, 'utf8')
    .split('\n')
    .filter((line) => !line.startsWith('##'))
    .join('\n')
    .replaceAll('@@PORT@@', String(port))
    .replaceAll('@@STATS_PORT@@', String(statsPort))
    .replaceAll('@@MAXCONN@@', '4096')
    .replaceAll('@@SERVERS@@', servers);
  const file = join(dir, 'haproxy.cfg');
  writeFileSync(file, config);
  const child = spawn('haproxy', ['-f', file, '-db'], { stdio: ['ignore', 'ignore', 'ignore'] });
  await until(() => ok(`http://127.0.0.1:${port}/readyz`), 'HAProxy to route to a node');
  return { port, child };
}

/**
 * `n` node processes on one Redis (`redisUrl`, or the URL each node connects with, by index), behind HAProxy; '' for
 * none in the environment: the config's redis (a cluster set by `adjust`).
 */
export async function startFleet(n: number, redisUrl: string | ((index: number) => string), adjust: (raw: RawConfig) => void = () => {}): Promise<Fleet> {
  const urlOf = (index: number) => (typeof redisUrl === 'string' ? redisUrl : redisUrl(index));
  const dir = mkdtempSync(join(tmpdir(), 'herald-fleet-'));
  const config = writeConfig(dir, adjust);
  // Every node process ever started, a restart's included; once stopped, one that starts late is ended at once.
  const started: FleetNode[] = [];
  let stopped = false;
  const kill = (node: FleetNode) => node.child.exitCode === null && node.child.signalCode === null && node.child.kill('SIGKILL');
  const spawned = (node: FleetNode) => (stopped ? kill(node) : started.push(node));
  const nodes = await Promise.all(Array.from({ length: n }, (_, i) => startNode(`node-${i + 1}`, config, urlOf(i), spawned)));
  const haproxy = await startHaproxy(dir, nodes);
  return {
    nodes,
    http: `http://127.0.0.1:${haproxy.port}`,
    ws: `ws://127.0.0.1:${haproxy.port}`,
    async restart(at, { successorFirst = false } = {}) {
      const old = nodes[at]!;
      if (!successorFirst) await old.exited;
      // Beside the old one, a node of its own: two live nodes may not share an id (each would take the other's messages).
      const successor = await startNode(successorFirst ? `${old.id}-next` : old.id, config, urlOf(at), spawned, old.port);
      nodes[at] = successor;
      return successor;
    },
    async stop() {
      stopped = true;
      haproxy.child.kill('SIGKILL');
      started.forEach(kill);
      await Promise.all([once(haproxy.child, 'exit'), ...started.map((node) => node.exited)]);
    },
  };
}

/** One sample of a metric, read from a node process's /metrics over HTTP (0 when absent). */
export async function nodeMetric(node: Pick<FleetNode, 'http'>, name: string): Promise<number> {
  const text = await (await fetch(`${node.http}/metrics`)).text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}
