/**
 * The in-process broker: a MemoryBus is the fleet's shared registry, each MemoryBroker one node on it.
 * One node with its own bus is the embedded default; several brokers on one bus let tests run a fleet in one process.
 */
import { shapeKeyOf, valuesKeyIn, routeKeyOf, type Route } from '../events/routing.ts';
import type { Broker, ControlHandler, DeliveryHandler, Revocation } from './broker.ts';

interface Shape {
  fields: readonly string[];
  /** Routes (across nodes) with this shape; the shape is forgotten at zero. */
  routes: number;
}

export class MemoryBus {
  readonly #handlers = new Map<string, DeliveryHandler>();
  readonly #controls = new Map<string, ControlHandler>();
  /** subject -> revokedAt, ms */
  readonly #revocations = new Map<string, number>();
  readonly #routes = new Map<string, Set<string>>();
  readonly #shapes = new Map<string, Map<string, Shape>>();

  broker(nodeId: string): Broker {
    return new MemoryBroker(this, nodeId);
  }

  attach(nodeId: string, handler: DeliveryHandler, onControl: ControlHandler = () => {}): void {
    this.#handlers.set(nodeId, handler);
    this.#controls.set(nodeId, onControl);
  }

  detach(nodeId: string): void {
    this.#handlers.delete(nodeId);
    this.#controls.delete(nodeId);
    for (const [key, nodes] of this.#routes) {
      if (nodes.has(nodeId)) this.remove(nodeId, key);
    }
  }

  add(nodeId: string, route: Route): void {
    let nodes = this.#routes.get(route.key);
    if (!nodes) this.#routes.set(route.key, (nodes = new Set()));
    if (nodes.has(nodeId)) return;
    nodes.add(nodeId);
    let shapes = this.#shapes.get(route.event);
    if (!shapes) this.#shapes.set(route.event, (shapes = new Map()));
    const shapeKey = shapeKeyOf(route.fields);
    const shape = shapes.get(shapeKey);
    if (shape) shape.routes++;
    else shapes.set(shapeKey, { fields: route.fields, routes: 1 });
  }

  remove(nodeId: string, routeKey: string): void {
    const nodes = this.#routes.get(routeKey);
    if (!nodes?.delete(nodeId)) return;
    if (nodes.size === 0) this.#routes.delete(routeKey);
    const [event = '', shapeKey = ''] = routeKey.split('|', 2);
    const shapes = this.#shapes.get(event);
    const shape = shapes?.get(shapeKey);
    if (!shapes || !shape) return;
    if (--shape.routes === 0) shapes.delete(shapeKey);
    if (shapes.size === 0) this.#shapes.delete(event);
  }

  publish(event: string, eventData: Record<string, unknown>): number {
    const targets = new Set<string>();
    for (const [shapeKey, { fields }] of this.#shapes.get(event) ?? []) {
      const valuesKey = valuesKeyIn(eventData, fields);
      if (valuesKey === undefined) continue;
      for (const nodeId of this.#routes.get(routeKeyOf(event, shapeKey, valuesKey)) ?? []) targets.add(nodeId);
    }
    for (const nodeId of targets) this.#handlers.get(nodeId)?.(event, eventData);
    return targets.size;
  }

  /** Every attached node is live: answers their ids. */
  broadcast(message: string): string[] {
    const nodes = [...this.#controls.keys()];
    for (const nodeId of nodes) this.#controls.get(nodeId)?.(message);
    return nodes;
  }

  sendTo(nodeId: string, message: string): void {
    this.#controls.get(nodeId)?.(message);
  }

  revoke(subject: string, revokedAt: number, keepMs: number): void {
    this.#revocations.set(subject, Math.max(revokedAt, this.#revocations.get(subject) ?? -Infinity));
    for (const [each, at] of this.#revocations) if (at < revokedAt - keepMs) this.#revocations.delete(each);
  }

  revocations(since: number): Revocation[] {
    return [...this.#revocations].filter(([, at]) => at >= since);
  }
}

class MemoryBroker implements Broker {
  readonly nodeId: string;
  readonly #bus: MemoryBus;

  constructor(bus: MemoryBus, nodeId: string) {
    this.#bus = bus;
    this.nodeId = nodeId;
  }

  ready(): boolean {
    return true;
  }

  async start(onDelivery: DeliveryHandler, onControl?: ControlHandler): Promise<void> {
    this.#bus.attach(this.nodeId, onDelivery, onControl);
  }

  async addRoute(route: Route): Promise<void> {
    this.#bus.add(this.nodeId, route);
  }

  async removeRoute(route: Route): Promise<void> {
    this.#bus.remove(this.nodeId, route.key);
  }

  async publish(event: string, eventData: Record<string, unknown>): Promise<number> {
    return this.#bus.publish(event, eventData);
  }

  async broadcast(message: string): Promise<readonly string[]> {
    return this.#bus.broadcast(message);
  }

  async sendTo(nodeId: string, message: string): Promise<void> {
    this.#bus.sendTo(nodeId, message);
  }

  async revoke(subject: string, revokedAt: number, keepMs: number): Promise<void> {
    this.#bus.revoke(subject, revokedAt, keepMs);
  }

  async revocations(since: number): Promise<Revocation[]> {
    return this.#bus.revocations(since);
  }

  async close(): Promise<void> {
    this.#bus.detach(this.nodeId);
  }
}
