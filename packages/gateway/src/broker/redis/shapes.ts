/**
 * Criteria shapes: which field sets an event's routes use, so an emit knows which route keys to look up.
 * Locally, a count of this node's routes per shape; in Redis, per shape the set of nodes using it, and per
 * event the set of shapes in use. Sets make every write idempotent.
 */
import { shapeKeyOf, type Route } from '../../events/routing.ts';
import type { Commands } from './connection.ts';
import type { Keyspace } from './keys.ts';

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

  constructor(redis: Commands, keys: Keyspace) {
    this.#redis = redis;
    this.#keys = keys;
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

  /** Every shape this node holds, written again (heartbeat repair, resync). */
  async publishAll(nodeId: string): Promise<void> {
    await Promise.all([...this.#held.keys()].map((id) => this.publishShape(...split(id), nodeId)));
  }

  /** Withdraw a node (a dead one, or this one leaving) from the shapes of its routes. */
  async withdrawAll(nodeId: string, routeKeys: readonly string[]): Promise<void> {
    const shapes = new Set(routeKeys.map(shapeOfRouteKey));
    await Promise.all([...shapes].map((id) => this.withdrawShape(...split(id), nodeId)));
  }
}
