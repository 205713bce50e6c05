/**
 * The limit on emits a node lets in while its clients' lag (lag.ts) climbs: congestion control, as TCP's, cut at once
 * and grown slowly. A lag is only known once a probe comes back: a node that let in every emit until then, or all at
 * once after a refusal, would give its clients a second or more to read before the next probe could tell.
 *
 * Passing the bound (every emit is then refused), the limit is halved; a node without a limit takes half of what it
 * let in lately. Climbing past half of the bound, it is cut by how much faster the lag climbed than time went by (a lag
 * that grew a second in a second: the clients read half what they were sent), once a lag (the time a cut takes to
 * show). Caught up, it grows a step a tick: a long one once the lag has been well within the bound for a while and busy
 * connections show it, else a short one (clients idle after a refusal tell nothing). It goes once emits no longer meet
 * it.
 */

/** What the lag's tick tells the limit. */
export interface LagReading {
  /** The tick's number: ticks since the lag started ticking. */
  tick: number;
  /** The median lag of the busy connections, in ms. */
  medianMs: number;
  /** Whether it is past emit.maxLagMs. */
  over: boolean;
  /** Connections that voted: 0 when none is busy. */
  votes: number;
}

/** Caught up (the lag within half of emit.maxLagMs), the limit grows this much a tick: half again a second. */
const GROWTH = 1.02;
/** Well within it (a quarter), with busy connections to show it, this much: tenfold a second. */
const FAST_GROWTH = 1.125;
/** A lag that grew this much a ms over the last SLOPE_TICKS (from their lowest) is climbing. */
const CLIMBING = 0.15;
const SLOPE_TICKS = 10;
/** Ticks after the lag was last past half the bound during which the limit only takes short steps. */
const SETTLE_TICKS = 40;
/** Ticks in a row with emits below half the limit after which the limit goes. */
const UNMET_TICKS = 20;
/** The weight of a tick in the mean of emits let in a tick. */
const MEAN_WEIGHT = 0.2;

export class EmitLimit {
  readonly #boundMs: number;
  readonly #tickMs: number;
  /** Emits let in a tick while the node has been behind lately; Infinity otherwise. */
  #limit = Infinity;
  /** Emits that may still be let in: the limit added each tick, kept up to twice it. */
  #credit = 0;
  #letIn = 0;
  #meanLetIn = 0;
  /** The tick before which the limit is not cut again. */
  #calmUntil = 0;
  /** Ticks in a row in which emits did not reach half the limit. */
  #unmet = 0;
  /** The median of each of the last SLOPE_TICKS ticks, by tick. */
  readonly #medians = new Float64Array(SLOPE_TICKS);
  #wasOver = false;
  /** The last tick at which the lag was past half the bound. */
  #lastBehind = -Infinity;

  /** `boundMs`: emit.maxLagMs; `tickMs`: how often the lag ticks. */
  constructor(boundMs: number, tickMs: number) {
    this.#boundMs = boundMs;
    this.#tickMs = tickMs;
  }

  /** Whether emits are limited now (the lag keeps ticking while they are). */
  get limiting(): boolean {
    return this.#limit !== Infinity;
  }

  /** Whether an emit may go in now; if so it is counted as let in. */
  take(): boolean {
    if (this.#limit !== Infinity) {
      if (this.#credit < 1) return false;
      this.#credit--;
    }
    this.#letIn++;
    return true;
  }

  tick({ tick, medianMs, over, votes }: LagReading): void {
    const letIn = this.#letIn;
    this.#letIn = 0;
    this.#meanLetIn += (letIn - this.#meanLetIn) * MEAN_WEIGHT;
    const climb = (medianMs - Math.min(...this.#medians)) / (SLOPE_TICKS * this.#tickMs);
    this.#medians[tick % SLOPE_TICKS] = medianMs;
    const entered = over && !this.#wasOver;
    this.#wasOver = over;
    if (over || medianMs > this.#boundMs / 2) {
      this.#unmet = 0;
      this.#lastBehind = tick;
      if (entered) this.#cut(2, tick, medianMs);
      else if (!over && climb > CLIMBING && tick >= this.#calmUntil) this.#cut(1 + climb, tick, medianMs);
    } else if (this.#limit !== Infinity) {
      this.#unmet = letIn < this.#limit / 2 ? this.#unmet + 1 : 0;
      const fast = votes > 0 && medianMs <= this.#boundMs / 4 && tick - this.#lastBehind > SETTLE_TICKS;
      this.#limit = this.#unmet > UNMET_TICKS ? Infinity : this.#limit * (fast ? FAST_GROWTH : GROWTH);
    }
    this.#credit = Math.min(this.#credit + this.#limit, Math.max(1, 2 * this.#limit));
  }

  #cut(by: number, tick: number, medianMs: number): void {
    const limit = this.#limit === Infinity ? Math.max(this.#meanLetIn, 1) : this.#limit;
    this.#limit = limit / by;
    this.#calmUntil = tick + Math.ceil(medianMs / this.#tickMs);
  }
}
