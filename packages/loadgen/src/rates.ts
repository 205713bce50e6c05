/**
 * Per-second samples of a growing count (clients, notifications, emits), summarised the way autocannon
 * summarises its Req/Sec: low percentiles, because a throughput's bad seconds are its low ones.
 */

export interface RateSummary {
  samples: number;
  min: number;
  p1: number;
  p2_5: number;
  p50: number;
  p97_5: number;
  mean: number;
  stddev: number;
  max: number;
}

const MIN_SAMPLE_S = 0.5;

export class RateSamples {
  readonly values: number[] = [];
  #lastCount = 0;
  #lastAt = 0;

  /** Start counting from `count` at `atMs` (performance.now()). */
  begin(count: number, atMs: number): void {
    this.#lastCount = count;
    this.#lastAt = atMs;
  }

  /** The rate since the previous sample; a late tick still gives a per-second figure. */
  sample(count: number, atMs: number): number {
    const seconds = (atMs - this.#lastAt) / 1000;
    // A tick just after `begin` would be a sample of a few milliseconds: mostly noise. Wait for the next.
    if (seconds < MIN_SAMPLE_S) return this.values.at(-1) ?? 0;
    const rate = (count - this.#lastCount) / seconds;
    this.values.push(rate);
    this.begin(count, atMs);
    return rate;
  }

  summary(): RateSummary {
    const sorted = [...this.values].sort((a, b) => a - b);
    const n = sorted.length;
    const at = (percent: number) => (n === 0 ? 0 : sorted[Math.min(n - 1, Math.max(0, Math.ceil((percent / 100) * n) - 1))]!);
    const mean = n === 0 ? 0 : sorted.reduce((sum, value) => sum + value, 0) / n;
    const stddev = n === 0 ? 0 : Math.sqrt(sorted.reduce((sum, value) => sum + (value - mean) ** 2, 0) / n);
    const round = (value: number) => Math.round(value * 10) / 10;
    return {
      samples: n,
      min: round(sorted[0] ?? 0),
      p1: round(at(1)),
      p2_5: round(at(2.5)),
      p50: round(at(50)),
      p97_5: round(at(97.5)),
      mean: round(mean),
      stddev: round(stddev),
      max: round(sorted[n - 1] ?? 0),
    };
  }
}
