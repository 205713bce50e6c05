/**
 * The order of one route's notifications on this node (events with history): whatever the emitting nodes do, each
 * offset is let through once and in order. Emits made on different nodes may arrive out of order, and a message
 * may be lost while Redis reconnects; the history in Redis fills what is missing.
 *
 * - Before the route's position is known (its history is read once the route is registered), arrivals are held.
 * - Same epoch: an offset at or below the last one let through is a duplicate (dropped, counted); the next one is
 *   let through; a later one is a gap: it is held, with every arrival after it, while the missing range is read.
 * - Another epoch (Redis lost the history, or the route's position expired): the new epoch is taken, from its
 *   offset 0, so its first offsets are read if they did not arrive (they were appended while this node was not
 *   yet written back into Redis's registry).
 * - A read that fails, or finds the entries gone, gives up the gap (counted): the held arrivals go on.
 * - Nothing is given up silently: the first entry let through after a gap given up, or after an epoch change, says so
 *   (`afterLoss`), and its subscribers are told (`"recovered":false` on that NOTIFICATION).
 */
import type { Position } from '@herald/protocol';
import type { HistoryRange, HistoryRead } from '../broker/broker.ts';

/** One notification of the route: `eventData` as emitted (live), or its JSON as stored (read from the history). */
export interface RouteEntry {
  offset: number;
  epoch: string;
  eventData?: Record<string, unknown>;
  json?: string;
  /** Entries of the route before this one were lost on this node (a gap given up, an epoch change). */
  afterLoss?: true;
}

/** What a RouteHistory asks of its node, about its route `R` (one host serves every route: nothing per route). */
export interface RouteHistoryHost<R> {
  /** Entries of the route's history (RouteHistory asks for a range it has not let through). */
  read(route: R, range: HistoryRange): Promise<HistoryRead>;
  /** The route's next entry, in order: fan it out. */
  next(route: R, entry: RouteEntry): void;
  duplicate(): void;
  gap(filled: boolean): void;
  /** An arrival not held: too many wait already (a later gap reads it back from the history). */
  overflow(): void;
}

export class RouteHistory<R = unknown> {
  /** The last offset let through, in `epoch`; the epoch is undefined while unknown (not read yet, or the read failed). */
  epoch: string | undefined;
  offset = 0;
  /** The position read when the route came (undefined: the read failed, or it is still on its way). */
  start: Position | undefined;
  #known = false;
  #filling = false;
  /** Entries were lost since the last one let through: the next one says so. */
  #lost = false;
  #held: RouteEntry[] = [];
  readonly #host: RouteHistoryHost<R>;
  readonly #route: R;
  readonly #holdLimit: number;

  constructor(host: RouteHistoryHost<R>, route: R, holdLimit: number) {
    this.#host = host;
    this.#route = route;
    this.#holdLimit = holdLimit;
  }

  /** Whether the route's position has been read (or its read failed): until then arrivals wait. */
  get known(): boolean {
    return this.#known;
  }

  /** The position as last let through; undefined while unknown. */
  get position(): Position | undefined {
    return this.epoch === undefined ? undefined : { offset: this.offset, epoch: this.epoch };
  }

  /** The route's position as read after it was registered; `read` undefined: the read failed (the next arrival sets it). */
  begin(read: HistoryRead | undefined): void {
    if (read !== undefined) {
      this.epoch = read.epoch;
      this.offset = read.offset;
      this.start = { offset: read.offset, epoch: read.epoch };
    }
    this.#known = true;
    this.#release();
  }

  arrive(entry: RouteEntry): void {
    if (!this.#known || this.#filling) this.#hold(entry);
    else this.#take(entry);
  }

  /**
   * The route's position as read now, without an arrival (Redis came back after this node lost it): entries appended
   * meanwhile that never arrived are read and let through, as a gap's are.
   */
  reach(read: HistoryRead): void {
    if (!this.#known || this.#filling || this.epoch === undefined) return;
    if (read.epoch !== this.epoch) this.#newEpoch(read.epoch);
    if (read.offset > this.offset) this.#fill(read.offset);
  }

  #take(entry: RouteEntry): void {
    if (entry.epoch !== this.epoch) {
      if (this.epoch === undefined) {
        this.epoch = entry.epoch;
        this.offset = entry.offset - 1;
      } else this.#newEpoch(entry.epoch);
    }
    if (entry.offset <= this.offset) return this.#host.duplicate();
    if (entry.offset === this.offset + 1) return this.#pass(entry);
    this.#hold(entry);
    this.#fill(entry.offset - 1);
  }

  /** Redis lost the history (or the route's position expired): whatever this node had not let through is lost. */
  #newEpoch(epoch: string): void {
    this.epoch = epoch;
    this.offset = 0;
    this.#lost = true;
  }

  #pass(entry: RouteEntry): void {
    this.offset = entry.offset;
    if (this.#lost) {
      this.#lost = false;
      entry.afterLoss = true;
    }
    this.#host.next(this.#route, entry);
  }

  #hold(entry: RouteEntry): void {
    if (this.#held.length < this.#holdLimit) this.#held.push(entry);
    else this.#host.overflow();
  }

  /** Read the offsets after the last let through, up to `upTo`, then go on with what was held. */
  #fill(upTo: number): void {
    const epoch = this.epoch!;
    const since = { offset: this.offset, epoch };
    this.#filling = true;
    const missed = upTo - since.offset;
    const settled = (read: HistoryRead | undefined): void => {
      this.#filling = false;
      // An epoch changed meanwhile by an arrival cannot happen (arrivals are held), so `epoch` is still ours.
      const whole = read !== undefined && read.unrecovered === undefined && read.entries.length === missed;
      if (whole) for (const { offset, json } of read.entries) this.#pass({ offset, epoch, json });
      else {
        this.offset = upTo;
        this.#lost = true;
      }
      this.#host.gap(whole);
      this.#release();
    };
    this.#host.read(this.#route, { since, upTo, limit: missed }).then(settled, () => settled(undefined));
  }

  /** The held arrivals, in order, until one starts another fill: it is held again, and the rest after it. */
  #release(): void {
    const held = this.#held;
    this.#held = [];
    for (let i = 0; i < held.length; i++) {
      if (this.#filling) {
        this.#held = this.#held.concat(held.slice(i));
        return;
      }
      this.#take(held[i]!);
    }
  }
}
