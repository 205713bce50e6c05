/**
 * A shard of a Redis Cluster that comes back empty (its master and its replicas lost, the master started again without
 * its data) takes this node's routes on it along, and nothing else says so: the heartbeat's key may be on another
 * shard. So each master holds a marker naming the incarnation of its data, `gw:shard:{<tag>}` (a tag whose slot the
 * master serves), written by the first node that finds it missing. A node that reads another incarnation than the one
 * it saw last on a master writes all its state again (lease.ts); a failover keeps the marker (replicated), a shard
 * lost loses it.
 */
import { randomUUID } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import type { Keyspace } from './keys.ts';

export class ShardMarkers {
  readonly #cluster: Cluster;
  readonly #keys: Keyspace;
  /** The incarnation last read, by marker key. */
  readonly #seen = new Map<string, string>();

  constructor(cluster: Cluster, keys: Keyspace) {
    this.#cluster = cluster;
    this.#keys = keys;
  }

  /**
   * Whether some master's data is another incarnation than at this node's last check (a master never checked before
   * counts as unchanged: this node's state was written since it started). Never rejects: a master that does not
   * answer (its shard failing over, or lost) is checked again next time, against what was seen before it went.
   */
  async changed(): Promise<boolean> {
    const reads = this.#markers().map(async (key) => {
      const fresh = randomUUID();
      // One command: the marker as it was, or, missing, written now (SET NX GET answers null then).
      const held = (await this.#cluster.set(key, fresh, 'NX', 'GET')) ?? fresh;
      const before = this.#seen.get(key);
      this.#seen.set(key, held);
      return before !== undefined && before !== held;
    });
    return (await Promise.all(reads.map((read) => read.catch(() => false)))).includes(true);
  }

  /** A marker key per master now serving slots, each on a slot of its own master. */
  #markers(): string[] {
    const slots = this.#cluster.slots;
    const unmarked = new Set(slots.map((nodes) => nodes[0]).filter((master) => master !== undefined));
    const markers: string[] = [];
    for (let tag = 0; unmarked.size > 0 && tag < 16 * slots.length; tag++) {
      const key = this.#keys.shardMarker(String(tag));
      if (unmarked.delete(slots[calculateSlot(key)]?.[0] ?? '')) markers.push(key);
    }
    return markers;
  }
}
