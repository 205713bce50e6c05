/**
 * The isolate runner: isolate-safe code runs in V8 isolates inside the node (isolated-vm), each with its own heap
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
import { Batches, type BatchSlot } from './batches.ts';
import { isOutcome, messageOf, outcomeOf, outOfMemory, timedOut, unavailable, verdictOf, type Outcome } from './verdict.ts';

/** The node's own backstop after the isolate's time limit: catches a call that awaits forever. */
const BACKSTOP_GRACE_MS = 50;

/** Defined once per context; the code's entry calls it (see verdict.ts: outcomeOf is self-contained). */
const OUTCOME_SCRIPT = `const __heraldOutcome = ${outcomeOf.toString()};`;

/**
 * The code's declarations live in a function scope of their own; what it evaluates to is the entry the node
 * calls. `startAll` calls main once per request of a batch, with `g` built inside the isolate (g.sys.db.getAll
 * calls back into the node through the reference `bind` set: the query copied out, the rows copied in), and
 * answers the outcomes known at once (null for a call still pending). `readAll` answers them again after the
 * isolate has run its microtasks (it does when a call returns): most async isolate-safe code has settled by then.
 * `wait` hands back one pending call's promise; `run` runs one request alone.
 */
const entryScript = (source: string): string => `(function () {
"use strict";
${source}
;let getAll, pending = [], outcomes = [];
const call = (req) => __heraldOutcome(main, { req, sys: { db: {
  getAll: (query) => getAll.apply(undefined, [query], { arguments: { copy: true }, result: { promise: true, copy: true } }),
} } });
return {
  bind: (reference) => { getAll = reference; },
  startAll: (requestsJson) => {
    const requests = JSON.parse(requestsJson);
    // Each batch settles into its own array: a call left behind by an earlier batch cannot write into this one.
    const settledAll = requests.map(() => null);
    outcomes = settledAll;
    pending = requests.map((req, i) => {
      const outcome = call(req);
      if (!(outcome instanceof Promise)) return settledAll[i] = outcome;
      return outcome.then((settled) => { settledAll[i] = settled; return settled; });
    });
    return JSON.stringify(settledAll);
  },
  readAll: () => JSON.stringify(outcomes),
  wait: (i) => pending[i],
  run: (requestJson) => call(JSON.parse(requestJson)),
};
})()`;

/** The entry's functions, as references into the isolate. */
interface Entry {
  bind: ivm.Reference<(getAll: ivm.Reference) => void>;
  startAll: ivm.Reference<(requestsJson: string) => string>;
  readAll: ivm.Reference<() => string>;
  wait: ivm.Reference<(index: number) => Outcome | Promise<Outcome>>;
  run: ivm.Reference<(requestJson: string) => Outcome | Promise<Outcome>>;
  /** The system calls `bind` last handed this entry. */
  bound?: SystemCalls;
}

const ENTRY_NAMES = ['bind', 'startAll', 'readAll', 'wait', 'run'] as const;

/**
 * CPU the synchronous first step may take on the node's own thread. Isolate-safe code usually settles within it in a few
 * microseconds (an async call to another thread costs far more); code that does not, or that loops, goes on in
 * the isolate's thread under the full time limit, so a loop stalls the node for this long at most.
 */
const SYNC_SLICE_MS = 10;

const isTimeout = (error: unknown): boolean => messageOf(error).includes('timed out');

class IsolateSlot implements BatchSlot {
  readonly #limits: RunnerLimits;
  #isolate: ivm.Isolate | undefined;
  /** Per code id: its loaded entry in this isolate (a promise, so a failed load is retried next call). */
  #entries = new Map<string, Promise<Entry>>();
  #closed = false;
  #bridged: { sys: SystemCalls; reference: ivm.Reference } | undefined;
  /** How a call off the node's thread is made: its outcome copied out, under the full time limit. */
  readonly #awaitOptions: { result: { promise: true; copy: true }; timeout: number };

  constructor(limits: RunnerLimits) {
    this.#limits = limits;
    this.#awaitOptions = { result: { promise: true, copy: true }, timeout: limits.timeoutMs };
  }

