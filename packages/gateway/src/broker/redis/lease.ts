/**
 * Node leases: each node writes a heartbeat; a node whose heartbeat is older than the lease is dead, and
 * one survivor (holding a lock) sweeps its routes. A node whose heartbeat lapsed but whose connection Redis still
 * holds is starved or stuck rather than dead: it is swept only once its heartbeat is older than the connected lease.
 * Sweeping a live node costs its clients every notification until it writes its routes again; leaving a dead
 * node's routes costs only publishes that nobody reads. A heartbeat that finds this node's entry gone (Redis
 * restarted empty, FLUSHALL, or this node was swept while it stalled), or a shard of a Redis Cluster emptied
 * (shards.ts), makes the node write its state again.
 */
import type { BrokerObserver } from '../broker.ts';
import type { Connection } from './connection.ts';
import type { Keyspace } from './keys.ts';
import type { RouteRegistry } from './routes.ts';
import type { ShardChecks } from './shards.ts';
import type { ShapeIndex } from './shapes.ts';

export interface LeaseOptions {
  connection: Connection;
  keys: Keyspace;
  nodeId: string;
  leaseMs: number;
  /** The lease of a node Redis still sees connected (≥ leaseMs). */
  connectedLeaseMs: number;
  sweepIntervalMs: number;
  observer: BrokerObserver;
  shapes: ShapeIndex;
  routes: RouteRegistry;
  /** Write this node's routes again; answers how many. */
  resync: () => Promise<number>;
  /** A Redis Cluster's shards' markers (shards.ts), read at every heartbeat. */
  shards?: ShardChecks | undefined;
}

export class Lease {
  readonly #options: LeaseOptions;
  readonly #timers: NodeJS.Timeout[] = [];
  #stale = true;
  #beating: Promise<void> | undefined;
  #again: Promise<void> | undefined;
  /** When this node's last heartbeat was written: how late its own timers run. */
  #beatAt = 0;

  constructor(options: LeaseOptions) {
    this.#options = options;
  }

  /** Whether this node's state in Redis may be incomplete (until the next successful heartbeat). */
  get stale(): boolean {
    return this.#stale;
  }

  /**
   * Whether this node's last heartbeat is older than its lease: other nodes may take it for dead and sweep its routes.
   * A heartbeat that fails (the shard of `gw:{nodes}` failing over) costs nothing more while the lease holds: the node's
   * routes are where they were, and a heartbeat that finds its entry gone writes them again.
   */
  get lapsed(): boolean {
    return Date.now() - this.#beatAt > this.#options.leaseMs;
  }

  markStale(): void {
    this.#stale = true;
  }

  async start(): Promise<void> {
    const { sweepIntervalMs, connection } = this.#options;
    await this.heartbeat();
    this.#every(this.#heartbeatMs(), () => this.heartbeat());
    this.#every(sweepIntervalMs, () => this.sweep());
    // Redis came back, or one shard of a Cluster did (maybe empty): check at once rather than at the next heartbeat.
    connection.onReady(() => void this.heartbeat());
  }

  stop(): void {
    for (const timer of this.#timers.splice(0)) clearInterval(timer);
  }

  /**
   * One heartbeat at a time; a failed one is retried at the next tick. One asked for while another runs runs after it
   * (Redis came back meanwhile: what the running one read may be from before).
   */
  heartbeat(): Promise<void> {
    if (this.#beating !== undefined) {
      this.#again ??= this.#beating.then(() => {
        this.#again = undefined;
        return this.heartbeat();
      });
      return this.#again;
    }
    this.#beating = this.#beat()
      .catch((error: unknown) => this.#options.observer.writeFailed(error as Error))
      .finally(() => {
        this.#beating = undefined;
      });
    return this.#beating;
  }

