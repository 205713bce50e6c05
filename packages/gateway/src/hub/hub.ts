/**
 * The Hub owns this node's connections and their subscriptions, indexed by route so that an emit for one
 * person costs a map lookup per criteria shape, and each distinct NOTIFICATION is encoded once.
 *
 *   event -> shape (sorted criteria fields) -> values key -> Bucket (one route) -> Subscription (one eventId)
 *   -> sessions
 *
 * It tells the Broker when a route first appears here and when it last leaves; it never talks to Redis itself.
 */
import { CloseCode, encodeNotification, EventType, type OnEvent, type ValidOnEvent } from '@herald/protocol';
import type { Broker } from '../broker/broker.ts';
import { GatewayError, type Contain } from '../errors.ts';
import { eventIdOf, project, routeEventOf, routeOf, shapeKeyOf, valuesKeyIn, type Route } from '../events/routing.ts';
import type { Metrics } from '../metrics.ts';
import { addTo, findIn, membersOf, removeFrom, sizeOf, type Few } from './few.ts';
import { CoalescedWrites, textFrame } from '../transport/frames.ts';
import type { Session } from './session.ts';

/**
 * One eventId on this node: what its NOTIFICATION carries, and every session that asked for it. Only what the
 * frame needs is kept, not the REGISTER entry (its condition is the route's): at one subscription per client,
 * the entry's objects and strings were ~130 B of each client's heap.
 */
export interface Subscription {
  readonly eventId: string;
  readonly eventType: EventType;
  readonly getEventData: boolean;
  readonly select: readonly string[] | undefined;
  readonly bucket: Bucket;
  sessions: Few<Session>;
}

interface Bucket {
  readonly route: Route;
  /** One per distinct eventId on the route (they differ in select or getEventData). */
  subscriptions: Few<Subscription>;
  /** Until the broker knows this node holds the route (it never rejects); then cleared. */
  registering: Promise<void> | undefined;
}

interface Shape {
  /** The event's name and field names as first seen: every route the shape holds shares these strings. */
  readonly event: string;
  readonly fields: readonly string[];
  readonly buckets: Map<string, Bucket>;
}

/** What a frame to a client is, for the count of the ones dropped. */
export type FrameKind = 'notification' | 'reply';

export interface HubOptions {
  broker: Broker;
  metrics: Metrics;
  /** Counts and logs an unexpected throw the hub contained. */
  contain: Contain;
  maxSubscriptionsPerConnection: number;
  maxBufferedBytes: number;
  fanOutChunk: number;
}

export class Hub {
  readonly sessions = new Set<Session>();
  readonly #events = new Map<string, Map<string, Shape>>();
  readonly #options: HubOptions;
  readonly #metrics: Metrics;
  /** Notifications to one client within a turn of the event loop leave in one system call. */
  readonly #out = new CoalescedWrites();

  constructor(options: HubOptions) {
    this.#options = options;
    this.#metrics = options.metrics;
  }

  open(session: Session): void {
    this.sessions.add(session);
    this.#metrics.connections.inc();
    this.#metrics.connectionsOpened.inc();
  }

  /** Let go of a session and its subscriptions. Idempotent. */
  close(session: Session): void {
    if (session.closed) return;
    session.closed = true;
    this.sessions.delete(session);
    this.#metrics.connections.dec();
    for (const subscription of membersOf(session.subscriptions)) this.#leave(session, subscription);
    session.subscriptions = undefined;
  }

  /**
   * Index a checked REGISTER entry; resolves once the fleet can route to it. Throws TOO_MANY_SUBSCRIPTIONS, and
   * UNAVAILABLE for a session the hub has let go of (its client left while its can-connect code ran, or while an
   * earlier reply was pending): joining it would leave a subscription and its route that no close removes.
   */
  async subscribe(session: Session, onEvent: OnEvent): Promise<ValidOnEvent> {
    if (session.closed) throw new GatewayError('UNAVAILABLE', 'the connection closed before this REGISTER was answered');
    const route = routeOf(routeEventOf(onEvent), onEvent.condition?.criteria);
    const eventId = eventIdOf(route, onEvent);
    const existing = session.subscription(eventId);
    if (existing) {
      await existing.bucket.registering;
      return { ...onEvent, eventId };
    }
    if (session.subscriptionCount >= this.#options.maxSubscriptionsPerConnection) {
      throw new GatewayError(
        'TOO_MANY_SUBSCRIPTIONS',
        `a connection may hold at most ${this.#options.maxSubscriptionsPerConnection} subscriptions`,
      );
    }
    await this.#join(session, route, eventId, onEvent).bucket.registering;
    return { ...onEvent, eventId };
  }

