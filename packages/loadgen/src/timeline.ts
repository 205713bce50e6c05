/**
 * How many clients were connected and registered over time, kept as counts per 100 ms of the epoch clock of
 * clients that got ready (joined, or back) and that were dropped: worker processes send theirs to the parent,
 * which adds them up bucket by bucket, and the sum turns into one series for a chart ("clients back over time").
 */

export const BUCKET_MS = 100;

/** Sparse [bucket, ready, dropped] triples, bucket = ⌊epoch ms / BUCKET_MS⌋, in bucket order. */
export type TimelineData = Array<[number, number, number]>;

export class Timeline {
  readonly #buckets = new Map<number, [number, number]>();

  /** At `atMs` (clockMs: epoch ms, comparable across processes), `ready` clients got ready and `dropped` were dropped. */
  record(atMs: number, ready: number, dropped: number): void {
    this.#add(Math.floor(atMs / BUCKET_MS), ready, dropped);
  }

  add(data: TimelineData): void {
    for (const [bucket, ready, dropped] of data) this.#add(bucket, ready, dropped);
  }

  #add(bucket: number, ready: number, dropped: number): void {
    const counts = this.#buckets.get(bucket);
    if (counts) {
      counts[0] += ready;
      counts[1] += dropped;
    } else {
      this.#buckets.set(bucket, [ready, dropped]);
    }
  }

  toData(): TimelineData {
    return [...this.#buckets].map(([bucket, [ready, dropped]]): [number, number, number] => [bucket, ready, dropped]).sort((a, b) => a[0] - b[0]);
  }
}

/**
 * [seconds since `fromMs`, clients] at the end of every bucket from the one holding `fromMs` (the first drop)
 * to the last change, after a first point [0, clients just before the drop]. That first point counts the
 * clients that got ready in the drop's own bucket as ready before it; seconds are bucket ends, within 0.1 s.
 */
export function seriesFrom(data: TimelineData, fromMs: number): Array<[number, number]> {
  const from = Math.floor(fromMs / BUCKET_MS);
  let level = 0;
  let next = 0;
  for (; next < data.length && data[next]![0] < from; next++) level += data[next]![1] - data[next]![2];
  const first = data[next]?.[0] === from ? data[next]![1] : 0;
  const points: Array<[number, number]> = [[0, level + first]];
  const last = data.at(-1)?.[0] ?? from;
  for (let bucket = from; bucket <= last; bucket++) {
    for (; next < data.length && data[next]![0] === bucket; next++) level += data[next]![1] - data[next]![2];
    points.push([((bucket - from + 1) * BUCKET_MS) / 1000, level]);
  }
  return points;
}
