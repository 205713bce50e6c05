/**
 * The fleet of a scale run: one redis-server and N gateway nodes on this machine, a port each (client i goes to
 * node i mod N, so every node's count is known and stays under a process's open files), every node with
 * server.reusePort so that a restart is the deploy's: the new process first on the same port, then SIGTERM to the
 * old one, which drains. Also the kernel settings the run raises, written back at the end.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { Redis } from 'ioredis';
import { startGateway, type GatewayLaunch } from './failover.ts';
import { metric, ROOT, startRedis, stop, type Proc } from './procs.ts';
import type { Plan, Sysctl } from './scale-plan.ts';

export const SCALE_CONFIG = `${ROOT}bench/scale.yaml`;
/** Node.js's compile cache for every process of the run: see docs/benchmarks/scale.md ("a node's base memory"). */
export const COMPILE_CACHE = `${ROOT}.run/node-compile-cache`;

export interface FleetNode {
  /** The run's name for it (scale-1, ...), its logs' names; in Redis each process has an id of its own. */
  id: string;
  port: number;
  proc: Proc;
}

/** How many node processes start at once: each is busy for a second or two on 2 cores. */
const STARTING_AT_ONCE = 4;
/** A draining node closes its clients in batches (config drain); this bounds its exit. */
const DRAIN_WAIT_MS = 60_000;

async function inBatches<T>(count: number, size: number, make: (i: number) => Promise<T>): Promise<T[]> {
  const made: T[] = [];
  for (let from = 0; from < count; from += size) {
    made.push(...(await Promise.all(Array.from({ length: Math.min(size, count - from) }, (_, k) => make(from + k)))));
  }
  return made;
}

/**
 * Redis's scheduling priority (nice): a fleet's Redis has cores of its own, not a 1/87th share of two; without it a
 * broadcast to every client starves Redis, and every node's heartbeat waits in it (docs/scale.md, "At 800,000").
 */
const REDIS_NICE = -10;

export class Fleet {
  readonly nodes: FleetNode[] = [];
  redis: { proc: Proc; db: Redis } | undefined;
  readonly #launch: GatewayLaunch;
  readonly #plan: Plan;

  constructor(plan: Plan, launch: GatewayLaunch) {
    this.#plan = plan;
    this.#launch = launch;
  }

  get wsUrls(): string[] {
    return this.nodes.map((node) => `ws://127.0.0.1:${node.port}`);
  }

