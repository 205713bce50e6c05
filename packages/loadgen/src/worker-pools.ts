/**
 * Clients spread over worker processes, for counts past what one process may hold open (20,000 files here):
 * worker w holds clients [w·perWorker, (w+1)·perWorker), each from its source address (`sourceAddress`).
 * The parent adds up what the workers report. A bench may add clients later (growTo), and have the held clients
 * send another REGISTER (subscribe).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Pool, type ClientGroup, type PoolSpec } from './pool.ts';
import { mergeSnapshots, type PoolSnapshot } from './snapshot.ts';
import type { WorkerReply, WorkerRequest } from './worker.ts';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
/**
 * A worker's young generation, capped: its clients live as long as the run, so a larger one holds little but
 * garbage between scavenges, and V8's default grows it to about half a worker's memory (README, "Many clients").
 */
const WORKER_NODE_OPTIONS = ['--max-semi-space-size=2'];
type WithoutId<R> = R extends unknown ? Omit<R, 'id'> : never;
type RequestBody = WithoutId<WorkerRequest>;

class WorkerChannel {
  readonly child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  #next = 0;

  constructor() {
    this.child = fork(WORKER, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [...process.execArgv, ...WORKER_NODE_OPTIONS] });
    this.child.on('message', (reply: WorkerReply) => {
      const waiter = this.#pending.get(reply.id);
      this.#pending.delete(reply.id);
      if (reply.error !== undefined) waiter?.reject(new Error(`worker ${this.child.pid}: ${reply.error}`));
      else waiter?.resolve(reply.result);
    });
    this.child.on('exit', (code) => {
      for (const waiter of this.#pending.values()) waiter.reject(new Error(`worker ${this.child.pid} exited (${code})`));
      this.#pending.clear();
    });
  }

  request<T>(body: RequestBody): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.send({ ...body, id } as WorkerRequest);
    });
  }
}

export class WorkerPools implements ClientGroup {
  readonly #spec: PoolSpec;
  readonly #perWorker: number;
  /** Each worker and the clients it was asked to start. */
  readonly #workers: Array<{ channel: WorkerChannel; clients: number }> = [];
  #started = 0;
  #closing: Promise<void> | undefined;

  constructor(spec: PoolSpec, perWorker: number) {
    this.#spec = spec;
    this.#perWorker = perWorker;
  }

  open(signal?: AbortSignal): Promise<void> {
    return this.growTo(this.#spec.count, this.#spec.rate, signal);
  }

  /**
   * Start clients until `count` have been started (a bench adding clients level by level), `rate` a second over the
   * workers that take them: the last worker's room first, then new workers. Resolves once each is ready or failed.
   */
  async growTo(count: number, rate: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return;
    const adding = count - this.#started;
    const opened: Promise<unknown>[] = [];
    while (this.#started < count) {
      let worker = this.#workers.at(-1);
      if (!worker || worker.clients >= this.#perWorker) this.#workers.push((worker = { channel: new WorkerChannel(), clients: 0 }));
      const share = Math.min(count - this.#started, this.#perWorker - worker.clients);
      const { maxPending } = this.#spec;
      // Each worker takes its share of the rate and of the pending cap, in proportion to the clients it adds.
      const pendingShare = maxPending === undefined ? undefined : Math.max(1, Math.round((maxPending * share) / adding));
      const spec: PoolSpec = { ...this.#spec, first: this.#spec.first + this.#started, count: share, rate: (rate * share) / adding, maxPending: pendingShare };
      opened.push(worker.channel.request({ op: 'open', spec }));
      worker.clients += share;
      this.#started += share;
    }
    const abort = () => void this.#all({ op: 'abort' });
    signal?.addEventListener('abort', abort, { once: true });
    try {
      await Promise.all(opened);
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  }

  /** The worker processes' ids. */
  pids(): number[] {
    return this.#workers.map((worker) => worker.channel.child.pid!);
  }

  #all<T>(body: RequestBody): Promise<T[]> {
    return Promise.all(this.#workers.map((worker) => worker.channel.request<T>(body)));
  }

  async snapshot(withRecipients = false): Promise<PoolSnapshot> {
    return mergeSnapshots(await this.#all<PoolSnapshot>({ op: 'snapshot', withRecipients }));
  }

  async resetDelivery(): Promise<void> {
    await this.#all({ op: 'reset' });
  }

  /** Every ready client sends `frame` (another REGISTER: a broadcast's audience), `rate` a second in all; answers how many were sent. */
  async subscribe(frame: string, rate: number): Promise<number> {
    const sent = await Promise.all(this.#workers.map((worker) => worker.channel.request<number>({ op: 'subscribe', frame, rate: (rate * worker.clients) / this.#started })));
    return sent.reduce((sum, n) => sum + n, 0);
  }

  close(): Promise<void> {
    // A second request to a worker that has already left would fail on its closed channel.
    return (this.#closing ??= this.#close());
  }

  async #close(): Promise<void> {
    const exits = this.#workers.map(({ channel }) => channel.child.exitCode === null ? once(channel.child, 'exit') : Promise.resolve());
    await this.#all({ op: 'close' }).catch(() => undefined);
    const timer = setTimeout(() => this.#workers.forEach(({ channel }) => channel.child.kill()), 10_000);
    await Promise.all(exits);
    clearTimeout(timer);
  }
}

/** The clients of a run: in this process while they fit in one, else spread over workers. */
export function clientGroup(spec: PoolSpec, perWorker: number): ClientGroup {
  return spec.count <= perWorker ? new Pool(spec) : new WorkerPools(spec, perWorker);
}
