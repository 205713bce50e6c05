/**
 * The in-process broker: a MemoryBus is the fleet's shared registry, each MemoryBroker one node on it.
 * One node with its own bus is the embedded default; several brokers on one bus let tests run a fleet in one process.
 */
import type { Position } from '@herald/protocol';
import type { HistoryConfig } from '../config/schema.ts';
import { shapeKeyOf, valuesKeyIn, routeKeyOf, type Route } from '../events/routing.ts';
import type { Broker, BrokerObserver, CanaryHandler, Claimed, ControlHandler, DeliveryHandler, Histories, HistoryRange, HistoryRead, Once, Revocation } from './broker.ts';
import { MemoryHistories } from './memory-history.ts';
import { MemoryOnce } from './memory-once.ts';

interface Shape {
  fields: readonly string[];
  /** Routes (across nodes) with this shape; the shape is forgotten at zero. */
  routes: number;
}

/** A shape of an event with history: kept after its last route leaves, for its event's ttlSeconds (see publish). */
interface StickyShape {
  fields: readonly string[];
  /** When its last route left, ms; undefined while a node holds one. */
  releasedAt: number | undefined;
}

const NO_HISTORIES: Histories = new Map();

type HistoryObserver = Pick<BrokerObserver, 'historyAppended'>;

export class MemoryBus {
  readonly #handlers = new Map<string, DeliveryHandler>();
  readonly #controls = new Map<string, ControlHandler>();
  readonly #canaries = new Map<string, CanaryHandler>();
  readonly #statuses = new Map<string, string>();
  /** subject -> revokedAt, ms */
  readonly #revocations = new Map<string, number>();
  readonly #routes = new Map<string, Set<string>>();
  readonly #shapes = new Map<string, Map<string, Shape>>();
  readonly #histories: Histories;
  readonly #logs = new MemoryHistories();
  readonly once = new MemoryOnce();
  /** Per event with history: its shapes, held or left within ttlSeconds. */
  readonly #sticky = new Map<string, Map<string, StickyShape>>();

  /** `histories`: the events that keep a history, the same for every node on the bus. */
  constructor(histories: Histories = NO_HISTORIES) {
    this.#histories = histories;
  }

  /** `observer` hears of the histories its emits were appended to. */
  broker(nodeId: string, observer?: HistoryObserver): Broker {
    return new MemoryBroker(this, nodeId, observer);
  }

  attach(nodeId: string, handler: DeliveryHandler, onControl: ControlHandler = () => {}, onCanary: CanaryHandler = () => {}): void {
    this.#handlers.set(nodeId, handler);
    this.#controls.set(nodeId, onControl);
    this.#canaries.set(nodeId, onCanary);
  }

