/**
 * Clients spread over worker processes, for counts past what one process may hold open (20,000 files here):
 * worker w holds clients [w·perWorker, (w+1)·perWorker), each from its source address (`sourceAddress`).
 * The parent adds up what the workers report.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Pool, type ClientGroup, type PoolSpec } from './pool.ts';
import { mergeSnapshots, type PoolSnapshot } from './snapshot.ts';
import type { WorkerReply, WorkerRequest } from './worker.ts';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
type WithoutId<R> = R extends unknown ? Omit<R, 'id'> : never;
export type RequestBody = WithoutId<WorkerRequest>;

/** One worker process and its requests in flight (WorkerPools, and a bench that drives workers itself). */
export class WorkerChannel {
  readonly child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  #next = 0;

  constructor() {
    this.child = fork(WORKER, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
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
  readonly #workers: WorkerChannel[] = [];
  #closing: Promise<void> | undefined;

  constructor(spec: PoolSpec, perWorker: number) {
    this.#spec = spec;
    this.#perWorker = perWorker;
  }

  async open(signal?: AbortSignal): Promise<void> {
    const { count, rate, first } = this.#spec;
    const workers = Math.ceil(count / this.#perWorker);
    const opened: Promise<unknown>[] = [];
    for (let w = 0; w < workers; w++) {
      const channel = new WorkerChannel();
      this.#workers.push(channel);
      const share = Math.min(this.#perWorker, count - w * this.#perWorker);
      const spec: PoolSpec = {
        ...this.#spec,
        first: first + w * this.#perWorker,
        count: share,
        rate: (rate * share) / count,
      };
      opened.push(channel.request({ op: 'open', spec }));
    }
    const abort = () => void this.#all({ op: 'abort' });
    signal?.addEventListener('abort', abort, { once: true });
    try {
      await Promise.all(opened);
    } finally {
      signal?.removeEventListener('abort', abort);
    }
  }

  #all<T>(body: RequestBody): Promise<T[]> {
    return Promise.all(this.#workers.map((worker) => worker.request<T>(body)));
  }

  async snapshot(withRecipients = false): Promise<PoolSnapshot> {
    return mergeSnapshots(await this.#all<PoolSnapshot>({ op: 'snapshot', withRecipients }));
  }

  async resetDelivery(): Promise<void> {
    await this.#all({ op: 'reset' });
  }

  close(): Promise<void> {
    // A second request to a worker that has already left would fail on its closed channel.
    return (this.#closing ??= this.#close());
  }

  async #close(): Promise<void> {
    const exits = this.#workers.map((worker) => worker.child.exitCode === null ? once(worker.child, 'exit') : Promise.resolve());
    await this.#all({ op: 'close' }).catch(() => undefined);
    const timer = setTimeout(() => this.#workers.forEach((worker) => worker.child.kill()), 10_000);
    await Promise.all(exits);
    clearTimeout(timer);
  }
}

/** The clients of a run: in this process while they fit in one, else spread over workers. */
export function clientGroup(spec: PoolSpec, perWorker: number): ClientGroup {
  return spec.count <= perWorker ? new Pool(spec) : new WorkerPools(spec, perWorker);
}
