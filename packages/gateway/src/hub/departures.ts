/**
 * Telling many of this node's clients to go, at a pace: a drain (1001) and a node cut off from Redis (4004) close
 * their connections in batches, so that the clients' reconnects reach the load balancer spread out, not at once.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Hub } from './hub.ts';
import type { Session } from './session.ts';

export interface Pace {
  /** Connections closed per batch. */
  batchSize: number;
  /** Between the starts of two batches. */
  batchIntervalMs: number;
  /** Each batch starts at a random moment within its interval rather than at its start. */
  jitter: boolean;
}

/**
 * Close `sessions` with `code` and `reason`, a batch at a time, while `going()` holds; answers how many it closed (a
 * session that closed meanwhile is not counted). Each batch is due at its place from the start: the closes of a batch,
 * and a timer late on a busy machine, would otherwise stretch every pause after it.
 */
export async function closePaced(
  hub: Hub, sessions: readonly Session[], pace: Pace, code: number, reason: string, going: () => boolean = () => true,
): Promise<number> {
  const { batchSize, batchIntervalMs, jitter } = pace;
  const start = performance.now();
  let closed = 0;
  for (let from = 0, batch = 0; from < sessions.length; from += batchSize, batch++) {
    const wait = start + (batch + (jitter ? Math.random() : 0)) * batchIntervalMs - performance.now();
    if (wait > 0) await delay(wait);
    if (!going()) break;
    for (const session of sessions.slice(from, from + batchSize)) {
      if (session.closed) continue;
      hub.close(session);
      session.end(code, reason);
      closed++;
    }
  }
  return closed;
}
