/** What the Redis broker's parts send their commands through, and how Redis's silence is judged (probe.ts). */
import type { Cluster, Redis } from 'ioredis';

/** One redis-server's client, or a Redis Cluster's. */
export type Commands = Redis | Cluster;

export interface Liveness {
  /** Redis is lost when a PING, a connection attempt or its handshake has had no answer for this long. */
  lostAfterMs: number;
}
