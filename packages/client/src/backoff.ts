/**
 * The wait before a reconnect attempt: full jitter, uniform between the bounds. Clients dropped together
 * (a node shutting down closes every socket at once) then come back spread over the whole window instead
 * of in one burst.
 */
export function reconnectDelay(minMs: number, maxMs: number, random: () => number = Math.random): number {
  return Math.round(minMs + random() * (maxMs - minMs));
}
