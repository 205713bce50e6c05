/**
 * Route writes, in call order, at most one batch per ROUTE_WRITE_GAP_MS. A write made when none left within the gap
 * leaves at once (in this turn's one socket write, see connection.ts); those made within it wait for the gap's end
 * and leave together. At low rates nothing waits. When clients register faster than one a millisecond (a churn, a
 * restart's clients coming back), their route writes share a batch: a command written alone in its turn costs the
 * node several times one written among tens (docs/architecture.md, "Measured costs"). A REGISTER's reply waits for
 * its route's write, so at most the gap longer.
 */

/** The gap at which churned clients with a route each cost the node least (docs/architecture.md, "Measured costs"). */
const ROUTE_WRITE_GAP_MS = 1;

/** Sends its Redis commands when called (synchronously) and settles once they are answered. */
export type Write = () => Promise<unknown>;

export class WriteQueue {
  readonly #failed: (error: Error) => void;
  #lastSent = -Infinity;
  #timer: NodeJS.Timeout | undefined;
  #waiting: Write[] = [];
  #batch: PromiseWithResolvers<void> | undefined;
  #dropped = false;

  /** `failed` hears of each write that fails; the write's promise still settles (writes never reject). */
  constructor(failed: (error: Error) => void) {
    this.#failed = failed;
  }

  /** Settles once the writes are answered (ones that waited: once their whole batch is). */
  push(...writes: Write[]): Promise<void> {
    if (this.#dropped) return Promise.resolve();
    const now = performance.now();
    if (this.#timer === undefined && now - this.#lastSent >= ROUTE_WRITE_GAP_MS) {
      this.#lastSent = now;
      return this.#sendAll(writes);
    }
    this.#waiting.push(...writes);
    this.#timer ??= setTimeout(() => this.#sendWaiting(), this.#lastSent + ROUTE_WRITE_GAP_MS - now);
    return (this.#batch ??= Promise.withResolvers()).promise;
  }

  /** The node is leaving and removes its state whole: the waiting writes are never sent; their promises settle. */
  drop(): void {
    this.#dropped = true;
    clearTimeout(this.#timer);
    this.#waiting = [];
    this.#batch?.resolve();
  }

  #sendWaiting(): void {
    const writes = this.#waiting;
    const batch = this.#batch!;
    this.#timer = undefined;
    this.#waiting = [];
    this.#batch = undefined;
    this.#lastSent = performance.now();
    void this.#sendAll(writes).then(batch.resolve);
  }

  #sendAll(writes: Write[]): Promise<void> {
    // One write is most batches at low rates: no Promise.all for it.
    return writes.length === 1 ? this.#send(writes[0]!) : Promise.all(writes.map((write) => this.#send(write))).then(settled);
  }

  #send(write: Write): Promise<void> {
    try {
      return write().then(settled, this.#failed);
    } catch (error) {
      this.#failed(error as Error);
      return Promise.resolve();
    }
  }
}

function settled(): void {}
