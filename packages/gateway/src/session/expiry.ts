/**
 * When open connections' tokens run out: a calendar of one-second sets and one timer ticking once a second, for
 * any number of connections. A connection waits in the set of its next due second: its notice (`noticeMs` before
 * expiry: TOKEN_EXPIRING), then its expiry (closed with 4001). At a tick, each one due is looked at again as it is
 * now: one that refreshed meanwhile (a later expiry) goes to the set of its new due second, so a refresh costs the
 * queue nothing. A connection is in one set at a time, and a close takes it out, so a churn of
 * connections leaves nothing behind; its place is its `dueWith` field, a pointer, not a closure or a Set of its own.
 */

/** What the queue holds: a connection whose expiry may move later, never earlier (see REFRESH). */
export interface Expiring<T> {
  readonly expiresAt: number;
  dueWith: Set<T> | undefined;
}

export interface ExpiryHandler<T> {
  /** `noticeMs` or less before its expiry (sent once per expiry). */
  notice(item: T, expiresAt: number): void;
  /** Its expiry has come: the handler closes it (and `remove`s it). */
  expire(item: T): void;
}

export interface ExpiryQueueOptions<T> {
  noticeMs: number;
  handler: ExpiryHandler<T>;
  /** The clock, ms since the epoch (tests drive their own). */
  now?: () => number;
}

const secondOf = (ms: number): number => Math.ceil(ms / 1000);

export class ExpiryQueue<T extends Expiring<T>> {
  /** Second since the epoch -> what is due in it (due times in ((s - 1) * 1000, s * 1000] ms). */
  readonly #dueBySecond = new Map<number, Set<T>>();
  readonly #options: ExpiryQueueOptions<T>;
  readonly #now: () => number;
  /** Every second up to this one has been handled: what falls due earlier goes into the next one. */
  #done: number;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ExpiryQueueOptions<T>) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#done = Math.floor(this.#now() / 1000);
  }

  /** Tick once a second until close(); the timer keeps no process alive. */
  start(): void {
    this.#timer ??= setInterval(() => this.tick(), 1000);
    this.#timer.unref();
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Hold a new connection until its notice. A connection whose tokens never expire (no `exp`) is not held. */
  add(item: T): void {
    const { expiresAt } = item;
    if (Number.isFinite(expiresAt)) this.#hold(item, expiresAt - this.#options.noticeMs);
  }

  remove(item: T): void {
    item.dueWith?.delete(item);
    item.dueWith = undefined;
  }

  /** Connections held (for tests and metrics). */
  get size(): number {
    let size = 0;
    for (const due of this.#dueBySecond.values()) size += due.size;
    return size;
  }

  /** Handle every second due by now. */
  tick(): void {
    const now = this.#now();
    const until = Math.floor(now / 1000);
    for (let second = this.#done + 1; second <= until; second++) {
      const due = this.#dueBySecond.get(second);
      this.#done = second;
      if (due === undefined) continue;
      this.#dueBySecond.delete(second);
      for (const item of due) this.#due(item, now);
    }
  }

  #due(item: T, now: number): void {
    item.dueWith = undefined;
    const { expiresAt } = item;
    const noticeAt = expiresAt - this.#options.noticeMs;
    if (now >= expiresAt) return this.#options.handler.expire(item);
    if (now < noticeAt) return this.#hold(item, noticeAt);
    this.#options.handler.notice(item, expiresAt);
    this.#hold(item, expiresAt);
  }

  #hold(item: T, dueAt: number): void {
    const second = Math.max(secondOf(dueAt), this.#done + 1);
    let due = this.#dueBySecond.get(second);
    if (due === undefined) this.#dueBySecond.set(second, (due = new Set()));
    due.add(item);
    item.dueWith = due;
  }
}
