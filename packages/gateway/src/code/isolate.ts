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
 * The code's declarations live in a function scope of their own; what it evaluates to is the entry the
 * node calls: it builds `g` inside the isolate, with g.sys.db.getAll calling back into the node (the
 * query copied out, the rows copied in).
 */
const entryScript = (source: string): string => `(function () {
"use strict";
${source}
;return async (requestJson, getAll) => __heraldOutcome(main, { req: JSON.parse(requestJson), sys: { db: {
  getAll: (query) => getAll.apply(undefined, [query], { arguments: { copy: true }, result: { promise: true, copy: true } }),
} } });
})()`;

type Entry = (requestJson: string, getAll: ivm.Reference) => Promise<Outcome>;

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
const isTimeout = (error: unknown): boolean => messageOf(error).includes('timed out');

class IsolateSlot {
  readonly #limits: RunnerLimits;
  #isolate: ivm.Isolate | undefined;
  /** Per code id: its loaded entry in this isolate (a promise, so a failed load is retried next call). */
  #entries = new Map<string, Promise<ivm.Reference<Entry>>>();
  #closed = false;
  #bridged: { sys: SystemCalls; reference: ivm.Reference } | undefined;

  constructor(limits: RunnerLimits) {
    this.#limits = limits;
  }

  async call(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    if (this.#closed) return unavailable('the runner is closed');
    const isolate = this.#live();
    let entry: ivm.Reference<Entry>;
    try {
      entry = await this.#entry(isolate, code);
    } catch (error) {
      this.#entries.delete(code.id);
      return this.#failure(isolate, error, (text) => verdictOf({ kind: 'threw', text }));
    }
    const getAll = this.#bridge(sys);
    let backstop: NodeJS.Timeout | undefined;
    try {
      // A string crosses into the isolate as it is; parsing it there is cheaper than an ExternalCopy per call.
      const run = entry.apply(undefined, [JSON.stringify(request), getAll], {
        result: { promise: true, copy: true },
        timeout: this.#limits.timeoutMs,
      });
      const hung = new Promise<'hung'>((resolve) => {
        backstop = setTimeout(resolve, this.#limits.timeoutMs + BACKSTOP_GRACE_MS, 'hung');
      });
      const outcome: unknown = await Promise.race([run, hung]);
      if (outcome === 'hung') {
        // Its time limit only covers running JavaScript, not awaiting a promise that never settles.
        this.#dispose();
        return timedOut(this.#limits);
      }
      return isOutcome(outcome) ? verdictOf(outcome) : unavailable('the isolate answered something unexpected');
    } catch (error) {
      return this.#failure(isolate, error, (text) => unavailable(text));
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

  #entry(isolate: ivm.Isolate, code: PreparedCode): Promise<ivm.Reference<Entry>> {
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
async function loadEntry(isolate: ivm.Isolate, code: PreparedCode, timeoutMs: number): Promise<ivm.Reference<Entry>> {
  const context = await isolate.createContext();
  await context.eval(OUTCOME_SCRIPT, { timeout: timeoutMs });
  const script = await isolate.compileScript(entryScript(code.source), { filename: `can-connect-${code.event}.js` });
  return (await script.run(context, { reference: true, timeout: timeoutMs })) as ivm.Reference<Entry>;
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
