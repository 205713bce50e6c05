/**
 * The waits before reconnect attempts.
 *
 * After a drop, full jitter between the bounds: clients dropped together (a node shutting down closes every
 * socket) come back spread over the whole window instead of in one burst.
 *
 * After an attempt that failed (refused: the node is restarting, or its admission queue is full), the herd is
 * already spread, and the node may be back in a moment: waiting the whole window again kept a restarted node's
 * clients away for up to twice the window. A failed attempt waits a random time up to minDelayMs, doubling
 * with each further failure up to maxDelayMs (exponential backoff with full jitter), so a short outage costs a
 * client a few cheap tries and a long one settles at the drop's pace. (Up to half of minDelayMs first sent a
 * restarted node's refused clients back in one burst: 5,046 answered 503 by its admission queue, against 452.)
 */
export function reconnectDelay(minMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.round(minMs + random() * (maxMs - minMs));
}

/** Below this, even `minMs` 0 would retry a refused node in a tight loop. */
const FLOOR_MS = 100;

/** The wait after the `failures`-th failed attempt in a row (1 for the first). */
export function retryDelay(failures: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(Math.max(maxMs, FLOOR_MS), Math.max(minMs, FLOOR_MS) * 2 ** Math.max(0, failures - 1));
  return Math.round(random() * ceiling);
}
