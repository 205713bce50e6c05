/**
 * Calls that arrive together go to a runner's slot (an isolate, a sandbox worker) together: crossing into an
 * isolate or a worker costs more than most can-connect code, so a burst of REGISTERs pays it once per batch.
 * Both runners batch the same way; each slot answers a batch with one verdict per call, in order.
 */
import type { CanConnectRequest, CanConnectVerdict, PreparedCode, RunnerLimits, SystemCalls } from './code-runner.ts';
import { SlotPool } from './pool.ts';
import { messageOf, unavailable } from './verdict.ts';

/** A batch holds calls of one code with one set of system calls, at most this many. */
const MAX_BATCH = 32;

/**
 * How long a batch stays open when the last one closed less than this before: calls are coming steadily. Under a
 * churn of REGISTERs a turn of the event loop brings one or two, too few for a batch to pay for itself; open 2 ms, a
 * batch holds enough that a churned client costs about what it costs without code (docs/architecture.md, "Measured
 * costs"). A call after a quiet spell does not wait for it: its batch closes at the end of the next turn.
 */
const BATCH_WINDOW_MS = 2;

export interface BatchSlot {
  /** One verdict per request, in order; never rejects for the code's own failures (those are verdicts). */
  callAll(code: PreparedCode, requests: readonly CanConnectRequest[], sys: SystemCalls): Promise<CanConnectVerdict[]>;
}

interface Queued {
  code: PreparedCode;
  request: CanConnectRequest;
  sys: SystemCalls;
  resolve(verdict: CanConnectVerdict): void;
}

export class Batches<S extends BatchSlot> {
  readonly #pool: SlotPool<S>;
  readonly #waitMs: number;
  /** Names the slots in the verdicts of calls that found none, or whose slot failed: "isolates: …". */
  readonly #label: string;
  #queued: Queued[] = [];
  /** performance.now() when the last batch closed. */
  #lastFlush = -Infinity;

  /** The pool of `slots` is the batches': a batch waits up to `limits.timeoutMs` for a slot, behind `limits.queue`. */
  constructor(slots: readonly S[], limits: RunnerLimits, label: string) {
    this.#pool = new SlotPool(slots, limits.queue);
    this.#waitMs = limits.timeoutMs;
    this.#label = label;
  }

  /** Batches still waiting for a slot get their verdict now; the slots themselves are the runner's to close. */
  close(): void {
    this.#pool.close();
  }

  call(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    return new Promise((resolve) => {
      if (this.#queued.length === 0) this.#open();
      this.#queued.push({ code, request, sys, resolve });
    });
  }

  /**
   * Calls coming steadily (the last batch closed within the window): the batch stays open BATCH_WINDOW_MS.
   * Otherwise an immediate set from an immediate closes it at the end of the next turn: the REGISTERs of two
   * turns' socket reads, a few microseconds when the node is idle.
   */
  #open(): void {
    if (performance.now() - this.#lastFlush < BATCH_WINDOW_MS) setTimeout(() => this.#flush(), BATCH_WINDOW_MS);
    else setImmediate(() => setImmediate(() => this.#flush()));
  }

  #flush(): void {
    const queued = this.#queued;
    this.#queued = [];
    this.#lastFlush = performance.now();
    for (const batch of batchesOf(queued)) {
      void this.#run(batch).then((verdicts) =>
        batch.forEach((call, index) => call.resolve(verdicts[index] ?? unavailable(`${this.#label}: no verdict for the call`))),
      );
    }
  }

  async #run(batch: readonly Queued[]): Promise<CanConnectVerdict[]> {
    const slot = await this.#pool.acquire(this.#waitMs);
    if (typeof slot === 'string') return batch.map(() => unavailable(`${this.#label}: ${slot}`));
    const [{ code, sys }] = batch as [Queued];
    try {
      return await slot.callAll(code, batch.map((call) => call.request), sys);
    } catch (error) {
      // The runner itself failed (an isolate could not be created): each call still gets a verdict.
      return batch.map(() => unavailable(`${this.#label}: ${messageOf(error)}`));
    } finally {
      this.#pool.release(slot);
    }
  }
}

/** Calls of the same code and system calls together, at most MAX_BATCH each, in their order of arrival. */
function batchesOf(queued: readonly Queued[]): Queued[][] {
  const batches: Queued[][] = [];
  for (const call of queued) {
    const batch = batches.find((open) => open.length < MAX_BATCH && open[0]?.code.id === call.code.id && open[0].sys === call.sys);
    if (batch) batch.push(call);
    else batches.push([call]);
  }
  return batches;
}