  /**
   * One verdict per request, in order. The batch runs here, synchronously, within the slice; a batch that
   * does not settle cleanly there (a loop, a throw from isolated-vm, a memory blow-up) runs again one request
   * at a time, so each request gets its own verdict and its own full limits.
   */
  async callAll(code: PreparedCode, requests: readonly CanConnectRequest[], sys: SystemCalls): Promise<CanConnectVerdict[]> {
    const loaded = await this.#load(code, sys);
    if ('canConnect' in loaded) return requests.map(() => loaded);
    const first = this.#trySync(loaded, requests);
    if (first === 'again') return this.#oneByOne(code, requests, sys);
    return Promise.all(first.map((settled, index) => settled ?? this.#settle(loaded.wait.apply(undefined, [index], this.#awaitOptions))));
  }

  /** The fast path: start every call here and read what settled; undefined where main awaits g.sys. */
  #trySync(entry: Entry, requests: readonly CanConnectRequest[]): (CanConnectVerdict | undefined)[] | 'again' {
    try {
      // A string crosses into the isolate as it is; parsing it there is cheaper than an ExternalCopy.
      const started = entry.startAll.applySync(undefined, [JSON.stringify(requests)], { timeout: Math.min(SYNC_SLICE_MS, this.#limits.timeoutMs) });
      const atOnce = verdictsOf(started, requests.length);
      return atOnce.includes(undefined) ? verdictsOf(entry.readAll.applySync(undefined, []), requests.length) : atOnce;
    } catch {
      return 'again';
    }
  }

  async #oneByOne(code: PreparedCode, requests: readonly CanConnectRequest[], sys: SystemCalls): Promise<CanConnectVerdict[]> {
    const verdicts: CanConnectVerdict[] = [];
    for (const request of requests) {
      const loaded = await this.#load(code, sys);
      if ('canConnect' in loaded) verdicts.push(loaded);
      else verdicts.push(await this.#settle(loaded.run.apply(undefined, [JSON.stringify(request)], this.#awaitOptions)));
    }
    return verdicts;
  }

  /** The code's entry in a live isolate, bound to `sys`; or the verdict that says why there is none. */
  async #load(code: PreparedCode, sys: SystemCalls): Promise<Entry | CanConnectVerdict> {
    if (this.#closed) return unavailable('the runner is closed');
    const isolate = this.#live();
    try {
      const entry = await this.#entry(isolate, code);
      if (entry.bound !== sys) {
        entry.bind.applySync(undefined, [this.#bridge(sys)]);
        entry.bound = sys;
      }
      return entry;
    } catch (error) {
      this.#entries.delete(code.id);
      return this.#failure(isolate, error, (text) => verdictOf({ kind: 'threw', text }));
    }
  }

  /** The slow path, off the node's thread: a call awaiting g.sys, or run again with its full time. */
  async #settle(run: Promise<unknown>): Promise<CanConnectVerdict> {
    const isolate = this.#isolate;
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
      return isOutcome(outcome) ? verdictOf(outcome) : unexpected();
    } catch (error) {
      return isolate ? this.#failure(isolate, error, (text) => unavailable(text)) : unavailable(messageOf(error));
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

const unexpected = (): CanConnectVerdict => unavailable('the isolate answered something unexpected');

/** The batch's outcomes as the isolate wrote them (JSON, null where pending), checked: the code could have changed JSON. */
function verdictsOf(json: string, count: number): (CanConnectVerdict | undefined)[] {
  const outcomes: unknown = JSON.parse(json);
  if (!Array.isArray(outcomes) || outcomes.length !== count) return Array.from({ length: count }, unexpected);
  return outcomes.map((outcome: unknown) => (outcome === null ? undefined : isOutcome(outcome) ? verdictOf(outcome) : unexpected()));
}

/** One context per code version, so versions cannot see each other's changes to built-ins. */
async function loadEntry(isolate: ivm.Isolate, code: PreparedCode, timeoutMs: number): Promise<Entry> {
  const context = await isolate.createContext();
  await context.eval(OUTCOME_SCRIPT, { timeout: timeoutMs });
  const script = await isolate.compileScript(entryScript(code.source), { filename: `can-connect-${code.event}.js` });
  const entry = (await script.run(context, { reference: true, timeout: timeoutMs })) as ivm.Reference<Record<keyof Entry, unknown>>;
  const references = await Promise.all(ENTRY_NAMES.map((name) => entry.get(name, { reference: true })));
  return Object.fromEntries(ENTRY_NAMES.map((name, index) => [name, references[index]])) as unknown as Entry;
}

export class IsolateRunner implements CodeRunner {
  readonly #slots: IsolateSlot[];
  readonly #batches: Batches<IsolateSlot>;

  /** Isolates are created on first use, and again after a memory blow-up or a hang. */
  constructor(limits: RunnerLimits) {
    this.#slots = Array.from({ length: limits.size }, () => new IsolateSlot(limits));
    this.#batches = new Batches(this.#slots, limits, 'isolates');
  }

  canConnect(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    return this.#batches.call(code, request, sys);
  }

  async close(): Promise<void> {
    this.#batches.close();
    for (const slot of this.#slots) slot.close();
  }
}
