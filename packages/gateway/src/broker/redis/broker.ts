/**
 * The Redis Broker: a registry of which node holds which route, and a sharded channel per node.
 *
 * A node writes when a route first appears on it or last leaves it; an emit reads the event's shapes, looks
 * up the nodes holding the matching routes, and publishes once per such node (to itself: no round trip).
 * The lease (lease.ts) finds dead nodes and sweeps them, and tells this node when it must write its state again.
 */
import { Cluster } from 'ioredis';
import { isRecord } from '@herald/protocol';
import { defaultLostAfterMs, type HistoryConfig } from '../../config/schema.ts';
import { GatewayError } from '../../errors.ts';
import { routeKeyOf, shapeKeyOf, valuesKeyIn, type Route } from '../../events/routing.ts';
import { DeliveryPending, type Broker, type BrokerObserver, type CanaryHandler, type Claimed, type ControlHandler, type DeliveryHandler, type Histories, type HistoryRange, type HistoryRead, type Once, type Revocation } from '../broker.ts';
import { connect, type Connection, type RedisTarget } from './connection.ts';
import { ControlChannel } from './control.ts';
import { HistoryEmits } from './history-emits.ts';
import { Marker, markedFrame, markedText, markerOf } from './markers.ts';
import { RedisHistories } from './history.ts';
import { keyspace, type Keyspace } from './keys.ts';
import { Lease } from './lease.ts';
import { RedisOnce } from './once.ts';
import { RouteRegistry } from './routes.ts';
import { sentTo } from './sends.ts';
import { ShardMarkers } from './shards.ts';
import { putStatus, statusOf } from './status.ts';
import { NO_SHAPES, sameShapes, ShapeIndex, shapeOf, type Shape } from './shapes.ts';
import { WriteQueue, type Write } from './write-queue.ts';

/**
 * How long a route whose last subscriber left waits before its removal is written. Removals have no one waiting for
 * them, so those of this window leave together: at one route per client, a churn's removals were otherwise one
 * command per turn of the event loop, several times the cost of one in a batch (docs/architecture.md, "Measured
 * costs"). A route that comes back within the window costs no write at all. Meanwhile an emit for it may reach this
 * node for nothing.
 */
const REMOVAL_DELAY_MS = 10;

const NO_HISTORIES: Histories = new Map();

export interface RedisBrokerOptions {
  target: RedisTarget;
  nodeId: string;
  leaseMs: number;
  /** How long a node whose connection Redis still holds may go without a heartbeat before it is swept (≥ leaseMs). */
  connectedLeaseMs: number;
  sweepIntervalMs: number;
  /** Redis is lost when it has not answered for this long, even with its connection open (probe.ts). Default: config's. */
  lostAfterMs?: number | undefined;
  observer: BrokerObserver;
  /** Hashes the routes are spread over (config redis.routeBuckets); the same on every node of a fleet. */
  routeBuckets: number;
  keyPrefix?: string;
  /** The events that keep a history (config events.<name>.history); the same on every node of a fleet. */
  histories?: Histories;
}

