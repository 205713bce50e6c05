import { CloseCode } from '@herald/protocol';

/**
 * The wait before a reconnect attempt: full jitter, uniform between the bounds. Clients dropped together
 * (a node shutting down closes every socket at once) then come back spread over the whole window instead
 * of in one burst.
 */
export function reconnectDelay(minMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.round(minMs + random() * (maxMs - minMs));
}

/**
 * The wait before reconnect attempt `attempt` (1: the first after an open connection closed) that follows a
 * close with `code`. A draining node (1001) and a node cut off from Redis (4004) spread their closes themselves, in
 * batches (the gateway's drain settings), so the first attempt after one waits only up to `minMs`: spreading those
 * clients again over the whole window would keep each of them away seconds longer for nothing. Any other loss (a node
 * killed drops all its clients at once: 1006) and every later attempt wait the full jitter between the bounds.
 */
export function reconnectDelayAfter(code: number, attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const paced = code === CloseCode.GOING_AWAY || code === CloseCode.NODE_CUT_OFF;
  return paced && attempt === 1 ? reconnectDelay(0, minMs, random) : reconnectDelay(minMs, maxMs, random);
}
