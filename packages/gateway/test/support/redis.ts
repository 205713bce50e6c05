/** Real redis-server processes on free loopback ports: one server, or a 3-master Redis Cluster (with replicas if asked). */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

export interface RedisServer {
  port: number;
  url: string;
  /** Run redis-cli with these arguments against this server. */
  cli(...args: string[]): Promise<string>;
  /** Stop (SIGKILL with `kill`), keeping the port for a restart. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Start again, empty, on the same port. */
  restart(): Promise<void>;
}

async function launch(port: number, dir: string, extra: string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  // One exit listener for the whole wait (one per chunk piles up: a restart with a nodes.conf logs many).
  const exited = once(child, 'exit').then(() => [null]);
  while (!out.includes('Ready to accept connections')) {
    const [chunk] = (await Promise.race([once(child.stdout!, 'data'), exited])) as [Buffer | null];
    if (chunk === null) throw new Error(`redis-server on ${port} exited: ${out}`);
    out += chunk;
  }
  child.stdout!.resume();
  return child;
}

export async function startRedis(extra: string[] = [], port?: number): Promise<RedisServer> {
  port ??= await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'herald-redis-'));
  let child = await launch(port, dir, extra);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cli: async (...args) => (await run('redis-cli', ['-p', String(port), ...args])).stdout.trim(),
    async stop(signal = 'SIGTERM') {
      // A child killed by a signal has a signalCode and no exitCode: it has exited all the same.
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        await once(child, 'exit');
      }
      if (signal === 'SIGTERM') rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      child = await launch(port, dir, extra);
    },
  };
}

/** Calls of each command since the server started (INFO commandstats). */
export async function commandCalls(redis: RedisServer): Promise<Map<string, number>> {
  const stats = await redis.cli('info', 'commandstats');
  return new Map([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map(([, command, calls]) => [command as string, Number(calls)]));
}

/**
 * Commands sent since `before`, by name; EVAL counted as EVALSHA (a script's first run after a restart). Left out:
 * INFO (the counting itself) and PING (the liveness probe's, on its own clock whatever the node is doing).
 */
export async function sentSince(redis: RedisServer, before: Map<string, number>): Promise<Map<string, number>> {
  const sent = new Map<string, number>();
  for (const [command, calls] of await commandCalls(redis)) {
    const name = command === 'eval' ? 'evalsha' : command;
    const delta = calls - (before.get(command) ?? 0);
    if (delta > 0 && command !== 'info' && command !== 'ping') sent.set(name, (sent.get(name) ?? 0) + delta);
  }
  return sent;
}

/** A free port whose cluster bus port (port + 10000) is free too, below the ephemeral range. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if ((await bindable(port)) && (await bindable(port + 10_000))) return port;
  }
}

async function bindable(port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    server.close();
    await once(server, 'close');
    return true;
  } catch {
    return false;
  }
}

export interface ClusterOptions {
  /** Replicas per master: 0 (three servers) or 1 (six). Default 0. */
  replicas?: number;
  /** cluster-node-timeout: how long a master goes unanswered before it is failed over. Default 5000. */
  nodeTimeoutMs?: number;
  /**
   * cluster-require-full-coverage. Default true (Redis's default): a shard down stops the whole cluster. False: the
   * other shards keep serving meanwhile.
   */
  requireFullCoverage?: boolean;
}

/** A server as the cluster sees it (one line of CLUSTER NODES). */
export interface ClusterMember {
  id: string;
  server: RedisServer;
  role: 'master' | 'replica';
  /** The master it follows, for a replica. */
  master: RedisServer | undefined;
  /** Flagged fail or fail? by the server asked. */
  failing: boolean;
  /** The slot ranges it serves, [first, last]. */
  slots: Array<[number, number]>;
}

