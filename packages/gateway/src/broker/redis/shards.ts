/**
 * A shard of a Redis Cluster that comes back empty (its master and its replicas lost, the master started again without
 * its data) takes this node's routes on it along, and nothing else says so: the heartbeat's key may be on another
 * shard. So each master holds a marker naming the incarnation of its data, `gw:shard:{<tag>}` (a tag whose slot the
 * master serves), written by the first node that finds it missing. A node that reads another incarnation than the one
 * it saw last on a master writes all its state again (lease.ts); a failover keeps the marker (replicated), a shard
 * lost loses it. Until a heartbeat interval after that write-back, this node refuses the emits that would look routes
 * up on that master (by then every node has had a heartbeat that read its marker).
 */
import { randomUUID } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import type { Keyspace } from './keys.ts';

/** What the lease asks of a Redis Cluster's shards at each heartbeat. */
export interface ShardChecks {
  /** The masters whose data is another incarnation than at this node's last check. Never rejects. */
  changed(): Promise<readonly string[]>;
  /** Emits touching these masters are refused until `until` (ms): their routes may not all be written back. */
  settle(masters: readonly string[], until: number): void;
}

export class ShardMarkers implements ShardChecks {
  readonly #cluster: Cluster;
  readonly #keys: Keyspace;
  /** The incarnation last read, by marker key. */
  readonly #seen = new Map<string, string>();
  /** Masters found emptied, and until when emits touching them are refused. */
  readonly #settling = new Map<string, number>();

  constructor(cluster: Cluster, keys: Keyspace) {
    this.#cluster = cluster;
    this.#keys = keys;
  }

  /**
   * A master never checked before counts as unchanged (this node's state was written since it started). A master that
   * does not answer (its shard failing over, or lost) is checked again next time, against what was seen before it went.
   */
  async changed(): Promise<readonly string[]> {
    const reads = [...this.#markers()].map(async ([key, master]) => {
      const fresh = randomUUID();
      // One command: the marker as it was, or, missing, written now (SET NX GET answers null then).
      const held = (await this.#cluster.set(key, fresh, 'NX', 'GET')) ?? fresh;
      const before = this.#seen.get(key);
      this.#seen.set(key, held);
      return before !== undefined && before !== held ? [master] : [];
    });
    return (await Promise.all(reads.map((read) => read.catch(() => [])))).flat();
  }

  settle(masters: readonly string[], until: number): void {
    for (const master of masters) this.#settling.set(master, until);
  }

  /** Whether one of `keys` is on a master found emptied whose routes may not all be written back yet. */
  settling(keys: Iterable<string>): boolean {
    if (this.#settling.size === 0) return false;
    const now = Date.now();
    for (const [master, until] of this.#settling) if (until <= now) this.#settling.delete(master);
    for (const key of keys) if (this.#settling.has(this.#masterOf(key))) return true;
    return false;
  }

  #masterOf(key: string): string {
    return this.#cluster.slots[calculateSlot(key)]?.[0] ?? '';
  }

  /** A marker key per master now serving slots (marker key -> master), each on a slot of its own master. */
  #markers(): Map<string, string> {
    const unmarked = new Set(this.#cluster.slots.map((nodes) => nodes[0]).filter((master) => master !== undefined));
    const markers = new Map<string, string>();
    for (let tag = 0; unmarked.size > 0 && tag < 16 * this.#cluster.slots.length; tag++) {
      const key = this.#keys.shardMarker(String(tag));
      const master = this.#masterOf(key);
      if (unmarked.delete(master)) markers.set(key, master);
    }
    return markers;
  }
}
