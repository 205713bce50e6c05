/**
 * What every scenario of the benchmark suite is given: the run's options, its results and their recording, the
 * sampler, the targets' start and stop, the load generators' runs, and the fills that hold clients. bench/run.ts
 * makes one per run and hands it to each scenario (bench/scenarios.ts).
 */
import { Redis } from 'ioredis';
import type { BenchOptions } from './options.ts';
import { GATEWAY_NODE_ARGS, median, metric, ROOT, start, startLoad, startRedis, stop, stopAll, waitFor, Sampler, type Proc } from './procs.ts';
import { watchNode } from './node-watch.ts';
import type { LoadReport, Results, Taken } from './results.ts';

const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
const PEER_LOAD = `${ROOT}bench/peer-load.ts`;

/** The listeners of each notify run. The other clients connected meanwhile (a fill) are idle, each with its own subscription. */
export const NOTIFY_CLIENTS = 1000;

export type TargetName = 'gateway' | 'socketio' | 'bare';
export interface Target { name: TargetName; port: number; redisPort: number; server?: Proc }

/** A load step: its name, the load generator's arguments, and the figures it takes from the report. */
export type Step = [name: string, args: string[], take: (r: LoadReport) => Taken];

/** The prefix of a target's figures: none for the gateway's. */
export const prefix = (t: Target): string => (t.name === 'gateway' ? '' : `${t.name}_`);

export async function serverStats(t: Target): Promise<{ clients: number; heapUsed: number | undefined }> {
  if (t.name !== 'gateway') return (await (await fetch(`http://127.0.0.1:${t.port}/stats`)).json()) as { clients: number; heapUsed: number };
  const [clients, heapUsed] = await Promise.all([metric(t.port, 'herald_subscriptions'), metric(t.port, 'nodejs_heap_size_used_bytes')]);
  return { clients: clients ?? NaN, heapUsed };
}

/** Once every client has left the server; rejects after `timeoutMs`. */
export async function untilNoClients(t: Target, timeoutMs: number): Promise<void> {
  await waitFor(`${t.name} back to 0 clients`, async () => (await serverStats(t)).clients === 0, timeoutMs);
}

export class BenchContext {
  readonly options: BenchOptions;
  readonly results: Results;
  /** The gateway and its two peers, in the order they are measured. */
  readonly targets: readonly Target[] = [
    { name: 'gateway', port: 25010, redisPort: 25001 },
    { name: 'socketio', port: 25020, redisPort: 25002 },
    { name: 'bare', port: 25030, redisPort: 25003 },
  ];
  /** The started target's Redis (its memory levels, history's bytes, the sampler's used_memory). */
  redis: Redis | undefined;
  readonly sampler = new Sampler(async () => (this.redis ? Number(/used_memory:(\d+)/.exec(await this.redis.info('memory'))?.[1]) : undefined));
  /** Every load generator is sampled under a name of its own that starts with "load", which the report sums. */
  #loads = 0;

  constructor(options: BenchOptions) {
    this.options = options;
    this.results = { quick: options.quick, startedAt: new Date().toISOString(), levels: options.levels, figures: {}, memory: {}, runs: {}, errors: [], commands: [], samples: [] };
  }

  wanted(scenario: string): boolean {
    return this.options.only === undefined || this.options.only.has(scenario);
  }

  record(name: string, value: number | undefined): void {
    if (value !== undefined && Number.isFinite(value)) this.results.figures[name] = Math.round(value * 1000) / 1000;
  }

  /** `label` failed: listed in the results, the run goes on. */
  failed(label: string, error: unknown): void {
    this.results.errors.push(`${label}: ${(error as Error).message}`);
  }

  /**
   * Each figure of several runs, as the median of its values; a loss (`*_lost`, `*_duplicates`) or a reach
   * (`*_reached_pct`, `*_recovered_pct`) as the worst of them instead, since "none lost" must hold in every run.
   */
  recordMedians(taken: Taken[]): void {
    for (const figure of new Set(taken.flatMap((values) => Object.keys(values)))) {
      const values = taken.map((run) => run[figure]).filter((value) => value !== undefined);
      const worst = /_(lost|duplicates)$/.test(figure) ? Math.max : /_(reached|recovered)_pct$/.test(figure) ? Math.min : undefined;
      this.record(figure, worst && values.length > 0 ? worst(...values) : median(values));
    }
  }

  /** `run` made `runs` times (1, 2, ...), each figure the median of its runs; a failed run is listed as "<label> <run>". */
  async medianOfRuns(label: string, runs: number, run: (n: number) => Promise<Taken>): Promise<void> {
    const taken: Taken[] = [];
    for (let n = 1; n <= runs; n++) {
      try { taken.push(await run(n)); } catch (error) { this.failed(`${label} ${n}`, error); }
    }
    this.recordMedians(taken);
  }

