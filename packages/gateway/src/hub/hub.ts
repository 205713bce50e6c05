/**
 * The Hub owns this node's connections and their subscriptions, indexed by route so that an emit for one
 * person costs a map lookup per criteria shape, and each distinct NOTIFICATION is encoded once.
 *
 *   event -> shape (sorted criteria fields) -> values key -> LocalRoute (one route) -> Subscription (one eventId)
 *   -> sessions
 *
 * It tells the Broker when a route first appears here and when it last leaves; it never talks to Redis itself.
 *
 * A route of an event with history (config events.<name>.history) has a RouteHistory, which lets its notifications
 * through once each and in order, and its sessions resume: see #resume and resumes.ts.
 */
import { CloseCode, encodeNotification, EventType, type OnEvent, type Position, type ValidOnEvent } from '@herald/protocol';
import type { Broker, Histories } from '../broker/broker.ts';
import { GatewayError, type Contain } from '../errors.ts';
import { eventIdOf, project, routeEventOf, routeOf, shapeKeyOf, valuesKeyIn, type Route } from '../events/routing.ts';
import type { Metrics } from '../metrics.ts';
import { DeliveryBacklog } from './backlog.ts';
import { FanOuts } from './fan-out.ts';
import { DeliveryLag } from './lag.ts';
import { addTo, findIn, membersOf, removeFrom, sizeOf, type OneOrMany } from './one-or-many.ts';
import { CoalescedWrites, textFrame } from '../wire/frames.ts';
import type { RouteEntry, RouteHistoryHost } from './route-history.ts';
import { hasHistory, LocalRouteWithHistory, type Outgoing, type Shape } from './local-routes.ts';
import { Resumes } from './resumes.ts';
import type { LocalRoute, Session, Subscription } from './session.ts';

/** What a frame to a client is, for the count of the ones dropped. */
export type FrameKind = 'notification' | 'reply';

export interface HubOptions {
  broker: Broker;
  metrics: Metrics;
  /** Counts and logs an unexpected throw the hub contained. */
  contain: Contain;
  /** The events that keep a history. */
  histories: Histories;
  maxSubscriptionsPerConnection: number;
  maxBufferedBytes: number;
  fanOutChunk: number;
  /** emit.maxBacklogBytes: the delivery backlog's bound. */
  maxBacklogBytes: number;
  /** emit.maxLagMs: past it, a connection's lag counts against the node's emits. */
  maxEmitLagMs: number;
  /** websocket.maxLagMs: a connection this far behind is closed. */
  maxLagMs: number;
}

export class Hub {
  readonly sessions = new Set<Session>();
  readonly #events = new Map<string, Map<string, Shape>>();
  readonly #options: HubOptions;
  readonly #metrics: Metrics;
  /** Bytes on their way to this node's sockets: what an emit checks before it is taken. */
  readonly backlog: DeliveryBacklog;
  /** How far behind in time the busy connections are: what an emit checks beside the backlog. */
  readonly lag: DeliveryLag;
  /** Notifications to one client within a turn of the event loop leave in one system call. */
  readonly #out: CoalescedWrites;
  readonly #fanOuts: FanOuts;
  readonly #resumes: Resumes;
  /** What every route of an event with history asks of the hub. */
  readonly #routeHistories: RouteHistoryHost<LocalRouteWithHistory>;

