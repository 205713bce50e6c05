/**
 * The node's delivery backlog: bytes handed to sockets that their streams have not yet passed to the kernel, and
 * bytes fan-outs have still to write. Both are running counts (a write adds, its stream's callback subtracts; a
 * fan-out counts a frame's recipients once and takes each off as it writes), so that what an emit checks is a
 * comparison, never a walk over the sockets.
 *
 * It also orders the answers of emits that wait (emit.whenBacklogged: wait): each fan-out has a number, and a
 * waiting emit is answered once every fan-out begun before it has been handed to the sockets and the backlog is
 * within its bound again.
 */

interface Waiter {
  /** The last fan-out begun when it started to wait. */
  readonly upTo: number;
  readonly resolve: () => void;
}

export class DeliveryBacklog {
  /** Bytes past which emits are refused (or wait): emit.maxBacklogBytes. */
  readonly bound: number;
  /** Bytes written to sockets and not yet passed to the kernel. */
  socketBytes = 0;
  /** Bytes of frames fan-outs have still to write (a frame counts once per recipient). */
  fanOutBytes = 0;
  #lastFanOut = 0;
  /** Fan-outs begun and not ended, in the order begun. */
  readonly #running = new Set<number>();
  #waiters: Waiter[] = [];

  constructor(bound: number) {
    this.bound = bound;
  }

  get bytes(): number {
    return this.socketBytes + this.fanOutBytes;
  }

  get over(): boolean {
    return this.bytes > this.bound;
  }

  /** A stream took `bytes`; the callback it is given subtracts them once it has passed them on (or dropped them). */
  written(bytes: number): void {
    this.socketBytes += bytes;
  }

  passedOn(bytes: number): void {
    this.socketBytes -= bytes;
    if (this.#waiters.length > 0) this.#release();
  }

  /** A fan-out begins: answers its number, for `ended`. */
  began(): number {
    const id = ++this.#lastFanOut;
    this.#running.add(id);
    return id;
  }

  ended(id: number): void {
    this.#running.delete(id);
    if (this.#waiters.length > 0) this.#release();
  }

  /** Once every fan-out begun so far has ended and the backlog is within its bound. */
  settled(): Promise<void> {
    if (this.#running.size === 0 && !this.over) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ upTo: this.#lastFanOut, resolve }));
  }

  #release(): void {
    if (this.over) return;
    let oldest = Infinity;
    for (const id of this.#running) {
      oldest = id;
      break;
    }
    let released = 0;
    while (released < this.#waiters.length && this.#waiters[released]!.upTo < oldest) this.#waiters[released++]!.resolve();
    if (released > 0) this.#waiters = this.#waiters.slice(released);
  }
}
