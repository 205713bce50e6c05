/**
 * A latency histogram in microseconds, log-linear like HdrHistogram: exact below 256 µs, then 128 buckets per
 * power of two (under 0.8 % error), so recording costs no allocation and workers can add theirs together.
 */

const LINEAR = 256;
const SUB_BUCKETS = 128;
const SUB_BITS = 7;
// Values are clamped below 2^32 µs (71 minutes): Math.clz32 works on 32 bits.
const MAX_MICROS = 2 ** 32 - 1;
const BUCKETS = LINEAR + (32 - SUB_BITS - 1) * SUB_BUCKETS;

/** What a histogram says about itself, in milliseconds; the shape of every latency figure in the JSON. */
export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  stddev: number;
  p50: number;
  p90: number;
  /** The percentile AnyCable's k6 benchmarks report beside p90 (docs/benchmarks/fleet.md). */
  p95: number;
  p99: number;
  p99_9: number;
  max: number;
}

/** A histogram as plain data, for IPC between worker processes: sparse [bucket, count] pairs. */
export interface HistogramData {
  buckets: Array<[number, number]>;
  count: number;
  sum: number;
  sumSquares: number;
  min: number;
  max: number;
}

function bucketOf(micros: number): number {
  if (micros < LINEAR) return micros;
  const shift = 31 - Math.clz32(micros) - SUB_BITS;
  return LINEAR + (shift - 1) * SUB_BUCKETS + ((micros >>> shift) - SUB_BUCKETS);
}

/** The middle of a bucket, in µs. */
function valueOf(bucket: number): number {
  if (bucket < LINEAR) return bucket;
  const shift = Math.floor((bucket - LINEAR) / SUB_BUCKETS) + 1;
  const mantissa = ((bucket - LINEAR) % SUB_BUCKETS) + SUB_BUCKETS;
  return mantissa * 2 ** shift + 2 ** (shift - 1);
}

export class Histogram {
  readonly #counts = new Float64Array(BUCKETS);
  #count = 0;
  #sum = 0;
  #sumSquares = 0;
  #min = Infinity;
  #max = 0;

  /** Record one value in milliseconds (negative values, from clocks of two processes, count as 0). */
  record(ms: number): void {
    const micros = Math.min(MAX_MICROS, Math.max(0, Math.round(ms * 1000)));
    this.#counts[bucketOf(micros)]! += 1;
    this.#count += 1;
    this.#sum += micros;
    this.#sumSquares += micros * micros;
    if (micros < this.#min) this.#min = micros;
    if (micros > this.#max) this.#max = micros;
  }

  get count(): number {
    return this.#count;
  }

  /** How many recorded values are at most `ms` (to the bucket that holds `ms`: under 0.8 % over). */
  countAtMost(ms: number): number {
    const last = bucketOf(Math.min(MAX_MICROS, Math.max(0, Math.round(ms * 1000))));
    let seen = 0;
    for (let bucket = 0; bucket <= last; bucket++) seen += this.#counts[bucket]!;
    return seen;
  }

  /** The value (ms) at or below which `percent` of the recorded values lie. */
  percentile(percent: number): number {
    if (this.#count === 0) return 0;
    const rank = Math.max(1, Math.ceil((percent / 100) * this.#count));
    let seen = 0;
    for (let bucket = 0; bucket < BUCKETS; bucket++) {
      seen += this.#counts[bucket]!;
      if (seen >= rank) return Math.min(this.#max, Math.max(this.#min, valueOf(bucket))) / 1000;
    }
    return this.#max / 1000;
  }

  summary(): LatencySummary {
    const n = this.#count;
    const mean = n === 0 ? 0 : this.#sum / n;
    const variance = n === 0 ? 0 : Math.max(0, this.#sumSquares / n - mean * mean);
    const round = (micros: number) => Math.round(micros) / 1000;
    return {
      count: n,
      min: n === 0 ? 0 : round(this.#min),
      mean: round(mean),
      stddev: round(Math.sqrt(variance)),
      p50: this.percentile(50),
      p90: this.percentile(90),
      p95: this.percentile(95),
      p99: this.percentile(99),
      p99_9: this.percentile(99.9),
      max: round(this.#max),
    };
  }

  toData(): HistogramData {
    const buckets: Array<[number, number]> = [];
    this.#counts.forEach((count, bucket) => {
      if (count > 0) buckets.push([bucket, count]);
    });
    return { buckets, count: this.#count, sum: this.#sum, sumSquares: this.#sumSquares, min: this.#min, max: this.#max };
  }

  /** Add another histogram's values (from this process or a worker's `toData`). */
  add(other: Histogram | HistogramData): void {
    const data = other instanceof Histogram ? other.toData() : other;
    for (const [bucket, count] of data.buckets) this.#counts[bucket]! += count;
    this.#count += data.count;
    this.#sum += data.sum;
    this.#sumSquares += data.sumSquares;
    // IPC turns Infinity into null: an empty worker histogram has no minimum.
    if (data.count > 0) this.#min = Math.min(this.#min, data.min);
    this.#max = Math.max(this.#max, data.max);
  }

  static from(data: HistogramData): Histogram {
    const histogram = new Histogram();
    histogram.add(data);
    return histogram;
  }
}