  /**
   * Each process with the default node id (host, pid, random): a restarted node's new process is another node in
   * Redis, as bench/failover.ts's restart. A fixed id would be shared by the old process, still draining, and the
   * new one, which strips the id's routes from Redis as it starts, and the old one strips them again as it leaves.
   */
  #env(): Record<string, string> {
    const redisPort = this.#plan.options.port;
    return { REDIS_URL: `redis://127.0.0.1:${redisPort}`, HERALD_REUSE_PORT: '1', HERALD_CONFIG: SCALE_CONFIG, NODE_COMPILE_CACHE: COMPILE_CACHE };
  }

  async start(onNode: (node: FleetNode) => void): Promise<void> {
    const { port } = this.#plan.options;
    const proc = await startRedis('redis', port, `${this.#launch.runDir}/redis.log`);
    setPriority(proc.child.pid!, REDIS_NICE);
    this.redis = { proc, db: new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }) };
    await inBatches(this.#plan.nodes, STARTING_AT_ONCE, async (i) => {
      const id = `scale-${i + 1}`;
      const node = { id, port: port + 1 + i, proc: await startGateway(this.#launch, id, port + 1 + i, this.#env()) };
      this.nodes[i] = node;
      onNode(node);
    });
  }

  pids(): number[] {
    return this.nodes.map((node) => node.proc.child.pid!);
  }

  /** A figure of every node's /metrics, added up; NaN while a node does not answer. */
  async sum(name: string): Promise<number> {
    const values = await Promise.all(this.nodes.map((node) => metric(node.port, name).catch(() => undefined)));
    return values.reduce<number>((sum, value) => sum + (value ?? NaN), 0);
  }

  /** Every node collects its garbage twice (bench/gc-preload.ts), so that a level's RSS holds what is live. */
  collectGarbage(): void {
    for (const pid of this.pids()) process.kill(pid, 'SIGUSR2');
  }

  /**
   * Each node in turn: its new process on the same port, then SIGTERM to the old one, which stops listening, takes
   * its routes out of Redis and closes its clients with 1001 in batches; the next node once it has exited.
   * Answers when each node's old process was told to go, and when it had gone (ms since `from`). Stopped (`signal`),
   * it ends after the node it is restarting.
   */
  async rollingRestart(from: number, signal: AbortSignal, onNode: (node: FleetNode, drainS: number) => void): Promise<Array<[number, number]>> {
    const steps: Array<[number, number]> = [];
    for (const node of this.nodes) {
      if (signal.aborted) break;
      const next = await startGateway(this.#launch, `${node.id}-next`, node.port, this.#env());
      const told = Date.now();
      await stop(node.proc, 'SIGTERM', DRAIN_WAIT_MS);
      steps.push([told - from, Date.now() - from]);
      onNode(node, (Date.now() - told) / 1000);
      node.proc = next;
    }
    return steps;
  }

  /** Nodes first (a draining node still writes to Redis), then Redis. */
  async stop(): Promise<void> {
    this.redis?.db.disconnect();
    await Promise.all(this.nodes.map((node) => stop(node.proc, 'SIGTERM', 15_000)));
    if (this.redis) await stop(this.redis.proc);
  }
}

/** One node started and stopped, so that every node after it finds its modules in the compile cache. */
export async function warmCompileCache(launch: GatewayLaunch, port: number): Promise<void> {
  const warm = await startGateway(launch, 'compile-cache', port, { HERALD_CONFIG: SCALE_CONFIG, NODE_COMPILE_CACHE: COMPILE_CACHE });
  await stop(warm, 'SIGTERM', 15_000);
}

const sysctlPath = (key: string): string => `/proc/sys/${key.replaceAll('.', '/')}`;

/**
 * Raise what the plan says to raise; answers what was changed (each with its old value), for restoreSysctls. The old
 * values are also written to `restoreFile` first, which bench/scale.sh reads if this process dies before it restores them.
 */
export function applySysctls(sysctls: readonly Sysctl[], log: (line: string) => void, restoreFile: string): Sysctl[] {
  const changed: Sysctl[] = [];
  const raising = sysctls.filter((s) => s.raise);
  if (raising.length > 0) writeFileSync(restoreFile, raising.map((s) => `${s.key} ${s.current}\n`).join(''));
  for (const sysctl of raising) {
    try {
      writeFileSync(sysctlPath(sysctl.key), sysctl.wanted);
      changed.push(sysctl);
      log(`sysctl ${sysctl.key}: ${sysctl.current} -> ${readFileSync(sysctlPath(sysctl.key), 'utf8').trim()}`);
    } catch (error) {
      log(`sysctl ${sysctl.key}: left at ${sysctl.current}, could not raise it to ${sysctl.wanted} (${(error as Error).message})`);
    }
  }
  return changed;
}

export function restoreSysctls(changed: readonly Sysctl[], log: (line: string) => void, restoreFile: string): void {
  rmSync(restoreFile, { force: true });
  for (const sysctl of changed) {
    try {
      writeFileSync(sysctlPath(sysctl.key), sysctl.current);
      log(`sysctl ${sysctl.key}: back to ${sysctl.current}`);
    } catch (error) {
      log(`sysctl ${sysctl.key}: still ${sysctl.wanted}, could not write back ${sysctl.current} (${(error as Error).message})`);
    }
  }
}