  constructor(options: HubOptions) {
    this.#options = options;
    this.#metrics = options.metrics;
    const metrics = options.metrics;
    this.backlog = new DeliveryBacklog(options.maxBacklogBytes);
    this.#out = new CoalescedWrites(this.backlog);
    this.lag = new DeliveryLag({
      emitBoundMs: options.maxEmitLagMs,
      connectionBoundMs: options.maxLagMs,
      observe: (lagMs) => metrics.deliveryLag.observe(lagMs / 1000),
      shed: (session, lagMs) => this.shed(session, 'lag', `slow client: ${Math.round(lagMs)} ms behind, past the bound`),
    });
    this.#fanOuts = new FanOuts({
      metrics,
      contain: options.contain,
      backlog: this.backlog,
      chunk: options.fanOutChunk,
      send: (session, frame) => this.send(session, frame, 'notification'),
    });
    this.#routeHistories = {
      read: (localRoute, range) => options.broker.history(localRoute.route, range),
      // Called from a history read's settlement too, where a throw would be an unhandled rejection: contained here.
      next: (localRoute, entry) => {
        try {
          this.#letThrough(localRoute, entry);
        } catch (error) {
          options.contain('fan_out', error);
        }
      },
      duplicate: () => metrics.historyDuplicates.inc(),
      gap: (filled) => metrics.historyGapFills.inc({ result: filled ? 'filled' : 'lost' }),
      overflow: () => metrics.drops.inc({ reason: 'history_held' }),
    };
    this.#resumes = new Resumes({
      write: (session, frame) => {
        if (this.send(session, frame, 'notification')) this.#metrics.notificationsOut.inc();
      },
      overflow: (session) => {
        this.#metrics.drops.inc({ reason: 'slow_client' });
        this.shed(session, 'unsent');
      },
      duplicate: () => this.#metrics.historyDuplicates.inc(),
      maxBufferedBytes: options.maxBufferedBytes,
    });
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
    if (this.#resumes.size > 0) this.#resumes.forget(session);
    this.lag.forget(session);
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
      await existing.localRoute.registering;
      const held = hasHistory(existing.localRoute) ? existing.localRoute.history.position : undefined;
      return { ...validOf(onEvent, eventId), ...held };
    }
    if (session.subscriptionCount >= this.#options.maxSubscriptionsPerConnection) {
      throw new GatewayError(
        'TOO_MANY_SUBSCRIPTIONS',
        `a connection may hold at most ${this.#options.maxSubscriptionsPerConnection} subscriptions`,
      );
    }
    const subscription = this.#join(session, route, eventId, onEvent);
    const { localRoute } = subscription;
    if (!hasHistory(localRoute)) {
      await localRoute.registering;
      return validOf(onEvent, eventId);
    }
    // From here its frames are held, and those after its position as of now follow the reply: the route's position
    // now, or, for a route still being read, the position read (what comes after is held until then).
    this.#resumes.hold(session, subscription);
    const { history } = localRoute;
    const joinedAt = history.known ? history.position : undefined;
    await localRoute.registering;
    return this.#resume(session, subscription, localRoute, onEvent, joinedAt ?? history.start);
  }

  /** A REGISTER reply was written to the session: what its REGISTERs of events with history held for it follows. */
  replied(session: Session): void {
    if (this.#resumes.size > 0) this.#resumes.replied(session);
  }

  /**
   * This node wrote its routes to Redis again (it had lost Redis, or Redis its data): each route of an event with
   * history reads its position, and what was appended meanwhile without reaching this node is let through, or, gone
   * from the history, told to the route's subscribers with the next notification.
   */
  catchUp(): void {
    for (const event of this.#options.histories.keys()) {
      for (const shape of this.#events.get(event)?.values() ?? []) {
        for (const localRoute of shape.routes.values()) {
          if (!hasHistory(localRoute)) continue;
          this.#options.broker.history(localRoute.route).then((read) => localRoute.history.reach(read), () => {}); // the next arrival fills it then
        }
      }
    }
  }

  /** Connections here holding a subscription to `event` (its route's event name), each counted once: presence. */
  subscribersOf(event: string): number {
    const sessions = new Set<Session>();
    for (const shape of this.#events.get(event)?.values() ?? []) {
      for (const localRoute of shape.routes.values()) {
        for (const subscription of membersOf(localRoute.subscriptions)) for (const session of membersOf(subscription.sessions)) sessions.add(session);
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
   * `positions`: an event with history's, per route key: each route's history lets it through in order (`json`:
   * eventData as JSON, when the broker has it).
   */
  deliver(event: string, eventData: Record<string, unknown>, positions?: ReadonlyMap<string, Position>, json?: string): void {
    const start = performance.now();
    if (positions !== undefined) return this.#deliverPositioned(event, eventData, positions, json, start);
    this.#metrics.deliveriesIn.inc();
    let matched: Subscription[];
    try {
      matched = this.#matching(event, eventData);
    } catch (error) {
      return this.#options.contain('fan_out', error);
    }
    if (matched.length > 0) this.#fanOuts.run(this.#fanOuts.writes(matched, eventData), start);
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
    if (session.unsentBytes > this.#options.maxBufferedBytes) {
      this.#dropped(kind, 'slow_client');
      this.shed(session, 'unsent');
      return false;
    }
    session.send(frame, this.#out);
    this.lag.wrote(session, frame.length);
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
      const localRoute = valuesKey === undefined ? undefined : shape.routes.get(valuesKey);
      if (localRoute) for (const subscription of membersOf(localRoute.subscriptions)) matched.push(subscription);
    }
    return matched;
  }

  #join(session: Session, route: Route, eventId: string, onEvent: OnEvent): Subscription {
    const localRoute = this.#localRouteFor(route);
    let subscription = findIn(localRoute.subscriptions, (each) => each.eventId === eventId);
    if (!subscription) {
      // The protocol's own string constant, not the one parsed from this client's frame.
      const eventType = onEvent.eventType === EventType.INSTANCES ? EventType.INSTANCES : EventType.CUSTOM_WS_EVENTS;
      subscription = { eventId, eventType, getEventData: onEvent.getEventData === true, select: onEvent.select, localRoute, sessions: undefined };
      localRoute.subscriptions = addTo(localRoute.subscriptions, subscription);
    }
    subscription.sessions = addTo(subscription.sessions, session);
    session.subscriptions = addTo(session.subscriptions, subscription);
    this.#metrics.subscriptions.inc();
    return subscription;
  }

  #leave(session: Session, subscription: Subscription): void {
    if (this.#resumes.size > 0) this.#resumes.forget(session, subscription);
    const before = sizeOf(subscription.sessions);
    subscription.sessions = removeFrom(subscription.sessions, session);
    if (sizeOf(subscription.sessions) === before) return;
    this.#metrics.subscriptions.dec();
    if (subscription.sessions !== undefined) return;
    const { localRoute } = subscription;
    localRoute.subscriptions = removeFrom(localRoute.subscriptions, subscription);
    if (localRoute.subscriptions === undefined) this.#dropLocalRoute(localRoute);
  }

  #localRouteFor(route: Route): LocalRoute {
    let shapes = this.#events.get(route.event);
    if (!shapes) this.#events.set(route.event, (shapes = new Map()));
    const shapeKey = shapeKeyOf(route.fields);
    let shape = shapes.get(shapeKey);
    if (!shape) shapes.set(shapeKey, (shape = { event: route.event, fields: route.fields, routes: new Map() }));
    let localRoute = shape.routes.get(route.valuesKey);
    if (!localRoute) {
      // Held for as long as the route has subscribers: parsed from each client's frame, the event's name and the
      // fields array would be copies of their own, so the shape's are kept instead.
      const held: Route = { ...route, event: shape.event, fields: shape.fields };
      const config = this.#options.histories.get(route.event);
      const created: LocalRoute = config === undefined ? { route: held, subscriptions: undefined, registering: undefined } : new LocalRouteWithHistory(held, config, this.#routeHistories);
      const added = this.#options.broker.addRoute(held);
      created.registering = (hasHistory(created) ? this.#begin(created, added) : added).then(() => {
        created.registering = undefined;
      });
      localRoute = created;
      shape.routes.set(route.valuesKey, localRoute);
      this.#metrics.routes.inc();
    }
    return localRoute;
  }

  /** Once the route is registered (emits after it reach this node), its position is read: deliveries wait for it. */
  #begin(localRoute: LocalRouteWithHistory, added: Promise<void>): Promise<void> {
    return added
      .then(() => this.#options.broker.history(localRoute.route))
      .then((read) => localRoute.history.begin(read), () => localRoute.history.begin(undefined));
  }

  /**
   * The reply to a REGISTER entry of an event with history, with the route's position `at` when the session joined
   * (its frames after it are held, and follow the reply), and with `since` the replay of what the client missed up to
   * it; both are written once the reply is (Resumes).
   */
  async #resume(session: Session, subscription: Subscription, localRoute: LocalRouteWithHistory, onEvent: OnEvent, at: Position | undefined): Promise<ValidOnEvent> {
    const valid = validOf(onEvent, subscription.eventId);
    if (at !== undefined) Object.assign(valid, at);
    const { since } = onEvent;
    if (since === undefined) {
      this.#resumes.ready(session, subscription, [], at);
      return valid;
    }
    const { result, entries, floor } = await this.#missed(localRoute, since, at);
    this.#metrics.historyRecoveries.inc({ result });
    valid.recovered = result === 'recovered';
    const replay = entries.map((entry) => this.#frameOf(subscription, entry, { offset: entry.offset, epoch: entry.epoch }));
    this.#metrics.historyReplayed.inc(replay.length);
    this.#resumes.ready(session, subscription, replay, floor ?? at);
    return valid;
  }

  /**
   * What a client missed after `since`, up to the route's position `at`, read from its history: whole, or why not.
   * A client ahead of this node (it had them from another node, which got them first) is not sent them again
   * (`floor`), unless its position is one the history never reached: Redis lost its last appends, and their offsets
   * will name other notifications.
   */
  async #missed(localRoute: LocalRouteWithHistory, since: Position, at: Position | undefined): Promise<{ result: string; entries: RouteEntry[]; floor?: Position }> {
    const none: RouteEntry[] = [];
    if (at === undefined) return { result: 'unavailable', entries: none };
    if (since.epoch !== at.epoch) return { result: 'epoch_changed', entries: none };
    const missed = at.offset - since.offset;
    const limit = localRoute.config.maxReplay;
    if (missed > limit) return { result: 'capped', entries: none };
    try {
      if (missed <= 0) {
        const now = missed === 0 ? at : await this.#options.broker.history(localRoute.route);
        const reached = now.epoch === since.epoch && now.offset >= since.offset;
        return reached ? { result: 'recovered', entries: none, floor: since } : { result: 'epoch_changed', entries: none };
      }
      const read = await this.#options.broker.history(localRoute.route, { since, upTo: at.offset, limit });
      if (read.unrecovered !== undefined) return { result: read.unrecovered, entries: none };
      return { result: 'recovered', entries: read.entries.map(({ offset, json }) => ({ offset, epoch: at.epoch, json })) };
    } catch {
      return { result: 'unavailable', entries: none };
    }
  }

  /** An emit of an event with history: each route's history lets it through in order (or holds it, or drops it). */
  #deliverPositioned(
    event: string,
    eventData: Record<string, unknown>,
    positions: ReadonlyMap<string, Position>,
    json: string | undefined,
    start: number,
  ): void {
    this.#metrics.deliveriesIn.inc();
    const shapes = this.#events.get(event);
    if (!shapes) return;
    const plain: Subscription[] = [];
    try {
      for (const [routeKey, { offset, epoch }] of positions) {
        const bars = routeKey.indexOf('|');
        const values = routeKey.indexOf('|', bars + 1);
        const localRoute = shapes.get(routeKey.slice(bars + 1, values))?.routes.get(routeKey.slice(values + 1));
        if (localRoute === undefined) continue;
        if (hasHistory(localRoute)) localRoute.history.arrive({ offset, epoch, eventData, json });
        // A node configured without this event's history (the fleet's configs differ): delivered as any emit.
        else for (const subscription of membersOf(localRoute.subscriptions)) plain.push(subscription);
      }
    } catch (error) {
      return this.#options.contain('fan_out', error);
    }
    if (plain.length > 0) this.#fanOuts.run(this.#fanOuts.writes(plain, eventData), start);
  }

  /** The route's next entry, to the sessions it has now, after the entries before it. */
  #letThrough(localRoute: LocalRouteWithHistory, entry: RouteEntry): void {
    const position = { offset: entry.offset, epoch: entry.epoch };
    const sends: Outgoing['sends'] = [];
    for (const subscription of membersOf(localRoute.subscriptions)) {
      sends.push({ subscription, frame: this.#frameOf(subscription, entry, position), sessions: [...membersOf(subscription.sessions)] });
    }
    if (sends.length === 0) return;
    localRoute.backlog.push({ position, sends });
    this.backlog.fanOutBytes += bytesOf(sends);
    if (localRoute.sending) return;
    localRoute.sending = true;
    this.#fanOuts.run(this.#backlogWrites(localRoute), performance.now());
  }

  /**
   * Ends with the route free to send again, also when a contained throw ends it early (the rest stays queued). Each
   * entry's bytes were counted in the backlog when it was let through, and are taken off as they are written.
   */
  *#backlogWrites(localRoute: LocalRouteWithHistory): Generator<boolean> {
    let unwritten = 0;
    try {
      for (let next = localRoute.backlog.shift(); next !== undefined; next = localRoute.backlog.shift()) {
        unwritten = bytesOf(next.sends);
        for (const { subscription, frame, sessions } of next.sends) {
          for (const session of sessions) {
            unwritten -= frame.length;
            this.backlog.fanOutBytes -= frame.length;
            yield this.#resumes.size > 0 && this.#resumes.offer(session, subscription, frame, next.position)
              ? false
              : this.send(session, frame, 'notification');
          }
        }
      }
    } finally {
      this.backlog.fanOutBytes -= unwritten;
      localRoute.sending = false;
    }
  }

  /** A subscription's NOTIFICATION of a history entry, with its position. */
  #frameOf(subscription: Subscription, entry: RouteEntry, position: Position): Buffer {
    let json: string | undefined;
    if (subscription.getEventData) {
      json = subscription.select
        ? JSON.stringify(project((entry.eventData ??= JSON.parse(entry.json!) as Record<string, unknown>), subscription.select))
        : (entry.json ??= JSON.stringify(entry.eventData));
    }
    return textFrame(encodeNotification(subscription.eventId, subscription.eventType, json, position, entry.afterLoss));
  }

  #dropLocalRoute({ route }: LocalRoute): void {
    const shapes = this.#events.get(route.event);
    const shapeKey = shapeKeyOf(route.fields);
    const shape = shapes?.get(shapeKey);
    if (!shapes || !shape) return;
    shape.routes.delete(route.valuesKey);
    if (shape.routes.size === 0) shapes.delete(shapeKey);
    if (shapes.size === 0) this.#events.delete(route.event);
    this.#metrics.routes.dec();
    void this.#options.broker.removeRoute(route);
  }

  /**
   * Close a client that does not read fast enough (1013): before its unsent data (or what is held for it) grows the
   * node's memory, or once it is further behind in time than websocket.maxLagMs (lag.ts).
   */
  shed(session: Session, reason: 'unsent' | 'lag', why = 'slow client: unsent data passed the bound'): void {
    this.#metrics.shed.inc({ reason });
    this.close(session);
    session.end(CloseCode.TRY_AGAIN_LATER, why);
  }
}

/** The bytes an entry of a route's history will write: its frame once per session. */
function bytesOf(sends: Outgoing['sends']): number {
  let bytes = 0;
  for (const { frame, sessions } of sends) bytes += frame.length * sessions.length;
  return bytes;
}

/** The reply's entry: the entry as the node understood it, without `since`, and its eventId. */
function validOf(onEvent: OnEvent, eventId: string): ValidOnEvent {
  if (onEvent.since === undefined) return { ...onEvent, eventId };
  const { since: _, ...asked } = onEvent;
  return { ...asked, eventId };
}
