/**
 * Criteria shapes: which field sets an event's routes use, so an emit knows which route keys to look up.
 * Locally, a count of this node's routes per shape; in Redis, per shape the set of nodes using it, and per
 * event the set of shapes in use. Sets make every write idempotent.
 *
 * An event with history also has its sticky shapes (gw:hshapes:{event}): shape -> when a node last held it, ms.
 * An emit appends to its route in each of them, held now or not: a client that is away holds no route, and
 * what it comes back for is that route's history. A node writes its shape there when it first holds it and at every
 * heartbeat while it does; a shape nobody has held for the event's ttlSeconds (and a lease, the heartbeat's slack)
 * leaves at a heartbeat, since its routes' entries would be too old to replay by then.
 */
import type { Histories } from '../broker.ts';
import { shapeKeyOf, type Route } from '../../events/routing.ts';
import type { Commands } from './clients.ts';
import type { Keyspace } from './keys.ts';

/** A criteria shape as Redis holds it (its key: the sorted field names, joined by ","), with its fields. */
export interface Shape {
  key: string;
  fields: readonly string[];
}

export const NO_SHAPES: readonly Shape[] = [];

export const shapeOf = (key: string): Shape => ({ key, fields: key === '' ? [] : key.split(',') });

/** Whether a read of an event's shapes found those of its last emit, in the same order (as a set's usually are). */
export function sameShapes(shapes: readonly Shape[], keys: readonly string[]): boolean {
  if (shapes.length !== keys.length) return false;
  for (let i = 0; i < keys.length; i++) if (shapes[i]!.key !== keys[i]) return false;
  return true;
}

/** "<event>|<shapeKey>", as route keys begin. */
type ShapeId = string;

function split(shapeId: ShapeId): [event: string, shapeKey: string] {
  const bar = shapeId.indexOf('|');
  return [shapeId.slice(0, bar), shapeId.slice(bar + 1)];
}

/** The shape a route key belongs to: route keys are `<event>|<shapeKey>|<values>`, and neither part holds a "|". */
export function shapeOfRouteKey(routeKey: string): ShapeId {
  return routeKey.slice(0, routeKey.indexOf('|', routeKey.indexOf('|') + 1));
}

export class ShapeIndex {
  readonly #held = new Map<ShapeId, number>();
  readonly #redis: Commands;
  readonly #keys: Keyspace;
  readonly #histories: Histories;
  readonly #leaseMs: number;

  constructor(redis: Commands, keys: Keyspace, histories: Histories, leaseMs: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#histories = histories;
    this.#leaseMs = leaseMs;
  }

  /** Count a new local route; answers whether it is the first of its shape here. */
  hold(route: Route): boolean {
    const id = `${route.event}|${shapeKeyOf(route.fields)}`;
    const count = this.#held.get(id) ?? 0;
    this.#held.set(id, count + 1);
    return count === 0;
  }

  /** Uncount a local route; answers whether it was the last of its shape here. */
  release(route: Route): boolean {
    const id = `${route.event}|${shapeKeyOf(route.fields)}`;
    const count = (this.#held.get(id) ?? 1) - 1;
    if (count > 0) this.#held.set(id, count);
    else this.#held.delete(id);
    return count === 0;
  }

  async publishShape(event: string, shapeKey: string, nodeId: string): Promise<void> {
    await Promise.all([
      this.#redis.sadd(this.#keys.shapeNodes(event, shapeKey), nodeId),
      this.#redis.sadd(this.#keys.shapes(event), shapeKey),
      this.#histories.has(event) ? this.#redis.zadd(this.#keys.historyShapes(event), Date.now(), shapeKey) : undefined,
    ]);
  }

  /**
   * The shape leaves the event's set when no node uses it. Not atomic across slots: a node that starts using
   * the shape at that moment may see it withdrawn, and publishAll at its next heartbeat puts it back.
   */
  async withdrawShape(event: string, shapeKey: string, nodeId: string): Promise<void> {
    const nodes = this.#keys.shapeNodes(event, shapeKey);
    await this.#redis.srem(nodes, nodeId);
    if ((await this.#redis.scard(nodes)) === 0) await this.#redis.srem(this.#keys.shapes(event), shapeKey);
  }

  /** Every shape this node holds, written again (heartbeat repair, resync); sticky shapes past their time go. */
  async publishAll(nodeId: string): Promise<void> {
    const now = Date.now();
    const expired = [...this.#histories].map(([event, { ttlSeconds }]) =>
      this.#redis.zremrangebyscore(this.#keys.historyShapes(event), '-inf', String(now - ttlSeconds * 1000 - this.#leaseMs)));
    await Promise.all([...expired, ...[...this.#held.keys()].map((id) => this.publishShape(...split(id), nodeId))]);
  }

  /** Withdraw this node from the shapes of these routes that it holds no route of now (their removal failed). */
  async withdrawUnheld(nodeId: string, routes: readonly Route[]): Promise<void> {
    const unheld = new Set(routes.map((route) => `${route.event}|${shapeKeyOf(route.fields)}`).filter((id) => !this.#held.has(id)));
    await Promise.all([...unheld].map((id) => this.withdrawShape(...split(id), nodeId)));
  }

  /** Withdraw a node (a dead one, or this one leaving) from the shapes of its routes. */
  async withdrawAll(nodeId: string, routeKeys: readonly string[]): Promise<void> {
    const shapes = new Set(routeKeys.map(shapeOfRouteKey));
    await Promise.all([...shapes].map((id) => this.withdrawShape(...split(id), nodeId)));
  }
}