export class RedisBroker implements Broker {
  readonly nodeId: string;
  readonly #connection: Connection;
  readonly #keys: Keyspace;
  readonly #observer: BrokerObserver;
  /** The keys of this node's routes. */
  readonly #routes = new Set<string>();
  readonly #shapes: ShapeIndex;
  readonly #registry: RouteRegistry;
  /** Each emitted event's shapes as its last emit read them (events are the catalogue's: a bounded map). */
  readonly #shapesSeen = new Map<string, readonly Shape[]>();
  /** Each event's read of its shapes while the batch it leaves in is unsent: the emits of one turn share it. */
  readonly #shapeReads = new Map<string, { batch: number; shapes: Promise<string[]> }>();
  readonly #histories: Histories;
  readonly #historyStore: RedisHistories;
  readonly #historyEmits: HistoryEmits;
  readonly #lease: Lease;
  /** On a Redis Cluster, its shards' markers (shards.ts). */
  readonly #shards: ShardMarkers | undefined;
  readonly #once: RedisOnce;
  /** A failed write marks the node for a resync; the caller is never failed (see Broker.addRoute). */
  readonly #writes = new WriteQueue((error) => {
    this.#lease.markStale();
    this.#observer.writeFailed(error);
  });
  /** Each route's add while it is being written, for a route that comes back before its removal was written. */
  readonly #adding = new Map<string, Promise<void>>();
  /** Routes whose removal waits for the next batch (still in #routes and held in #shapes until written). */
  readonly #leaving = new Map<string, Route>();
  /** Routes whose removal failed (Redis unreachable): Redis may still name this node for them until the resync. */
  readonly #unremoved = new Map<string, Route>();
  #removals: PromiseWithResolvers<void> | undefined;
  #removalTimer: NodeJS.Timeout | undefined;
  #onDelivery: DeliveryHandler = () => {};
  #onControl: ControlHandler = () => {};
  #onCanary: CanaryHandler = () => {};
  readonly #control: ControlChannel;
  #closed = false;

  constructor(options: RedisBrokerOptions) {
    this.nodeId = options.nodeId;
    this.#observer = options.observer;
    this.#keys = keyspace(options.keyPrefix);
    this.#connection = connect(options.target, this.#keys.clientName(this.nodeId), { lostAfterMs: options.lostAfterMs ?? defaultLostAfterMs(options.leaseMs) }, {
      leanReads: (lean, why) => options.observer.leanReads(lean, why),
      lost: (why) => {
        // Writes may have failed meanwhile, and emits gone by: once back, the state is written again and each route
        // with history catches up (the observer's resynced), whether or not a heartbeat failed in between.
        this.#lease.markStale();
        options.observer.redisLost(why);
      },
      back: () => options.observer.redisBack(),
    });
    this.#histories = options.histories ?? NO_HISTORIES;
    this.#shapes = new ShapeIndex(this.#connection.commands, this.#keys, this.#histories, options.leaseMs);
    this.#registry = new RouteRegistry(this.#connection, this.#keys, this.nodeId, options.routeBuckets);
    this.#historyStore = new RedisHistories(this.#connection.commands, this.#connection.reads, this.#keys);
    this.#once = new RedisOnce(this.#connection.commands, this.#connection.reads, this.#keys);
    this.#historyEmits = new HistoryEmits({
      connection: this.#connection,
      keys: this.#keys,
      nodeId: this.nodeId,
      store: this.#historyStore,
      registry: this.#registry,
      observer: this.#observer,
      deliver: (...delivery) => this.#onDelivery(...delivery),
    });
    const { commands } = this.#connection;
    this.#shards = commands instanceof Cluster ? new ShardMarkers(commands, this.#keys) : undefined;
    this.#lease = new Lease({
      connection: this.#connection,
      keys: this.#keys,
      nodeId: this.nodeId,
      leaseMs: options.leaseMs,
      connectedLeaseMs: options.connectedLeaseMs,
      sweepIntervalMs: options.sweepIntervalMs,
      observer: options.observer,
      shapes: this.#shapes,
      routes: this.#registry,
      resync: () => this.#resync(),
      shards: this.#shards,
    });
    const { leaseMs } = options;
    this.#control = new ControlChannel({ connection: this.#connection, keys: this.#keys, nodeId: this.nodeId, leaseMs, deliverHere: (message) => this.#onControl(message) });
  }

  /** Not while Redis is lost, this node's routes may be missing from it, or its lease has lapsed. */
  ready(): boolean {
    return !this.#closed && this.#connection.ready() && !this.#lease.stale && !this.#lease.lapsed;
  }

  /** Resolves once Redis answers and this node's state is written (after start, or after Redis came back). */
  async whenReady(): Promise<void> {
    await this.#connection.whenReady();
    await this.#lease.heartbeat();
  }

  async start(onDelivery: DeliveryHandler, onControl: ControlHandler = () => {}, onCanary: CanaryHandler = () => {}): Promise<void> {
    this.#onDelivery = onDelivery;
    this.#onControl = onControl;
    this.#onCanary = onCanary;
    await this.#connection.whenReady();
    await this.#registry.claimBucketCount();
    // A node restarted under the same id (HERALD_NODE_ID) before its lease expired holds none of its old
    // routes: clear them, or emits would keep being published for clients that are gone.
    const previous = await this.#registry.bucketsOf(this.nodeId);
    if (previous.length > 0) await this.#lease.remove(this.nodeId, previous);
    await this.#connection.subscribe(this.#keys.channel(this.nodeId), (message) => this.#receive(message));
    await this.#lease.start();
  }

  addRoute(route: Route): Promise<void> {
    // Its removal was not written yet: Redis holds the route still, or will once its add is written.
    if (this.#leaving.delete(route.key)) return this.#adding.get(route.key) ?? Promise.resolve();
    this.#routes.add(route.key);
    const firstOfShape = this.#shapes.hold(route);
    const added = this.#writes.push(() => {
      const registered = this.#registry.add(route.key);
      return firstOfShape ? Promise.all([registered, this.#shapes.publishShape(route.event, shapeKeyOf(route.fields), this.nodeId)]) : registered;
    });
    this.#adding.set(route.key, added);
    void added.then(() => {
      if (this.#adding.get(route.key) === added) this.#adding.delete(route.key);
    });
    return added;
  }

  /** Written with the other removals of REMOVAL_DELAY_MS; settles once they are. */
  removeRoute(route: Route): Promise<void> {
    if (this.#closed || !this.#routes.has(route.key)) return Promise.resolve();
    this.#leaving.set(route.key, route);
    if (!this.#removals) {
      this.#removals = Promise.withResolvers<void>();
      this.#removalTimer = setTimeout(() => this.#removeLeaving(), REMOVAL_DELAY_MS);
    }
    return this.#removals.promise;
  }

  /**
   * The event's shapes are read at every emit, but the routes of the shapes it had at its last emit are looked up
   * in the same round trip (one pipelined write, one read): only a shape that appeared since costs a second one.
   * What counts is still the shapes read now, so the answer is the one two round trips in a row would give.
   */
  async publish(event: string, eventData: Record<string, unknown>, once?: Once): Promise<number> {
    const history = this.#histories.get(event);
    // Refused before anything is sent: the routes it would be looked up in may not be written back yet.
    if (this.#shards?.settling(this.#lookedUp(event, eventData, history !== undefined))) {
      throw new GatewayError('UNAVAILABLE', "a shard of the fleet's Redis Cluster came back empty: the nodes are writing their routes back");
    }
    if (history !== undefined) return this.#publishHistory(event, eventData, history, once);
    const redis = this.#connection.commands;
    try {
      const guessed = this.#shapesSeen.get(event) ?? NO_SHAPES;
      const [shapeKeys, ...guessedNodes] = await Promise.all([
        this.#readShapes(event),
        ...guessed.map((shape) => this.#nodesOf(event, shape, eventData)),
      ]);
      const same = sameShapes(guessed, shapeKeys);
      const shapes = same ? guessed : shapeKeys.map(shapeOf);
      this.#shapesSeen.set(event, shapes);
      const nodes = new Set<string>();
      const late: Promise<string[]>[] = [];
      for (let i = 0; i < shapes.length; i++) {
        const shape = shapes[i]!;
        const at = same ? i : guessed.findIndex((each) => each.key === shape.key);
        if (at < 0) late.push(this.#nodesOf(event, shape, eventData));
        else for (const id of guessedNodes[at]!) nodes.add(id);
      }
      if (late.length > 0) for (const ids of await Promise.all(late)) for (const id of ids) nodes.add(id);
      if (nodes.size === 0) return 0;
      // Serialised only for another node: an emit for this node's own clients (one node, or the usual one
      // recipient) needs no copy of eventData.
      let message: Buffer | undefined;
      const sends: Promise<number>[] = [];
      for (const nodeId of nodes) {
        if (nodeId === this.nodeId) this.#onDelivery(event, eventData);
        else sends.push(redis.spublish(this.#keys.channel(nodeId), (message ??= Buffer.from(`${event}\n${JSON.stringify(eventData)}`))) as Promise<number>);
      }
      return sends.length === 0 ? nodes.size : await sentTo(nodes.size, sends, false);
    } catch (error) {
      throw error instanceof DeliveryPending ? error : unreachable(error);
    }
  }

  /** The keys an emit reads its routes from: its event's shapes, and the buckets of its routes in the shapes seen last. */
  *#lookedUp(event: string, eventData: Record<string, unknown>, kept: boolean): Iterable<string> {
    yield kept ? this.#keys.historyShapes(event) : this.#keys.shapes(event);
    for (const shape of kept ? this.#historyEmits.seenShapes(event) : (this.#shapesSeen.get(event) ?? NO_SHAPES)) {
      const valuesKey = valuesKeyIn(eventData, shape.fields);
      if (valuesKey !== undefined) yield this.#registry.bucketKey(routeKeyOf(event, shape.key, valuesKey));
    }
  }

  claim(once: Once, digest: string, pendingMs: number): Promise<Claimed> {
    return reachable(this.#once.claim(once, digest, pendingMs));
  }

  settle(once: Once, digest: string, answer: string | undefined): Promise<void> {
    return reachable(this.#once.settle(once, digest, answer));
  }

  #publishHistory(event: string, eventData: Record<string, unknown>, history: HistoryConfig, once: Once | undefined): Promise<number> {
    return this.#historyEmits.publish(event, eventData, history, once).catch((error: Error) => {
      this.#observer.historyAppendFailed(error);
      throw error instanceof DeliveryPending ? error : unreachable(error);
    });
  }

  async history(route: Route, range?: HistoryRange): Promise<HistoryRead> {
    const history = this.#histories.get(route.event);
    if (history === undefined) throw new Error(`${route.event} keeps no history`);
    try {
      return await this.#historyStore.read(route.key, history, range);
    } catch (error) {
      throw new GatewayError('UNAVAILABLE', `the fleet's Redis is unreachable: ${(error as Error).message}`);
    }
  }

  /**
   * One read for all the emits of a turn (unpaced, ~60 of them): they all began before their batch leaves, so the
   * one read is as recent as each of theirs would be.
   */
  #readShapes(event: string): Promise<string[]> {
    const { reads } = this.#connection;
    const shared = this.#shapeReads.get(event);
    if (shared !== undefined && shared.batch === reads.unsentBatch()) return shared.shapes;
    const shapes = reads.smembers(this.#keys.shapes(event));
    const batch = reads.unsentBatch();
    if (batch === undefined) this.#shapeReads.delete(event);
    else this.#shapeReads.set(event, { batch, shapes });
    return shapes;
  }

  /** The nodes holding the route of `eventData` in one shape; none when eventData lacks one of its fields. */
  #nodesOf(event: string, shape: Shape, eventData: Record<string, unknown>): Promise<string[]> {
    const valuesKey = valuesKeyIn(eventData, shape.fields);
    return valuesKey === undefined ? Promise.resolve([]) : this.#registry.nodesOf(routeKeyOf(event, shape.key, valuesKey));
  }

  broadcast(message: string): Promise<readonly string[]> {
    return reachable(this.#control.broadcast(message));
  }

  sendTo(nodeId: string, message: string): Promise<void> {
    return reachable(this.#control.sendTo(nodeId, message));
  }

  revoke(subject: string, revokedAt: number, keepMs: number): Promise<void> {
    return reachable(this.#control.revoke(subject, revokedAt, keepMs));
  }

  revocations(since: number): Promise<Revocation[]> {
    return reachable(this.#control.revocations(since));
  }

  liveNodes(): Promise<readonly string[]> {
    return reachable(this.#control.liveNodes());
  }

  sendCanary(nodeId: string, canary: string): Promise<void> {
    return reachable(this.#connection.commands.spublish(this.#keys.channel(nodeId), markedFrame(Marker.canary, canary)).then(() => {}));
  }

  putStatus(record: string): Promise<void> {
    return reachable(putStatus(this.#connection, this.#keys, this.nodeId, record));
  }

  async fleetStatus(): Promise<ReadonlyMap<string, string>> {
    return reachable(this.#control.liveNodes().then((nodes) => statusOf(this.#connection, this.#keys, nodes)));
  }

  /** Leave the fleet cleanly: this node's routes, shapes and lease are removed from Redis. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#lease.stop();
    // The lease's removal below takes the waiting routes with the others.
    this.#writes.drop();
    clearTimeout(this.#removalTimer);
    this.#leaving.clear();
    this.#removals?.resolve();
    try {
      await this.#lease.remove(this.nodeId, this.#registry.heldBuckets(), [...this.#routes.keys()]);
    } catch (error) {
      this.#observer.writeFailed(error as Error); // the lease will expire and another node will sweep us
    }
    this.#routes.clear();
    await this.#connection.close();
  }

  /**
   * A message is `<event>\n<eventData JSON>`, a control message or a canary (markers.ts); anything else on the channel (not
   * ours, or damaged) is dropped, counted.
   */
  #receive(message: Buffer): void {
    try {
      const marker = markerOf(message);
      if (marker === Marker.control) return this.#onControl(markedText(message));
      if (marker === Marker.canary) return this.#onCanary(markedText(message));
      if (this.#historyEmits.receive(message)) return;
      const newline = message.indexOf(10);
      if (newline < 0) throw new Error('a message on the node channel has no event line');
      const event = message.toString('utf8', 0, newline);
      const eventData: unknown = JSON.parse(message.toString('utf8', newline + 1));
      if (!isRecord(eventData)) throw new Error('a message on the node channel carries no eventData object');
      this.#onDelivery(event, eventData);
    } catch (error) {
      this.#observer.undeliverable(error);
    }
  }

  #removeLeaving(): void {
    const removals = this.#removals!;
    const writes = [...this.#leaving.values()].map((route) => this.#removal(route));
    this.#leaving.clear();
    this.#removals = undefined;
    void this.#writes.push(...writes).then(() => removals.resolve());
  }

  /** Forgets the route here at once; the answered write removes it from Redis, when the queue sends it. */
  #removal(route: Route): Write {
    this.#routes.delete(route.key);
    const lastOfShape = this.#shapes.release(route);
    return () => {
      const removed = this.#registry.remove(route.key, this.#routes.size === 0);
      const written = lastOfShape ? Promise.all([removed, this.#shapes.withdrawShape(route.event, shapeKeyOf(route.fields), this.nodeId)]) : removed;
      return written.catch((error: unknown) => {
        this.#unremoved.set(route.key, route);
        throw error;
      });
    };
  }

  /**
   * Write this node's whole state again. Idempotent: route scripts, set members and bits. Routes whose removal failed
   * meanwhile, and that this node does not hold again, are removed: emits for them would reach this node for nothing.
   */
  async #resync(): Promise<number> {
    const unremoved = [...this.#unremoved.values()].filter((route) => !this.#routes.has(route.key));
    this.#unremoved.clear();
    try {
      await Promise.all([
        this.#registry.writeAll(this.#routes.keys()),
        this.#shapes.publishAll(this.nodeId),
        ...unremoved.map((route) => this.#registry.remove(route.key, false)),
        this.#shapes.withdrawUnheld(this.nodeId, unremoved),
      ]);
    } catch (error) {
      for (const route of unremoved) this.#unremoved.set(route.key, route);
      throw error;
    }
    return this.#routes.size;
  }
}

const unreachable = (error: unknown): GatewayError =>
  new GatewayError('UNAVAILABLE', `the fleet's Redis is unreachable: ${(error as Error).message}`);

/** A Redis call whose failure is the fleet being out of reach. */
async function reachable<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw unreachable(error);
  }
}
