/**
 * A fixed set of slots (isolates, workers, containers), one batch of calls at a time each (batches.ts). A batch
 * that finds none free waits in a bounded queue, first come first served, and gives up after its wait limit: a
 * REGISTER is held at most the wait plus the time limits of its batch's calls up to its own (those run one after
 * another only when they use up their time: code that loops or waits).
 */
interface Waiter<S> {
  grant(slot: S): void;
  refuse(why: string): void;
}

export class SlotPool<S> {
  readonly #free: S[];
  readonly #size: number;
  readonly #queueLimit: number;
  readonly #waiting: Waiter<S>[] = [];
  #closed = false;

  constructor(slots: readonly S[], queueLimit: number) {
    this.#free = [...slots];
    this.#size = slots.length;
    this.#queueLimit = queueLimit;
  }

  /** A free slot, or a string saying why there is none: queue full, waited `waitMs` in vain, or closed. */
  acquire(waitMs: number): Promise<S | string> {
    if (this.#closed) return Promise.resolve('the runner is closed');
    const slot = this.#free.pop();
    if (slot !== undefined) return Promise.resolve(slot);
    if (this.#waiting.length >= this.#queueLimit) {
      return Promise.resolve(`all ${this.#size} busy and ${this.#waiting.length} calls waiting`);
    }
    return new Promise((resolve) => {
      const waiter: Waiter<S> = {
        grant: (granted) => {
          clearTimeout(timer);
          resolve(granted);
        },
        refuse: (why) => {
          clearTimeout(timer);
          resolve(why);
        },
      };
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        resolve(`none of ${this.#size} became free within ${waitMs} ms`);
      }, waitMs);
      this.#waiting.push(waiter);
    });
  }

  release(slot: S): void {
    const waiter = this.#waiting.shift();
    if (waiter) waiter.grant(slot);
    else this.#free.push(slot);
  }

  /** Refuses every waiting call; later acquires are refused too. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiting.splice(0)) waiter.refuse('the runner is closed');
  }
}
