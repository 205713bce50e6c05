/**
 * The isolate runner: lean code runs in V8 isolates inside the node (isolated-vm), each with its own heap
 * and memory limit and no Node APIs at all. A small pool of isolates; each code version gets its own
 * context in an isolate, compiled and loaded once, then its `main` is called per REGISTER.
 *
 * isolated-vm's README asks for `node --no-node-snapshot` on Node 20 and later (a V8 shared-heap problem
 * seen as crashes on some platforms); run the gateway with it (see the report in the code runners' notes).
 */
import ivm from 'isolated-vm';
import type {
  CanConnectRequest,
  CanConnectVerdict,
  CodeRunner,
  GetAllQuery,
  PreparedCode,
  RunnerLimits,
  SystemCalls,
} from './code-runner.ts';
import { SlotPool } from './pool.ts';
import { isOutcome, outcomeOf, outOfMemory, timedOut, unavailable, verdictOf, type Outcome } from './verdict.ts';

/** The node's own backstop after the isolate's time limit: catches a call that awaits forever. */
const BACKSTOP_GRACE_MS = 50;

/** Defined once per context; the code's entry calls it (see verdict.ts: outcomeOf is self-contained). */
const OUTCOME_SCRIPT = `const __heraldOutcome = ${outcomeOf.toString()};`;

/**
 * The code's declarations live in a function scope of their own; what it evaluates to is the entry the node
 * calls. `start` calls main with `g` built inside the isolate (g.sys.db.getAll calls back into the node: the
 * query copied out, the rows copied in); `read` answers the outcome once main has settled, which for most lean
 * code is at once (the isolate runs its microtasks when a call returns); `wait` and `run` hand back the promise.
 */
const entryScript = (source: string): string => `(function () {
"use strict";
${source}
;let pending, outcome;
const start = (requestJson, getAll) => {
  outcome = undefined;
  pending = __heraldOutcome(main, { req: JSON.parse(requestJson), sys: { db: {
    getAll: (query) => getAll.apply(undefined, [query], { arguments: { copy: true }, result: { promise: true, copy: true } }),
  } } });
  pending.then((settled) => { outcome = JSON.stringify(settled); });
};
return {
  start,
  read: () => outcome,
  wait: () => pending,
  run: (requestJson, getAll) => { start(requestJson, getAll); return pending; },
};
})()`;

/** The entry's functions, as references into the isolate. */
interface Entry {
  start: ivm.Reference<(requestJson: string, getAll: ivm.Reference) => void>;
  read: ivm.Reference<() => string | undefined>;
  wait: ivm.Reference<() => Promise<Outcome>>;
  run: ivm.Reference<(requestJson: string, getAll: ivm.Reference) => Promise<Outcome>>;
}

/**
 * CPU the synchronous first step may take on the node's own thread. Lean code usually settles within it in a few
 * microseconds (an async call to another thread costs ~60 µs); code that does not, or that loops, goes on in
 * the isolate's thread under the full time limit, so a loop stalls the node for this long at most.
 */
const SYNC_SLICE_MS = 10;

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
const isTimeout = (error: unknown): boolean => messageOf(error).includes('timed out');

class IsolateSlot {
  readonly #limits: RunnerLimits;
  #isolate: ivm.Isolate | undefined;
  /** Per code id: its loaded entry in this isolate (a promise, so a failed load is retried next call). */
  #entries = new Map<string, Promise<Entry>>();
  #closed = false;
  #bridged: { sys: SystemCalls; reference: ivm.Reference } | undefined;

  constructor(limits: RunnerLimits) {
    this.#limits = limits;
  }

