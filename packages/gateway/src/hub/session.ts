/**
 * One connection's state on this node, and what it subscribed to: a Subscription (one eventId) on a LocalRoute, the
 * two pieces of the hub's index (local-routes.ts) that point back at sessions. Kept small: a node holds tens of
 * thousands of sessions.
 */
import type { RawData, WebSocket } from 'ws';
import type { EventType } from '@herald/protocol';
import type { ApiUser, Person, VerifiedApiToken, VerifiedPersonToken } from '../auth/authenticator.ts';
import type { Route } from '../events/routing.ts';
import { findIn, sizeOf, type OneOrMany } from './one-or-many.ts';
import type { CoalescedWrites } from '../wire/frames.ts';

/**
 * One eventId on this node: what its NOTIFICATION carries, and every session that asked for it. Only what the
 * frame needs is kept, not the REGISTER entry (its condition is the route's): at one subscription per client,
 * the entry's objects and strings would be on each client's heap.
 */
export interface Subscription {
  readonly eventId: string;
  readonly eventType: EventType;
  readonly getEventData: boolean;
  readonly select: readonly string[] | undefined;
  readonly localRoute: LocalRoute;
  sessions: OneOrMany<Session>;
}

/** One route as this node holds it: its subscriptions, and whether the fleet can route to it yet. */
export interface LocalRoute {
  readonly route: Route;
  /** One per distinct eventId on the route (they differ in select or getEventData). */
  subscriptions: OneOrMany<Subscription>;
  /** Until the broker knows this node holds the route (it never rejects); then cleared. */
  registering: Promise<void> | undefined;
}

/** What a session's socket events go to: the transport, shared by all sessions (no closures per connection). */
export interface SessionHandler {
  onFrame(session: Session, data: RawData): void;
  onClose(session: Session, code: number): void;
  onPong(session: Session, payload: Buffer): void;
}

export class Session {
  readonly socket: WebSocket;
  /**
   * The tokens the connection holds, as the authenticator keeps them (one object per token, shared by its
   * connections): who it is, and until when. A REFRESH that extends the connection replaces them.
   */
  apiToken: VerifiedApiToken;
  personToken: VerifiedPersonToken | undefined;
  readonly handler: SessionHandler;
  /** Where the expiry queue (session/expiry.ts) holds it, so that a close takes it out at once. */
  dueWith: Set<Session> | undefined;
  /** What this connection registered (most hold one: see one-or-many.ts). */
  subscriptions: OneOrMany<Subscription>;
  /** The last reply in flight: replies are written in the order of the frames they answer. */
  replying: Promise<void> | undefined;
  /** Frames read and not yet answered (the transport stops reading past a bound). */
  framesInFlight = 0;
  /** Cleared when a ping is sent, set again by the pong. */
  alive = true;
  /** Bytes written in its busy window since its last lag probe; -1 while one is in flight or it rests after one (lag.ts). */
  unprobedBytes = 0;
  /** The lag clock's tick its busy window began at. */
  unprobedSince = 0;
  /** Set once the hub has let go of this session; later closes and sends are no-ops. */
  closed = false;

  constructor(socket: WebSocket, apiToken: VerifiedApiToken, personToken: VerifiedPersonToken | undefined, handler: SessionHandler) {
    this.socket = socket;
    this.handler = handler;
    this.apiToken = apiToken;
    this.personToken = personToken;
  }

  get apiUser(): ApiUser {
    return this.apiToken.user;
  }

  get person(): Person | undefined {
    return this.personToken?.person;
  }

  /** When the first of its tokens expires, ms since the epoch: the node closes it then (4001) unless it refreshed. */
  get expiresAt(): number {
    const { personToken } = this;
    return personToken === undefined ? this.apiToken.expiresAt : Math.min(this.apiToken.expiresAt, personToken.expiresAt);
  }

  /** Whether a frame may still be written: the hub has not let go of it and its socket is open. */
  get writable(): boolean {
    return !this.closed && this.socket.readyState === this.socket.OPEN;
  }

  /**
   * Write a whole frame (wire/frames.ts) to the socket; it leaves with the other frames written to it in this turn of
   * the event loop (`writes`: the hub's, which counts them in its delivery backlog). Hub.send checks the send bound
   * before it calls this.
   */
  send(frame: Buffer, writes: CoalescedWrites): void {
    writes.write(this.socket, frame);
  }

  /** Bytes written and not yet handed to the kernel: what the send bound (websocket.maxBufferedBytes) is checked on. */
  get unsentBytes(): number {
    return this.socket.bufferedAmount;
  }

  /** Close the connection with a close frame: `code` from the protocol's catalogue tells the client what to do next. */
  end(code: number, reason: string): void {
    this.socket.close(code, reason);
  }

  get subscriptionCount(): number {
    return sizeOf(this.subscriptions);
  }

  subscription(eventId: string): Subscription | undefined {
    return findIn(this.subscriptions, (subscription) => subscription.eventId === eventId);
  }
}
