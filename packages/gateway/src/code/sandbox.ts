/**
 * The sandbox runner: code that is not isolate-safe runs in worker processes (sandbox-process.ts) or containers
 * (sandbox-docker.ts) beside the node, each running sandbox-worker.ts. This file is what both share: the
 * code files, the pool, batches of calls run one at a time per worker, g.sys.db.getAll served from the node,
 * the time limit (the node kills a worker that does not answer in time) and a new worker after any death.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type {
  CanConnectRequest,
  CanConnectVerdict,
  CodeRunner,
  GetAllQuery,
  PreparedCode,
  RunnerLimits,
  SystemCalls,
} from './code-runner.ts';
import { Batches, type BatchSlot } from './batches.ts';
import type { ToWorker } from './sandbox-protocol.ts';
import { isOutcome, messageOf, outOfMemory, timedOut, unavailable, verdictOf } from './verdict.ts';

export interface WorkerEvents {
  message(message: unknown): void;
  /** The worker is gone; `memory`: it went over its memory limit. */
  exit(why: string, memory: boolean): void;
}

export interface WorkerHandle {
  /** Throws when the message cannot be serialized (JSON: a BigInt, a cycle). */
  send(message: ToWorker): void;
  /** Ends the worker now; its exit event follows. */
  kill(): void;
}

export interface WorkerLauncher {
  /** Where workers run, for messages: "worker process", "docker at unix:///var/run/docker.sock". */
  readonly where: string;
  /** Starts a worker, which sends `ready` once it takes calls; rejects with why it cannot start. */
  start(events: WorkerEvents): Promise<WorkerHandle>;
}

/** A worker slow to start (a cold container) is given this long, apart from the calls' time limit. */
const STARTUP_MS = 20_000;

/** Sends, and says why not when the message cannot be serialized. */
function send(handle: WorkerHandle, message: ToWorker): string | undefined {
  try {
    handle.send(message);
    return undefined;
  } catch (error) {
    return messageOf(error);
  }
}

/**
 * A private directory for code files, named now and created at first use (SandboxRunner), so that a node
 * whose temp directory is not writable still starts, and its sandbox answers `unavailable`.
 */
export const codeDirName = (): string => join(tmpdir(), `herald-code-${process.pid}-${randomBytes(8).toString('hex')}`);

/** How long close waits for killed workers to be gone. */
const CLOSE_WAIT_MS = 5000;

class Worker {
  handle: WorkerHandle | undefined;
  /** The code files this worker was sent: it imports each once and keeps it. */
  readonly files = new Set<string>();
  /** Resolves to undefined once ready, or to why it never will be. */
  readonly ready: Promise<string | undefined>;
  readonly settle: (notReady: string | undefined) => void;
  /** Resolves once the worker is gone, or never started. */
  readonly gone: Promise<void>;
  readonly markGone: () => void;

  constructor() {
    let settle!: (notReady: string | undefined) => void;
    let markGone!: () => void;
    this.ready = new Promise((resolve) => (settle = resolve));
    this.gone = new Promise((resolve) => (markGone = resolve));
    this.settle = settle;
    this.markGone = markGone;
  }
}

/** A code version's module file, and how to make sure it is there (written at first use, or after a cleaner). */
interface CodeFile {
  path: string;
  ensure(): void;
}

/** The batch a worker is running: its calls run one at a time, in order. */
interface Running {
  sys: SystemCalls;
  /** The number of the call the worker is running: the first not answered. */
  current(): number;
  /** The current call's verdict; the next call is then the current one. */
  answer(verdict: CanConnectVerdict): void;
  /** The current call failed with the worker (timed out, killed, exited): the batch ends there. */
  fail(verdict: CanConnectVerdict): void;
}

class WorkerSlot implements BatchSlot {
  readonly #launcher: WorkerLauncher;
  readonly #limits: RunnerLimits;
  readonly #files: (code: PreparedCode) => CodeFile;
  #worker: Worker | undefined;
  #running: Running | undefined;
  #lastCall = 0;
  #closed = false;