  async call(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    if (this.#closed) return unavailable('the runner is closed');
    const isolate = this.#live();
    let entry: Entry;
    try {
      entry = await this.#entry(isolate, code);
    } catch (error) {
      this.#entries.delete(code.id);
      return this.#failure(isolate, error, (text) => verdictOf({ kind: 'threw', text }));
    }
    const getAll = this.#bridge(sys);
    // A string crosses into the isolate as it is; parsing it there is cheaper than an ExternalCopy per call.
    const requestJson = JSON.stringify(request);
    try {
      const first = this.#trySync(entry, requestJson, getAll);
      if (typeof first === 'object') return first;
      return await this.#await(entry, requestJson, getAll, first);
    } catch (error) {
      return this.#failure(isolate, error, (text) => unavailable(text));
    }
  }

  /**
   * The fast path: run main here and read its outcome. 'pending' when main awaits something (g.sys), 'sliced'
   * when it ran out of the slice (a long computation, or a loop) and must run again with its full time.
   */
  #trySync(entry: Entry, requestJson: string, getAll: ivm.Reference): CanConnectVerdict | 'pending' | 'sliced' {
    try {
      entry.start.applySync(undefined, [requestJson, getAll], { timeout: Math.min(SYNC_SLICE_MS, this.#limits.timeoutMs) });
    } catch (error) {
      if (isTimeout(error)) return 'sliced';
      throw error;
    }
    const settled = entry.read.applySync(undefined, []);
    if (settled === undefined) return 'pending';
    const outcome: unknown = JSON.parse(settled);
    return isOutcome(outcome) ? verdictOf(outcome) : unavailable('the isolate answered something unexpected');
  }

  /** The slow path, off the node's thread: wait for main (awaiting g.sys), or run it again with the full time. */
  async #await(entry: Entry, requestJson: string, getAll: ivm.Reference, first: 'pending' | 'sliced'): Promise<CanConnectVerdict> {
    const options = { result: { promise: true, copy: true }, timeout: this.#limits.timeoutMs } as const;
    const run = first === 'pending' ? entry.wait.apply(undefined, [], options) : entry.run.apply(undefined, [requestJson, getAll], options);
    let backstop: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => {
      backstop = setTimeout(resolve, this.#limits.timeoutMs + BACKSTOP_GRACE_MS, 'hung');
    });
    try {
      const outcome: unknown = await Promise.race([run, hung]);
      if (outcome === 'hung') {
        // Its time limit only covers running JavaScript, not awaiting a promise that never settles.
        this.#dispose();
        return timedOut(this.#limits);
      }
      return isOutcome(outcome) ? verdictOf(outcome) : unavailable('the isolate answered something unexpected');
    } finally {
      clearTimeout(backstop);
    }
  }

  /** g.sys.db.getAll as a reference into the node: one per set of system calls, made once, not per call. */
  #bridge(sys: SystemCalls): ivm.Reference {
    if (this.#bridged?.sys !== sys) {
      this.#bridged?.reference.release();
      this.#bridged = { sys, reference: new ivm.Reference(async (query: GetAllQuery) => sys.db.getAll(query)) };
    }
    return this.#bridged.reference;
  }

  #dispose(): void {
    if (this.#isolate && !this.#isolate.isDisposed) this.#isolate.dispose();
    this.#isolate = undefined;
    this.#entries = new Map();
  }

  close(): void {
    this.#closed = true;
    this.#dispose();
  }

  /** The slot's isolate, created anew after a memory blow-up or a hang disposed the last one. */
  #live(): ivm.Isolate {
    if (!this.#isolate || this.#isolate.isDisposed) {
      this.#dispose();
      this.#isolate = new ivm.Isolate({ memoryLimit: this.#limits.memoryMb });
    }
    return this.#isolate;
  }

  #entry(isolate: ivm.Isolate, code: PreparedCode): Promise<Entry> {
    let entry = this.#entries.get(code.id);
    if (!entry) {
      entry = loadEntry(isolate, code, this.#limits.timeoutMs);
      this.#entries.set(code.id, entry);
    }
    return entry;
  }

  /** A rejection from isolated-vm: the memory limit (isolate disposed), the time limit, or `otherwise`. */
  #failure(isolate: ivm.Isolate, error: unknown, otherwise: (text: string) => CanConnectVerdict): CanConnectVerdict {
    if (this.#closed) return unavailable('the runner is closed');
    if (isolate.isDisposed) {
      this.#dispose();
      return outOfMemory(this.#limits);
    }
    if (isTimeout(error)) return timedOut(this.#limits);
    return otherwise(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  }
}

/** One context per code version, so versions cannot see each other's changes to built-ins. */
async function loadEntry(isolate: ivm.Isolate, code: PreparedCode, timeoutMs: number): Promise<Entry> {
  const context = await isolate.createContext();
  await context.eval(OUTCOME_SCRIPT, { timeout: timeoutMs });
  const script = await isolate.compileScript(entryScript(code.source), { filename: `can-connect-${code.event}.js` });
  const entry = (await script.run(context, { reference: true, timeout: timeoutMs })) as ivm.Reference<Record<keyof Entry, unknown>>;
  const [start, read, wait, run] = await Promise.all(
    (['start', 'read', 'wait', 'run'] as const).map((name) => entry.get(name, { reference: true })),
  );
  return { start, read, wait, run } as Entry;
}

export class IsolateRunner implements CodeRunner {
  readonly #slots: IsolateSlot[];
  readonly #pool: SlotPool<IsolateSlot>;
  readonly #limits: RunnerLimits;

  /** Isolates are created on first use, and again after a memory blow-up or a hang. */
  constructor(limits: RunnerLimits) {
    this.#limits = limits;
    this.#slots = Array.from({ length: limits.size }, () => new IsolateSlot(limits));
    this.#pool = new SlotPool(this.#slots, limits.queue);
  }

  async canConnect(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    const slot = await this.#pool.acquire(this.#limits.timeoutMs);
    if (typeof slot === 'string') return unavailable(`isolates: ${slot}`);
    try {
      return await slot.call(code, request, sys);
    } catch (error) {
      // isolated-vm itself failed (an isolate could not be created): the promise is a verdict, whatever happens.
      return unavailable(`isolates: ${messageOf(error)}`);
    } finally {
      this.#pool.release(slot);
    }
  }

  async close(): Promise<void> {
    this.#pool.close();
    for (const slot of this.#slots) slot.close();
  }
}