  async #beat(): Promise<void> {
    const { connection, keys, nodeId, shapes, observer } = this.#options;
    const redis = connection.commands;
    // XX CH answers 0 when our entry is gone: Redis lost it, or a sweeper removed us.
    const present = (await redis.zadd(keys.nodes, 'XX', 'CH', Date.now(), nodeId)) === 1;
    // Read at every heartbeat, a resync's included: what the node's state was written to is what the next compares with.
    const { shards } = this.#options;
    const emptied = (await shards?.changed()) ?? [];
    if (present && !this.#stale && emptied.length === 0) {
      this.#beatAt = Date.now();
      await shapes.publishAll(nodeId);
      return;
    }
    // A shard back empty alone leaves this node's state elsewhere whole: it stays ready while it writes it back, unless
    // that fails (then it is stale, and the next heartbeat tries again).
    if (!present) this.#stale = true;
    shards?.settle(emptied, Infinity);
    await redis.zadd(keys.nodes, Date.now(), nodeId);
    const routes = await this.#options.resync().catch((error: unknown) => {
      this.#stale = true;
      throw error;
    });
    shards?.settle(emptied, Date.now() + this.#heartbeatMs());
    this.#stale = false;
    this.#beatAt = Date.now();
    observer.resynced(routes);
  }

  /**
   * Find nodes whose lease expired and sweep each one that no other survivor is sweeping. Not while this node's own
   * heartbeat is older than two of its intervals: on a starved machine every node's timers run late, and live nodes'
   * leases lapse together; sweeping them would strip the routes of nodes that are only slow. A sweeper that is on
   * time can still see a starved node lapse: that one is spared while Redis holds its connection.
   */
  async sweep(): Promise<void> {
    const { connection, keys, nodeId, leaseMs, observer } = this.#options;
    if (this.#late()) {
      observer.sweepDeferred();
      return;
    }
    const redis = connection.commands;
    try {
      const lapsed = await redis.zrangebyscore(keys.nodes, '-inf', Date.now() - leaseMs);
      // CLIENT LIST costs Redis a line per client: read once a round, and only by a sweeper that holds a lock.
      let connected: Promise<Set<string> | undefined> | undefined;
      for (const id of lapsed) {
        if (id === nodeId || (await redis.set(keys.sweepLock(id), nodeId, 'PX', leaseMs, 'NX')) !== 'OK') continue;
        connected ??= connection.clientNames().catch(() => undefined);
        await this.#sweepIfDead(id, await connected);
      }
    } catch (error) {
      observer.writeFailed(error as Error);
    }
  }

  /**
   * Sweep a lapsed node whose lock this node holds: judged on its heartbeat read now, since this round's earlier
   * reads may be old by the time a starved sweeper gets here, and not while this sweeper is late itself. Spared, it keeps the lock: no other sweeper asks again
   * until it expires. Unknown connections (Redis refused CLIENT LIST) count as connected: swept after the connected
   * lease, late but never while alive.
   */
  async #sweepIfDead(id: string, connected: Set<string> | undefined): Promise<void> {
    const { connection, keys, leaseMs, connectedLeaseMs, observer, routes } = this.#options;
    const seen = await connection.commands.zscore(keys.nodes, id);
    const silentMs = seen === null ? Infinity : Date.now() - Number(seen);
    if (silentMs <= leaseMs) return; // it beat again meanwhile
    if (this.#late()) return observer.sweepDeferred();
    if (silentMs <= connectedLeaseMs && (connected === undefined || connected.has(keys.clientName(id)))) return observer.spared(id);
    observer.swept(id, await this.remove(id, await routes.bucketsOf(id)));
  }

  /**
   * Remove a node's routes from these buckets, its shapes, its bitmap, its status record and its lease entry; answers how many
   * routes it held in Redis. `routeKeys`: routes it is known to hold besides (this node's own, as it leaves),
   * so that their shapes are withdrawn even if Redis had lost the routes.
   */
  async remove(nodeId: string, buckets: Iterable<number>, routeKeys: readonly string[] = []): Promise<number> {
    const { connection, keys, shapes, routes } = this.#options;
    const redis = connection.commands;
    const stripped = await routes.strip(nodeId, buckets);
    await shapes.withdrawAll(nodeId, [...stripped, ...routeKeys]);
    await redis.del(keys.nodeBuckets(nodeId));
    await redis.hdel(keys.status, nodeId);
    await redis.zrem(keys.nodes, nodeId);
    return stripped.length;
  }

  /** Whether this node's own heartbeat is older than two of its intervals: its timers, and its reads, run late. */
  #late(): boolean {
    return Date.now() - this.#beatAt > 2 * this.#heartbeatMs();
  }

  #heartbeatMs(): number {
    return Math.max(100, Math.floor(this.#options.leaseMs / 3));
  }

  #every(ms: number, tick: () => Promise<void>): void {
    const timer = setInterval(() => void tick(), ms);
    timer.unref();
    this.#timers.push(timer);
  }
}
