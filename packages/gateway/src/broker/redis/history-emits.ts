/**
 * Emits of events with history, through Redis. Per emit:
 *
 * 1. The event's sticky shapes are read (shapes.ts: held by a node now or within ttlSeconds), one read for all the
 *    emits of a turn of the event loop (their requests all came before it is sent, so it is as recent as theirs).
 * 2. For each sticky shape eventData has the fields of, the emit is appended to that route's history (history.ts)
 *    and the registry is read for the nodes holding the route, the read after the append is done: with one
 *    redis-server both go on one connection, in that order, so Redis runs them so, in the same round trip as step 1
 *    for the shapes the event's last emit read; a Redis Cluster keeps them on different shards, so the read waits
 *    for the append's answer there. A shape new since the last emit costs one round trip more.
 * 3. Each node holding one of the routes is sent the emit with the positions of every route it was appended to
 *    (this node: a direct call).
 *
 * The read after the append is what makes a resume exact (docs/architecture.md): an emit whose registry read
 * missed a route registered meanwhile had appended first, so the new subscriber's history read, made once its route
 * is written, holds it. A guessed shape that has just left the sticky set is appended to all the same: harmless,
 * its entries expire.
 *
 * The message to another node: `[[routeKey, offset, epoch], ...]\n<event>\n<eventData JSON>`. Its first byte is
 * "[", which no event name begins with: an emit without history keeps its message (`<event>\n<eventData JSON>`).
 */
import type { Position } from '@herald/protocol';
import type { HistoryConfig } from '../../config/schema.ts';
import { routeKeyOf, valuesKeyIn } from '../../events/routing.ts';
import { DeliveryPending, type BrokerObserver, type DeliveryHandler, type Once } from '../broker.ts';
import type { Connection } from './connection.ts';
import type { Appended, RedisHistories } from './history.ts';
import type { Keyspace } from './keys.ts';
import type { RouteRegistry } from './routes.ts';
import { sentTo } from './sends.ts';
import { NO_SHAPES, sameShapes, shapeOf, type Shape } from './shapes.ts';

/** The first byte of a message carrying positions. */
const POSITIONS_FIRST = 0x5b; // "["

/** One route an emit was appended to: [route key, offset, epoch], as the message to other nodes carries them. */
type Carried = [routeKey: string, offset: number, epoch: string];

interface AppendedRoute {
  routeKey: string;
  position: Position;
  /** The nodes holding the route, read after the append. */
  nodes: string[];
  /** Why the nodes could not be read, if they could not (then `nodes` is empty). */
  unread?: unknown;
}

export interface HistoryEmitsOptions {
  connection: Connection;
  keys: Keyspace;
  nodeId: string;
  store: RedisHistories;
  registry: RouteRegistry;
  observer: BrokerObserver;
  /** This node's own deliveries. */
  deliver: DeliveryHandler;
}

export class HistoryEmits {
  readonly #options: HistoryEmitsOptions;
  /** Each event's sticky shapes as its last emit read them. */
  readonly #seen = new Map<string, readonly Shape[]>();
  /** Each event's read of its sticky shapes (shapes.ts) in this turn of the event loop. */
  readonly #reads = new Map<string, Promise<string[]>>();

  constructor(options: HistoryEmitsOptions) {
    this.#options = options;
  }

