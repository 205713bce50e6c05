/**
 * How many clients were connected and registered over time, kept as counts per 100 ms of the epoch clock of
 * clients that joined, came back and were dropped: worker processes send theirs to the parent, which adds them
 * up bucket by bucket, and the sum turns into one series for a chart ("clients back over time").
 */

export const BUCKET_MS = 100;

/** Sparse [bucket, joined, back, dropped] rows, bucket = ⌊epoch ms / BUCKET_MS⌋, in bucket order. */
export type TimelineData = Array<[number, number, number, number]>;

export type Change = 'joined' | 'back' | 'dropped';
const COLUMN: Record<Change, 0 | 1 | 2> = { joined: 0, back: 1, dropped: 2 };

export class Timeline {
  readonly #buckets = new Map<number, [number, number, number]>();

  /** At `atMs` (clockMs: epoch ms, comparable across processes), one client `change`d. */
  record(atMs: number, change: Change): void {
    this.#counts(Math.floor(atMs / BUCKET_MS))[COLUMN[change]]++;
  }

  add(data: TimelineData): void {
    for (const [bucket, joined, back, dropped] of data) {
      const counts = this.#counts(bucket);
      counts[0] += joined;
      counts[1] += back;
      counts[2] += dropped;
    }
  }

  #counts(bucket: number): [number, number, number] {
    let counts = this.#buckets.get(bucket);
    if (!counts) this.#buckets.set(bucket, (counts = [0, 0, 0]));
    return counts;
  }

  toData(): TimelineData {
    return [...this.#buckets].map(([bucket, counts]): [number, number, number, number] => [bucket, ...counts]).sort((a, b) => a[0] - b[0]);
  }
}

const net = ([, joined, back, dropped]: TimelineData[number]): number => joined + back - dropped;

/**
 * [seconds since `fromMs`, clients] at the end of every bucket from the one holding `fromMs` (the first drop)
 * to the last change, after a first point [0, clients just before the drop]. That first point counts the
 * clients that joined in the drop's own bucket as ready before it (a return there came after a drop, so it
 * does not); seconds are bucket ends, within 0.1 s.
 */
export function seriesFrom(data: TimelineData, fromMs: number): Array<[number, number]> {
  const from = Math.floor(fromMs / BUCKET_MS);
  let level = 0;
  let next = 0;
  for (; next < data.length && data[next]![0] < from; next++) level += net(data[next]!);
  const joinedWithTheDrop = data[next]?.[0] === from ? data[next]![1] : 0;
  const points: Array<[number, number]> = [[0, level + joinedWithTheDrop]];
  const last = data.at(-1)?.[0] ?? from;
  for (let bucket = from; bucket <= last; bucket++) {
    for (; next < data.length && data[next]![0] === bucket; next++) level += net(data[next]!);
    points.push([((bucket - from + 1) * BUCKET_MS) / 1000, level]);
  }
  return points;
}