  constructor(launcher: WorkerLauncher, limits: RunnerLimits, files: (code: PreparedCode) => CodeFile) {
    this.#launcher = launcher;
    this.#limits = limits;
    this.#files = files;
  }

  /**
   * One verdict per request, in order. The worker runs the batch's calls one at a time, each under the time
   * limit from the moment the one before it answered; when one ends the worker (a timeout, a memory blow-up,
   * an exit), it gets that verdict and the calls after it, which never ran, go to the next worker together.
   */
  async callAll(code: PreparedCode, requests: readonly CanConnectRequest[], sys: SystemCalls): Promise<CanConnectVerdict[]> {
    const file = this.#files(code);
    const verdicts: CanConnectVerdict[] = [];
    while (verdicts.length < requests.length) verdicts.push(...(await this.#runBatch(file, requests.slice(verdicts.length), sys)));
    return verdicts;
  }

  /** The verdicts of the batch's calls up to the first that ended its worker, or of all of them. */
  async #runBatch(file: CodeFile, requests: readonly CanConnectRequest[], sys: SystemCalls): Promise<CanConnectVerdict[]> {
    const handle = await this.#workerFor(file);
    if ('canConnect' in handle) return requests.map(() => handle);
    return new Promise((resolve) => {
      const first = this.#lastCall + 1;
      this.#lastCall += requests.length;
      const verdicts: CanConnectVerdict[] = [];
      let timer: NodeJS.Timeout | undefined;
      const finish = (): void => {
        clearTimeout(timer);
        if (this.#running === running) this.#running = undefined;
        resolve(verdicts);
      };
      const limit = (): void => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          this.stop();
          running.fail(timedOut(this.#limits));
        }, this.#limits.timeoutMs);
      };
      const running: Running = {
        sys,
        current: () => first + verdicts.length,
        answer: (verdict) => {
          verdicts.push(verdict);
          if (verdicts.length === requests.length) finish();
          else limit();
        },
        fail: (verdict) => {
          verdicts.push(verdict);
          finish();
        },
      };
      this.#running = running;
      limit();
      const calls = requests.map((request, index) => ({ call: first + index, request }));
      const unsent = send(handle, { type: 'calls', file: file.path, calls });
      if (unsent !== undefined) {
        verdicts.push(...requests.map(() => unavailable(`the request cannot be sent: ${unsent}`)));
        finish();
      }
    });
  }

  /** A ready worker that has (or will import) `file`, or the verdict that says why there is none. */
  async #workerFor(file: CodeFile): Promise<WorkerHandle | CanConnectVerdict> {
    if (this.#closed) return unavailable('the runner is closed');
    // Only a worker's first import of a file needs it on disk (a stat per REGISTER showed in the node's profile),
    // and before a worker starts: its permissions name the code directory, which must exist by then.
    let worker = this.#worker;
    if (!worker?.files.has(file.path)) {
      try {
        file.ensure();
      } catch (error) {
        return unavailable(`cannot write the code file: ${messageOf(error)}`);
      }
      worker ??= this.#start();
      worker.files.add(file.path);
    }
    const notReady = await worker.ready;
    if (notReady !== undefined || !worker.handle) return unavailable(notReady ?? `${this.#launcher.where}: not started`);
    return worker.handle;
  }

  /** Stops for good; resolves once its worker is gone (at most CLOSE_WAIT_MS). */
  async close(): Promise<void> {
    this.#closed = true;
    const worker = this.#worker;
    this.stop(unavailable('the runner is closed'));
    if (!worker) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([worker.gone, new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Kills the worker (the next call starts another) and ends the batch it was running, if any, with `verdict`. */
  stop(verdict?: CanConnectVerdict): void {
    const worker = this.#worker;
    this.#worker = undefined;
    worker?.settle(`${this.#launcher.where}: stopped`);
    worker?.handle?.kill();
    if (verdict) this.#running?.fail(verdict);
  }

  #start(): Worker {
    const worker = new Worker();
    this.#worker = worker;
    const timer = setTimeout(() => {
      worker.settle(`${this.#launcher.where}: no worker ready within ${STARTUP_MS} ms`);
      if (this.#worker === worker) this.stop();
    }, STARTUP_MS);
    void worker.ready.then(() => clearTimeout(timer));
    this.#launcher
      .start({ message: (message) => this.#onMessage(worker, message), exit: (why, memory) => this.#onExit(worker, why, memory) })
      .then(
        (handle) => {
          worker.handle = handle;
          // Stopped while it was starting: the slot no longer wants it.
          if (this.#worker !== worker) handle.kill();
        },
        (error) => {
          worker.settle(`${this.#launcher.where}: ${messageOf(error)}`);
          worker.markGone();
          if (this.#worker === worker) this.#worker = undefined;
        },
      );
    return worker;
  }

  #onMessage(worker: Worker, message: unknown): void {
    if (worker !== this.#worker || typeof message !== 'object' || message === null) return;
    const { type, call, query, params, outcome } = message as Record<string, unknown>;
    if (type === 'ready') worker.settle(undefined);
    const running = this.#running;
    if (running === undefined || call !== running.current()) return;
    if (type === 'outcome') {
      running.answer(isOutcome(outcome) ? verdictOf(outcome) : unavailable('the sandbox answered something unexpected'));
    }
    if (type === 'getAll' && typeof query === 'number') this.#serve(worker, running, call, query, params as GetAllQuery);
  }

  #serve(worker: Worker, running: Running, call: number, query: number, params: GetAllQuery): void {
    // Through a promise from the start: a getAll that throws at once must not throw here.
    Promise.resolve(params).then((asked) => running.sys.db.getAll(asked)).then(
      (rows): ToWorker => ({ type: 'rows', call, query, rows }),
      (error): ToWorker => ({ type: 'rows', call, query, error: messageOf(error) }),
    ).then((reply) => {
      if (worker !== this.#worker || this.#running !== running || running.current() !== call || !worker.handle) return;
      const unsent = send(worker.handle, reply);
      // Rows JSON cannot carry (a BigInt): the code gets an error instead of waiting for its time limit.
      if (unsent !== undefined) send(worker.handle, { type: 'rows', call, query, error: `the rows cannot be sent: ${unsent}` });
    });
  }

  #onExit(worker: Worker, why: string, memory: boolean): void {
    worker.markGone();
    worker.settle(`${this.#launcher.where}: the worker exited before it was ready (${why})`);
    if (worker !== this.#worker) return;
    this.#worker = undefined;
    const where = this.#launcher.where;
    this.#running?.fail(memory ? outOfMemory(this.#limits) : unavailable(`${where}: the worker exited during the call (${why})`));
  }
}

export class SandboxRunner implements CodeRunner {
  readonly #codeDir: string;
  readonly #slots: WorkerSlot[];
  readonly #batches: Batches<WorkerSlot>;
  /** By code id. */
  readonly #files = new Map<string, CodeFile>();

  /** `codeDir` becomes the runner's: close removes it. Workers start on first use. */
  constructor(launcher: WorkerLauncher, limits: RunnerLimits, codeDir: string) {
    this.#codeDir = codeDir;
    this.#slots = Array.from({ length: limits.size }, () => new WorkerSlot(launcher, limits, (code) => this.#file(code)));
    this.#batches = new Batches(this.#slots, limits, launcher.where);
  }

  canConnect(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    return this.#batches.call(code, request, sys);
  }

  async close(): Promise<void> {
    this.#batches.close();
    await Promise.all(this.#slots.map((slot) => slot.close()));
    rmSync(this.#codeDir, { recursive: true, force: true });
  }

  /**
   * An ES module exporting main: the code itself, plus the export it need not write. Written before a
   * worker's first import of it, if it is not there (first use, or a temp-directory cleaner removed it).
   */
  #file(code: PreparedCode): CodeFile {
    let file = this.#files.get(code.id);
    if (!file) {
      const path = join(this.#codeDir, `${code.id}.mjs`);
      const ensure = (): void => {
        if (existsSync(path)) return;
        mkdirSync(this.#codeDir, { recursive: true, mode: 0o700 });
        writeFileSync(path, code.exportsMain ? code.source : `${code.source}\n;export { main };\n`);
      };
      this.#files.set(code.id, (file = { path, ensure }));
    }
    return file;
  }
}