  /** Connections here holding a subscription to `event` (its route's event name), each counted once: presence. */
  subscribersOf(event: string): number {
    const sessions = new Set<Session>();
    for (const shape of this.#events.get(event)?.values() ?? []) {
      for (const bucket of shape.buckets.values()) {
        for (const subscription of membersOf(bucket.subscriptions)) for (const session of membersOf(subscription.sessions)) sessions.add(session);
      }
    }
    return sessions.size;
  }

  /** Answers whether the session held that eventId. */
  unsubscribe(session: Session, eventId: string): boolean {
    const subscription = session.subscription(eventId);
    if (!subscription) return false;
    this.#leave(session, subscription);
    session.subscriptions = removeFrom(session.subscriptions, subscription);
    return true;
  }

  /**
   * Fan an emit out to the local subscribers it matches. Large fan-outs yield every `fanOutChunk` writes. Nothing it
   * meets ends more than this emit: a throw (eventData that cannot be serialised slipped past the door) is counted.
   */
  deliver(event: string, eventData: Record<string, unknown>): void {
    const start = performance.now();
    this.#metrics.deliveriesIn.inc();
    let matched: Subscription[];
    try {
      matched = this.#matching(event, eventData);
    } catch (error) {
      return this.#options.contain('fan_out', error);
    }
    if (matched.length > 0) this.#fanOut(this.#writes(matched, eventData), start);
  }

  /**
   * Write a frame to a session within its send bound (websocket.maxBufferedBytes): replies and notifications alike,
   * so no kind of frame can grow the node's memory for a client that does not read. A client whose unsent bytes passed
   * the bound is shed (1013), so what it holds stays under the bound plus one frame. Answers whether the frame was
   * written; a drop is counted by kind and reason.
   */
  send(session: Session, frame: Buffer, kind: FrameKind): boolean {
    if (!session.writable) {
      this.#dropped(kind, 'closing');
      return false;
    }
    if (session.socket.bufferedAmount > this.#options.maxBufferedBytes) {
      this.#dropped(kind, 'slow_client');
      this.shed(session);
      return false;
    }
    this.#out.write(session.socket, frame);
    return true;
  }