  detach(nodeId: string): void {
    this.#handlers.delete(nodeId);
    this.#controls.delete(nodeId);
    this.#canaries.delete(nodeId);
    this.#statuses.delete(nodeId);
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
    if (!this.#histories.has(route.event)) return;
    let sticky = this.#sticky.get(route.event);
    if (!sticky) this.#sticky.set(route.event, (sticky = new Map()));
    sticky.set(shapeKey, { fields: route.fields, releasedAt: undefined });
  }

  remove(nodeId: string, routeKey: string): void {
    const nodes = this.#routes.get(routeKey);
    if (!nodes?.delete(nodeId)) return;
    if (nodes.size === 0) this.#routes.delete(routeKey);
    const [event = '', shapeKey = ''] = routeKey.split('|', 2);
    const shapes = this.#shapes.get(event);
    const shape = shapes?.get(shapeKey);
    if (!shapes || !shape) return;
    if (--shape.routes === 0) {
      shapes.delete(shapeKey);
      const sticky = this.#sticky.get(event)?.get(shapeKey);
      if (sticky) sticky.releasedAt = Date.now();
    }
    if (shapes.size === 0) this.#shapes.delete(event);
  }

  /** Answers how many nodes it reached; `observer` hears of the histories it was appended to. */
  publish(event: string, eventData: Record<string, unknown>, observer?: HistoryObserver, once?: Once): number {
    const history = this.#histories.get(event);
    if (history !== undefined) return this.#publishHistory(event, eventData, history, observer, once);
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

  /** Every attached node is live. */
  liveNodes(): string[] {
    return [...this.#controls.keys()];
  }

  /** Later, as from a channel: a canary never runs its receiver inside the sender's call. */
  sendCanary(nodeId: string, canary: string): void {
    const handler = this.#canaries.get(nodeId);
    if (handler) queueMicrotask(() => handler(canary));
  }

  putStatus(nodeId: string, record: string): void {
    if (this.#controls.has(nodeId)) this.#statuses.set(nodeId, record);
  }

  fleetStatus(): Map<string, string> {
    return new Map(this.#statuses);
  }

  revoke(subject: string, revokedAt: number, keepMs: number): void {
    this.#revocations.set(subject, Math.max(revokedAt, this.#revocations.get(subject) ?? -Infinity));
    for (const [each, at] of this.#revocations) if (at < revokedAt - keepMs) this.#revocations.delete(each);
  }

  revocations(since: number): Revocation[] {
    return [...this.#revocations].filter(([, at]) => at >= since);
  }

  history(route: Route, range: HistoryRange | undefined): HistoryRead {
    const config = this.#histories.get(route.event);
    if (config === undefined) throw new Error(`${route.event} keeps no history`);
    return this.#logs.read(route.key, config, range);
  }

  /**
   * An emit of an event with history is appended to its route in every shape the event had within ttlSeconds, held
   * by a node or not: a client that is away holds no route, and its history is what it comes back for.
   */
  #publishHistory(event: string, eventData: Record<string, unknown>, history: HistoryConfig, observer: HistoryObserver | undefined, once: Once | undefined): number {
    const positions = new Map<string, Position>();
    const targets = new Set<string>();
    let json: string | undefined;
    const now = Date.now();
    for (const [shapeKey, sticky] of this.#sticky.get(event) ?? []) {
      if (sticky.releasedAt !== undefined && now - sticky.releasedAt > history.ttlSeconds * 1000) {
        this.#sticky.get(event)!.delete(shapeKey);
        continue;
      }
      const valuesKey = valuesKeyIn(eventData, sticky.fields);
      if (valuesKey === undefined) continue;
      const routeKey = routeKeyOf(event, shapeKey, valuesKey);
      positions.set(routeKey, this.#logs.append(routeKey, (json ??= JSON.stringify(eventData)), history, once));
      for (const nodeId of this.#routes.get(routeKey) ?? []) targets.add(nodeId);
    }
    if (positions.size > 0) observer?.historyAppended(positions.size);
    for (const nodeId of targets) this.#handlers.get(nodeId)?.(event, eventData, positions, json);
    return targets.size;
  }
}

class MemoryBroker implements Broker {
  readonly nodeId: string;
  readonly #bus: MemoryBus;
  readonly #observer: HistoryObserver | undefined;

  constructor(bus: MemoryBus, nodeId: string, observer: HistoryObserver | undefined) {
    this.#bus = bus;
    this.nodeId = nodeId;
    this.#observer = observer;
  }

  ready(): boolean {
    return true;
  }

  async start(onDelivery: DeliveryHandler, onControl?: ControlHandler, onCanary?: CanaryHandler): Promise<void> {
    this.#bus.attach(this.nodeId, onDelivery, onControl, onCanary);
  }

  async addRoute(route: Route): Promise<void> {
    this.#bus.add(this.nodeId, route);
  }

  async removeRoute(route: Route): Promise<void> {
    this.#bus.remove(this.nodeId, route.key);
  }

  async publish(event: string, eventData: Record<string, unknown>, once?: Once): Promise<number> {
    return this.#bus.publish(event, eventData, this.#observer, once);
  }

  async claim(once: Once, digest: string, pendingMs: number): Promise<Claimed> {
    return this.#bus.once.claim(once, digest, pendingMs);
  }

  async settle(once: Once, digest: string, answer: string | undefined): Promise<void> {
    this.#bus.once.settle(once, digest, answer);
  }

  async history(route: Route, range?: HistoryRange): Promise<HistoryRead> {
    return this.#bus.history(route, range);
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

  async liveNodes(): Promise<readonly string[]> {
    return this.#bus.liveNodes();
  }

  async sendCanary(nodeId: string, canary: string): Promise<void> {
    this.#bus.sendCanary(nodeId, canary);
  }

  async putStatus(record: string): Promise<void> {
    this.#bus.putStatus(this.nodeId, record);
  }

  async fleetStatus(): Promise<ReadonlyMap<string, string>> {
    return this.#bus.fleetStatus();
  }

  async close(): Promise<void> {
    this.#bus.detach(this.nodeId);
  }
}