  /** A load generator run to its end; its report (wsload --json, or peer-load's last stdout line). */
  runLoad(t: Target, args: string[], timeoutS: number): Promise<LoadReport> {
    const { runDir } = this.options;
    const [script, jsonFile] = t.name === 'gateway' ? [WSLOAD, `${runDir}/${t.name}-${args[0]}-${Date.now()}.json`] : [PEER_LOAD, undefined];
    // As one would type it: without the file the bench collects the output in.
    this.results.commands.push(`node ${script.replace(ROOT, '')} ${args.join(' ')}`);
    const argv = jsonFile ? [...args, '--quiet', '--json', jsonFile] : args;
    const run = startLoad<LoadReport>(`load-${t.name}`, script, argv, { logFile: `${runDir}/load-${t.name}.log`, timeoutS, jsonFile });
    this.watchLoad(run.proc);
    return run.done;
  }

  watchLoad(proc: Proc): void {
    this.sampler.watch(`load ${++this.#loads}`, proc.child.pid!);
  }

  /**
   * Each step `runs` times; each figure is the median of its runs. Runs are kept as "<target> <phase><step> <run>"; a
   * gateway's with what the node reported over it (`node`: bench/node-watch.ts).
   */
  async runSteps(t: Target, steps: Step[], runs: number, phase = ''): Promise<void> {
    const { churnWarmupS, notifyWarmupS, churnS, notifyS, pacedS } = this.options;
    for (const [name, args, take] of steps) {
      this.sampler.phase = `${t.name} ${phase}${name}`;
      await this.medianOfRuns(`${t.name} ${phase}${name}`, runs, async (run) => {
        const load = (): Promise<LoadReport> => this.runLoad(t, args, churnWarmupS + notifyWarmupS + Math.max(churnS, notifyS, pacedS) + 120);
        const out = t.name === 'gateway' ? await watchNode(t.port, load).then(({ outcome, node }) => ({ ...outcome, node })) : await load();
        this.results.runs[`${t.name} ${phase}${name} ${run}`] = out;
        return take(out);
      });
    }
  }

  async startTarget(t: Target): Promise<void> {
    const { runDir } = this.options;
    const redisProc = await startRedis('redis', t.redisPort, `${runDir}/redis-${t.name}.log`);
    this.redis = new Redis(t.redisPort, '127.0.0.1', { maxRetriesPerRequest: 1 });
    this.sampler.watch(`redis(${t.name})`, redisProc.child.pid!);
    const env = { PORT: String(t.port), REDIS_URL: `redis://127.0.0.1:${t.redisPort}`, LOG_LEVEL: 'warn' };
    const gc = ['--expose-gc', '--import', `${ROOT}bench/gc-preload.ts`];
    const script = t.name === 'gateway'
      ? [...gc, ...GATEWAY_NODE_ARGS, `${ROOT}packages/gateway/src/main.ts`]
      : [...gc, `${ROOT}bench/peers/${t.name === 'bare' ? 'bare-ws' : 'socketio'}.ts`];
    t.server = start(t.name, 'node', script, env, `${runDir}/${t.name}.log`);
    const ready = t.name === 'gateway' ? '/readyz' : '/stats';
    await waitFor(`${t.name} on ${t.port}`, async () => (await fetch(`http://127.0.0.1:${t.port}${ready}`)).ok, 60_000);
    this.sampler.watch(t.name, t.server.child.pid!);
  }

  /** The rate scenarios run on a fresh server and Redis, not on what the memory levels left, so that they measure themselves. */
  async freshTarget(t: Target): Promise<void> {
    await this.stopTarget(t);
    await this.startTarget(t);
  }

  /** The Redis client startTarget opened, closed. */
  closeRedisClient(): void {
    this.redis?.disconnect();
    this.redis = undefined;
  }

  async stopTarget(t: Target): Promise<void> {
    this.sampler.unwatch(t.name);
    this.closeRedisClient();
    await stopAll();
  }

  /**
   * Grow what `fills` hold to `clients` by adding a fill for the difference, each client with both tokens and its
   * own subscription (client indexes from `firstIndex + held`), and wait until the server counts them all. Earlier
   * fills stay connected, as the clients of a real node do.
   */
  async growFill(t: Target, clients: number, fills: Proc[], held: number, firstIndex = 0): Promise<void> {
    if (clients <= held) return;
    const url = `ws://127.0.0.1:${t.port}`;
    const delta = ['--clients', String(clients - held), '--first', String(firstIndex + held), '--hold', '900'];
    const args = t.name === 'gateway'
      ? [WSLOAD, 'fill', url, ...delta, '--rate', '2000', '--register', 'announcements', '--per-client', '--tokens', 'both', '--quiet']
      : [PEER_LOAD, 'fill', t.name, url, ...delta];
    this.results.commands.push(`node ${args.join(' ').replaceAll(ROOT, '')}`);
    const load = start(`fill-${t.name}`, 'node', args, {}, `${this.options.runDir}/fill-${t.name}-${clients}.log`);
    fills.push(load);
    this.watchLoad(load);
    await waitFor(`${clients} clients on ${t.name}`, async () => (await serverStats(t)).clients >= clients && (t.name === 'gateway' || load.stdout.includes('ready')), 120_000);
  }

  async stopFills(t: Target, fills: Proc[]): Promise<void> {
    await Promise.all(fills.map((fill) => stop(fill, 'SIGINT', 20_000)));
    await untilNoClients(t, 30_000).catch(() => {});
  }
}