export interface RedisCluster {
  /** The masters at creation, as host:port (what a client is given). */
  nodes: string[];
  /** Every server: the masters first, then the replicas. */
  servers: RedisServer[];
  /** The cluster as a live server sees it now. */
  view(): Promise<ClusterMember[]>;
  /** The hash slot of a key (CLUSTER KEYSLOT). */
  slotOf(key: string): Promise<number>;
  /** The master serving a key's slot now. */
  masterOf(key: string): Promise<RedisServer>;
  /** SIGKILL a server (its port and nodes.conf kept, for restart). */
  kill(server: RedisServer): Promise<void>;
  /** Kill a master's replicas, then the master: its slots are served by nobody (a shard lost). The killed, master last. */
  killShard(master: RedisServer): Promise<RedisServer[]>;
  /**
   * Start a killed server again with its nodes.conf (same id), empty (no persistence): a replica of whoever serves
   * its slots now, or, if nobody took them over (killShard), their master again, without their data.
   */
  restart(server: RedisServer): Promise<void>;
  /** Poll until every live server says cluster_state:ok, every slot has a live master and every live replica is synced; ms waited. */
  untilHealthy(timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

const SLOTS = 16_384;

/** Three masters (and `replicas` replicas each), every slot assigned, cluster_state:ok and replicas synced on each. */
export async function startRedisCluster({ replicas = 0, nodeTimeoutMs = 5000, requireFullCoverage = true }: ClusterOptions = {}): Promise<RedisCluster> {
  const servers: RedisServer[] = [];
  const dirs: string[] = [];
  const stop = async () => {
    await Promise.all(servers.map((server) => server.stop()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3 * (1 + replicas); i++) {
      const dir = mkdtempSync(join(tmpdir(), 'herald-cluster-'));
      dirs.push(dir);
      const options = ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', String(nodeTimeoutMs)];
      if (!requireFullCoverage) options.push('--cluster-require-full-coverage', 'no');
      servers.push(await startRedis(options, await freeClusterPort()));
    }
    const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
    // redis-cli makes the first three masters (it picks the masters first, in the order given).
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'], { timeout: 30_000 });
    const cluster = clusterOf(servers, stop);
    await cluster.untilHealthy(30_000);
    // What a caller is told are the masters, first: check it rather than trust redis-cli's order.
    const masters = (await cluster.view()).filter((member) => member.role === 'master').map((member) => member.server);
    servers.sort((a, b) => Number(!masters.includes(a)) - Number(!masters.includes(b)));
    cluster.nodes.push(...servers.slice(0, 3).map((server) => `127.0.0.1:${server.port}`));
    return cluster;
  } catch (error) {
    await stop();
    throw error;
  }
}

function clusterOf(servers: RedisServer[], stop: () => Promise<void>): RedisCluster {
  const down = new Set<RedisServer>();
  const live = () => servers.filter((server) => !down.has(server));
  const anyLive = () => live()[0] ?? Promise.reject(new Error('no live server in the cluster'));
  const view = async (from?: RedisServer) => parseClusterNodes(await (from ?? (await anyLive())).cli('cluster', 'nodes'), servers);
  const slotOf = async (key: string) => Number(await (await anyLive()).cli('cluster', 'keyslot', key));
  const kill = async (server: RedisServer) => {
    down.add(server);
    await server.stop('SIGKILL');
  };
  return {
    nodes: [],
    servers,
    view,
    slotOf,
    async masterOf(key) {
      const slot = await slotOf(key);
      const owner = (await view()).find((member) => member.role === 'master' && member.slots.some(([a, b]) => slot >= a && slot <= b));
      if (owner === undefined) throw new Error(`no master serves slot ${slot}`);
      return owner.server;
    },
    kill,
    async killShard(master) {
      const replicas = (await view()).filter((member) => member.master === master).map((member) => member.server);
      for (const server of [...replicas, master]) await kill(server);
      return [...replicas, master];
    },
    async restart(server) {
      await server.restart();
      down.delete(server);
    },
    untilHealthy: (timeoutMs = 60_000) => untilHealthy(live, view, timeoutMs),
    stop,
  };
}

async function untilHealthy(live: () => RedisServer[], view: (from: RedisServer) => Promise<ClusterMember[]>, timeoutMs: number): Promise<number> {
  const started = performance.now();
  const healthy = async (server: RedisServer): Promise<boolean> => {
    if (!(await server.cli('cluster', 'info')).includes('cluster_state:ok')) return false;
    const members = await view(server);
    const owners = members.filter((member) => member.slots.length > 0);
    const served = owners.reduce((sum, member) => sum + member.slots.reduce((n, [a, b]) => n + b - a + 1, 0), 0);
    if (served !== SLOTS || owners.some((member) => member.failing || !live().includes(member.server))) return false;
    // A replica not yet synced could not take over: the cluster is not what a test expects yet.
    const [role, , , state] = (await server.cli('role')).split('\n');
    return role !== 'slave' || state === 'connected';
  };
  // Nothing announces a failover's end: poll it.
  for (;;) {
    const checks = await Promise.all(live().map((server) => healthy(server).catch(() => false)));
    if (checks.every(Boolean)) return Math.round(performance.now() - started);
    if (performance.now() - started > timeoutMs) throw new Error(`the Redis Cluster was not healthy within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** CLUSTER NODES: `<id> <ip:port@bus> <flags> <master id|-> <ping> <pong> <epoch> <link> <slots...>`. */
function parseClusterNodes(text: string, servers: RedisServer[]): ClusterMember[] {
  const lines = text.split('\n').filter((line) => line.trim() !== '').map((line) => line.trim().split(' '));
  const serverOf = (address: string) => servers.find((server) => address.startsWith(`127.0.0.1:${server.port}@`));
  const byId = new Map(lines.map(([id, address]) => [id!, serverOf(address!)]));
  return lines.flatMap(([id, address, flags, masterId, , , , , ...slots]) => {
    const server = serverOf(address!);
    if (server === undefined) return []; // noaddr: a node forgotten, or not yet met
    const ranges = slots.filter((slot) => !slot.startsWith('[')).map((slot) => slot.split('-').map(Number) as [number, number?]);
    return [{
      id: id!,
      server,
      role: flags!.split(',').includes('master') ? 'master' : 'replica',
      master: masterId === '-' ? undefined : byId.get(masterId!),
      failing: /(^|,)fail\??(,|$)/.test(flags!),
      slots: ranges.map(([a, b]): [number, number] => [a, b ?? a]),
    }];
  });
}
