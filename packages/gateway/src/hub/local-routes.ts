/**
 * The hub's index, piece by piece: event -> Shape -> LocalRoute -> Subscription -> sessions (see hub.ts; the last two,
 * which a session refers to, are in session.ts). A route of an event with history is a LocalRouteWithHistory, so that
 * the others carry none of its state.
 */
import type { Position } from '@herald/protocol';
import type { HistoryConfig } from '../config/schema.ts';
import type { Route } from '../events/routing.ts';
import type { OneOrMany } from './one-or-many.ts';
import { RouteHistory, type RouteHistoryHost } from './route-history.ts';
import type { LocalRoute, Session, Subscription } from './session.ts';

/** A route of an event with history: a class of its own, so that the others carry none of this. */
export class LocalRouteWithHistory implements LocalRoute {
  readonly route: Route;
  subscriptions: OneOrMany<Subscription> = undefined;
  registering: Promise<void> | undefined = undefined;
  readonly history: RouteHistory<LocalRouteWithHistory>;
  readonly config: HistoryConfig;
  /** Entries let through, waiting for the fan-out of those before them (a route of many sessions fans out in chunks). */
  backlog: Outgoing[] = [];
  sending = false;

  constructor(route: Route, config: HistoryConfig, host: RouteHistoryHost<LocalRouteWithHistory>) {
    this.route = route;
    this.config = config;
    this.history = new RouteHistory(host, this, config.size);
  }
}

/** One entry of a route's history on its way to the route's sessions, as they were when it was let through. */
export interface Outgoing {
  position: Position;
  sends: Array<{ subscription: Subscription; frame: Buffer; sessions: Session[] }>;
}

export const hasHistory = (localRoute: LocalRoute): localRoute is LocalRouteWithHistory => localRoute instanceof LocalRouteWithHistory;

export interface Shape {
  /** The event's name and field names as first seen: every route the shape holds shares these strings. */
  readonly event: string;
  readonly fields: readonly string[];
  readonly routes: Map<string, LocalRoute>;
}