  #dropped(kind: FrameKind, reason: 'closing' | 'slow_client'): void {
    if (kind === 'notification') this.#metrics.drops.inc({ reason });
    else this.#metrics.repliesDropped.inc({ reason });
  }

  #matching(event: string, eventData: Record<string, unknown>): Subscription[] {
    const matched: Subscription[] = [];
    const shapes = this.#events.get(event);
    if (!shapes) return matched;
    for (const shape of shapes.values()) {
      const valuesKey = valuesKeyIn(eventData, shape.fields);
      const bucket = valuesKey === undefined ? undefined : shape.buckets.get(valuesKey);
      if (bucket) for (const subscription of membersOf(bucket.subscriptions)) matched.push(subscription);
    }
    return matched;
  }

  #join(session: Session, route: Route, eventId: string, onEvent: OnEvent): Subscription {
    const bucket = this.#bucketFor(route);
    let subscription = findIn(bucket.subscriptions, (each) => each.eventId === eventId);
    if (!subscription) {
      // The protocol's own string constant, not the one parsed from this client's frame.
      const eventType = onEvent.eventType === EventType.INSTANCES ? EventType.INSTANCES : EventType.CUSTOM_WS_EVENTS;
      subscription = { eventId, eventType, getEventData: onEvent.getEventData === true, select: onEvent.select, bucket, sessions: undefined };
      bucket.subscriptions = addTo(bucket.subscriptions, subscription);
    }
    subscription.sessions = addTo(subscription.sessions, session);
    session.subscriptions = addTo(session.subscriptions, subscription);
    this.#metrics.subscriptions.inc();
    return subscription;
  }

  #leave(session: Session, subscription: Subscription): void {
    const before = sizeOf(subscription.sessions);
    subscription.sessions = removeFrom(subscription.sessions, session);
    if (sizeOf(subscription.sessions) === before) return;
    this.#metrics.subscriptions.dec();
    if (subscription.sessions !== undefined) return;
    const { bucket } = subscription;
    bucket.subscriptions = removeFrom(bucket.subscriptions, subscription);
    if (bucket.subscriptions === undefined) this.#dropBucket(bucket);
  }

  #bucketFor(route: Route): Bucket {
    let shapes = this.#events.get(route.event);
    if (!shapes) this.#events.set(route.event, (shapes = new Map()));
    const shapeKey = shapeKeyOf(route.fields);
    let shape = shapes.get(shapeKey);
    if (!shape) shapes.set(shapeKey, (shape = { event: route.event, fields: route.fields, buckets: new Map() }));
    let bucket = shape.buckets.get(route.valuesKey);
    if (!bucket) {
      // Held for as long as the route has subscribers: parsed from each client's frame, the event's name and the
      // fields array would be copies of their own (~90 B per route), so the shape's are kept instead.
      const held: Route = { ...route, event: shape.event, fields: shape.fields };
      const created: Bucket = { route: held, subscriptions: undefined, registering: undefined };
      created.registering = this.#options.broker.addRoute(held).then(() => {
        created.registering = undefined;
      });
      bucket = created;
      shape.buckets.set(route.valuesKey, bucket);
      this.#metrics.routes.inc();
    }
    return bucket;
  }

  #dropBucket({ route }: Bucket): void {
    const shapes = this.#events.get(route.event);
    const shapeKey = shapeKeyOf(route.fields);
    const shape = shapes?.get(shapeKey);
    if (!shapes || !shape) return;
    shape.buckets.delete(route.valuesKey);
    if (shape.buckets.size === 0) shapes.delete(shapeKey);
    if (shapes.size === 0) this.#events.delete(route.event);
    this.#metrics.routes.dec();
    void this.#options.broker.removeRoute(route);
  }

  /**
   * One write per recipient, yielding whether the frame went out; each subscription's frame is encoded once,
   * with its select applied once.
   */
  *#writes(matched: Subscription[], eventData: Record<string, unknown>): Generator<boolean> {
    let fullJson: string | undefined;
    for (const { eventId, eventType, getEventData, select, sessions } of matched) {
      let json: string | undefined;
      if (getEventData) json = select ? JSON.stringify(project(eventData, select)) : (fullJson ??= JSON.stringify(eventData));
      const frame = textFrame(encodeNotification(eventId, eventType, json));
      for (const session of membersOf(sessions)) yield this.send(session, frame, 'notification');
    }
  }

  /** Counting per chunk, not per frame: a counter update per recipient would cost more than the write's JS. */
  #fanOut(writes: Generator<boolean>, start: number): void {
    let sent = 0;
    try {
      for (let step = 0; step < this.#options.fanOutChunk; step++) {
        const next = writes.next();
        if (next.done) {
          this.#metrics.fanOutSeconds.observe((performance.now() - start) / 1000);
          return this.#metrics.notificationsOut.inc(sent);
        }
        if (next.value) sent++;
      }
    } catch (error) {
      this.#metrics.notificationsOut.inc(sent);
      return this.#options.contain('fan_out', error);
    }
    this.#metrics.notificationsOut.inc(sent);
    setImmediate(() => this.#fanOut(writes, start));
  }

  /** Close a client that does not read fast enough, before its unsent data grows the node's memory. */
  shed(session: Session): void {
    this.close(session);
    session.socket.close(CloseCode.TRY_AGAIN_LATER, 'slow client: unsent data passed the bound');
  }
}