  /**
   * Answers how many nodes the emit was sent to; rejects when Redis cannot be reached. `once`: appended once per route
   * under this idempotency key (history.ts); sent again with its first positions.
   */
  async publish(event: string, eventData: Record<string, unknown>, history: HistoryConfig, once?: Once): Promise<number> {
    const json = JSON.stringify(eventData);
    const append = (shape: Shape) => this.#append(event, shape, eventData, json, history, once);
    const guessed = this.#seen.get(event) ?? NO_SHAPES;
    // Settled, not raced: an append that went through is sent on even when another part failed (another shard).
    const [sticky, ...guessedRoutes] = await Promise.allSettled([this.#readSticky(event), ...guessed.map(append)]);
    const appended = new Appends(guessedRoutes);
    if (sticky.status === 'rejected') appended.failed(sticky.reason);
    else {
      const same = sameShapes(guessed, sticky.value);
      const shapes = same ? guessed : sticky.value.map(shapeOf);
      this.#seen.set(event, shapes);
      const late = same ? NO_SHAPES : shapes.filter((shape) => !guessed.some((each) => each.key === shape.key));
      if (late.length > 0) appended.add(await Promise.allSettled(late.map(append)));
    }
    const { routes, failure } = appended;
    if (routes.length === 0) {
      if (failure !== undefined) throw failure;
      return 0;
    }
    this.#options.observer.historyAppended(routes.length);
    const sent = this.#send(event, eventData, json, routes);
    if (failure === undefined) return sent;
    throw new DeliveryPending(await sent.catch((pending: DeliveryPending) => pending.nodes), failure);
  }

  /** The event's sticky shapes as its last emit read them. */
  seenShapes(event: string): readonly Shape[] {
    return this.#seen.get(event) ?? NO_SHAPES;
  }

  /** Whether `message` carries positions; if so, it is delivered here. */
  receive(message: Buffer): boolean {
    if (message[0] !== POSITIONS_FIRST) return false;
    const first = message.indexOf(10);
    const second = message.indexOf(10, first + 1);
    if (first < 0 || second < 0) return true;
    const positions = positionsOf(JSON.parse(message.toString('utf8', 0, first)) as Carried[]);
    const json = message.toString('utf8', second + 1);
    this.#options.deliver(message.toString('utf8', first + 1, second), JSON.parse(json) as Record<string, unknown>, positions, json);
    return true;
  }

  /** The emit appended to its route in `shape` (if eventData has that shape's fields), and the route's nodes. */
  #append(
    event: string, shape: Shape, eventData: Record<string, unknown>, json: string, history: HistoryConfig, once: Once | undefined,
  ): Promise<AppendedRoute> | undefined {
    const valuesKey = valuesKeyIn(eventData, shape.fields);
    if (valuesKey === undefined) return undefined;
    const { store, registry, connection } = this.#options;
    const routeKey = routeKeyOf(event, shape.key, valuesKey);
    const appending = store.append(routeKey, json, history, once);
    // Appended, its nodes unread (the registry's shard failing over): in the history all the same, sent to nobody.
    const unread = (position: Position, error: unknown): AppendedRoute => ({ routeKey, position, nodes: [], unread: error });
    const readAfter = ({ position }: Appended): Promise<AppendedRoute> =>
      registry.nodesOf(routeKey).then((nodes) => ({ routeKey, position, nodes }), (error: unknown) => unread(position, error));
    if (!connection.reads.inOrder) return appending.then(readAfter);
    // One redis-server, one connection: the read, sent right after the append, runs after it. An append sent again
    // through another connection (NOSCRIPT) may have run after that read: read again.
    return Promise.allSettled([appending, registry.nodesOf(routeKey)]).then(([appended, read]) => {
      if (appended.status === 'rejected') throw appended.reason;
      const done = appended.value;
      if (done.resent) return readAfter(done);
      return read.status === 'fulfilled' ? { routeKey, position: done.position, nodes: read.value } : unread(done.position, read.reason);
    });
  }

  /** To each node holding one of the routes; the message for the others is made only when there is one. */
  #send(event: string, eventData: Record<string, unknown>, json: string, routes: AppendedRoute[]): Promise<number> {
    const { nodeId, keys, connection } = this.#options;
    const positions = new Map<string, Position>();
    const nodes = new Set<string>();
    for (const route of routes) {
      positions.set(route.routeKey, route.position);
      for (const node of route.nodes) nodes.add(node);
    }
    let message: Buffer | undefined;
    let sends: Promise<number>[] | undefined;
    for (const node of nodes) {
      if (node === nodeId) this.#options.deliver(event, eventData, positions, json);
      else (sends ??= []).push(connection.commands.spublish(keys.channel(node), (message ??= messageOf(event, json, routes))) as Promise<number>);
    }
    return sends === undefined ? Promise.resolve(nodes.size) : sentTo(nodes.size, sends, true);
  }

  #readSticky(event: string): Promise<string[]> {
    const shared = this.#reads.get(event);
    if (shared !== undefined) return shared;
    const read = this.#options.connection.reads.zrange(this.#options.keys.historyShapes(event));
    this.#reads.set(event, read);
    setImmediate(() => this.#reads.delete(event));
    return read;
  }
}

/** An emit's appends as they settle: the routes it is in, and the first failure (a shape unread, an append failed). */
class Appends {
  readonly routes: AppendedRoute[] = [];
  failure: unknown;

  constructor(settled: ReadonlyArray<PromiseSettledResult<AppendedRoute | undefined>>) {
    this.add(settled);
  }

  add(settled: ReadonlyArray<PromiseSettledResult<AppendedRoute | undefined>>): void {
    for (const each of settled) {
      if (each.status === 'rejected') this.failed(each.reason);
      else if (each.value !== undefined) {
        this.routes.push(each.value);
        if ('unread' in each.value) this.failed(each.value.unread);
      }
    }
  }

  failed(reason: unknown): void {
    this.failure ??= reason;
  }
}

function positionsOf(appended: readonly Carried[]): Map<string, Position> {
  return new Map(appended.map(([routeKey, offset, epoch]) => [routeKey, { offset, epoch }]));
}

function messageOf(event: string, json: string, routes: readonly AppendedRoute[]): Buffer {
  const appended = routes.map(({ routeKey, position }): Carried => [routeKey, position.offset, position.epoch]);
  return Buffer.from(`${JSON.stringify(appended)}\n${event}\n${json}`);
}
