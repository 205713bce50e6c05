/**
 * Per emit, told apart by its `sentAt`: how many listeners it reached and when the last of them read it. A
 * paced broadcast's figure is each broadcast's last one told (as the published methodology reports it), which
 * one latency distribution over all deliveries cannot give: its maximum is only the slowest broadcast's.
 * Workers tally their own listeners; the parent adds the tallies up by `sentAt`.
 */
import { Histogram, type LatencySummary } from './histogram.ts';

/** [sentAt (ms), listeners told, the latest of them (ms after sentAt)] per emit. */
export type EmitTallyData = Array<[sentAt: number, told: number, lastMs: number]>;

/** Emits a pool tallies at most: a paced broadcast makes a few a second; past this, emits go untallied. */
export const MAX_TALLIED_EMITS = 1_000;

export interface PerEmitFigures {
  /** Emits tallied (at most MAX_TALLIED_EMITS per pool, unless the pool set its own limit). */
  emits: number;
  /** The distribution of each emit's last one told. */
  lastTold: LatencySummary;
  /** Each emit in the order sent: listeners told, and when the last of them read it (ms after sentAt). */
  each: Array<{ told: number; lastMs: number }>;
}

export class EmitTallies {
  readonly #bySentAt = new Map<number, [told: number, lastMs: number]>();
  readonly #limit: number;

  /** `limit`: emits tallied at most (`wsload channels` tallies every emit of its window). */
  constructor(limit = MAX_TALLIED_EMITS) {
    this.#limit = limit;
  }

  record(sentAt: number, latencyMs: number): void {
    this.#count(sentAt, 1, latencyMs);
  }

  toData(): EmitTallyData {
    return [...this.#bySentAt].map(([sentAt, [told, lastMs]]) => [sentAt, told, lastMs]);
  }

  /** Add another pool's tallies (a worker's `toData`). */
  add(data: EmitTallyData): void {
    for (const [sentAt, told, lastMs] of data) this.#count(sentAt, told, lastMs);
  }

  /** Each emit's last one told, in the order they were sent, and their distribution. */
  summary(): PerEmitFigures {
    const each = [...this.#bySentAt]
      .sort(([a], [b]) => a - b)
      .map(([, [told, lastMs]]) => ({ told, lastMs: Math.round(lastMs * 1000) / 1000 }));
    const lastTold = new Histogram();
    for (const { lastMs } of each) lastTold.record(lastMs);
    return { emits: each.length, lastTold: lastTold.summary(), each };
  }

  static from(data: EmitTallyData): EmitTallies {
    const tallies = new EmitTallies();
    tallies.add(data);
    return tallies;
  }

  #count(sentAt: number, told: number, lastMs: number): void {
    const tally = this.#bySentAt.get(sentAt);
    if (tally) {
      tally[0] += told;
      if (lastMs > tally[1]) tally[1] = lastMs;
    } else if (this.#bySentAt.size < this.#limit) {
      this.#bySentAt.set(sentAt, [told, lastMs]);
    }
  }
}
