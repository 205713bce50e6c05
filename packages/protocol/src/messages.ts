/** Frames on the wire, as API Maker WebSocket clients speak them. */
import type { WireError } from './codes.ts';

/** A criteria value: equality is compared on the value's string form, so 2 and "2" match. */
export type Scalar = string | number | boolean;
export type Criteria = Record<string, Scalar>;

export const EventType = {
  /** Events the application emits over HTTP (emit-event-ws). */
  CUSTOM_WS_EVENTS: 'CUSTOM_WS_EVENTS',
  /** Events of a table: rows saved through the table API (apiName SCHEMA_POST_BULK_INSERT). */
  INSTANCES: 'INSTANCES',
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

export interface Condition {
  conditionType: 'RESPONSE';
  criteria: Criteria;
}

/**
 * A place in a route's history (events with `history` in the node's config): the notification's `offset`, counted
 * from 1 per route, and the history's `epoch`, which changes when the fleet lost the history (offsets then start
 * again). A client that remembers the last one it got can resume from it (`since`).
 */
export interface Position {
  offset: number;
  epoch: string;
}

/** The apiName of an INSTANCES event: rows were saved in the named collection. */
export const SCHEMA_POST_BULK_INSERT = 'SCHEMA_POST_BULK_INSERT';

/** One entry of a REGISTER frame's onEvents. */
export interface OnEvent {
  eventType: EventType;
  apiName: string;
  /** INSTANCES events name the collection whose saves they follow. */
  instance?: string;
  database?: string;
  collection?: string;
  /** Default true: the notification carries eventData. */
  getEventData: boolean;
  /** Field names to keep from eventData; absent means all of it. */
  select?: string[];
  condition?: Condition;
  /** Resume after this position: the node replays what the client missed (events with history only). */
  since?: Position;
}

export interface RegisterFrame {
  objType: 'REGISTER';
  onEvents: OnEvent[];
}

export interface UnregisterFrame {
  objType: 'UNREGISTER';
  onEvents: { eventId: string }[];
}

/** New tokens for an open connection: the same API user and person, later expiry; subscriptions stay. */
export interface RefreshFrame {
  objType: 'REFRESH';
  apiToken: string;
  /** Required when the connection has a person, and only then. */
  personToken?: string | undefined;
}

export type ClientFrame = RegisterFrame | UnregisterFrame | RefreshFrame;

/** An accepted entry: as the node understood it (without `since`), its eventId, and for an event with history its position. */
export interface ValidOnEvent extends Omit<OnEvent, 'since'> {
  eventId: string;
  /** The route's last offset as of this registration: the next NOTIFICATION after the replay carries offset + 1. */
  offset?: number;
  epoch?: string;
  /** With `since`: whether every notification after it was replayed (false: the client should fetch its state anew). */
  recovered?: boolean;
}

/** An entry the node refused: the entry's own fields echoed back (or `entry` if it was not an object), and why. */
export interface InvalidOnEvent {
  [field: string]: unknown;
  errors: WireError[];
}

export interface ConnectedFrame {
  type: 'CONNECTED';
  response: { connected: true };
}

export interface TokenValidationFrame {
  type: 'TOKEN_VALIDATION';
  errors: WireError[];
}

export interface RegisterReply {
  type: 'REGISTER';
  response: { validOnEvents: ValidOnEvent[]; invalidOnEvents: InvalidOnEvent[] };
}

export interface UnregisterReply {
  type: 'UNREGISTER';
  response: { validOnEvents: { eventId: string }[]; invalidOnEvents: InvalidOnEvent[] };
}

export interface NotificationFrame {
  type: 'NOTIFICATION';
  /**
   * `offset` and `epoch`: for an event with history only. `recovered: false`: notifications of this subscription
   * before this one were lost while the connection stayed open (a gap its history could not fill, or a new epoch).
   */
  response: { eventId: string; eventType: EventType; offset?: number; epoch?: string; recovered?: false; eventData?: unknown };
}

/** The connection's tokens expire at `expiresAt` (ms since the epoch): send REFRESH before then, or be closed with 4001. */
export interface TokenExpiringFrame {
  type: 'TOKEN_EXPIRING';
  response: { expiresAt: number };
}

/** The answer to REFRESH: the connection's new expiry, or why the tokens were refused (the connection is left as it was). */
export type RefreshReply = { type: 'REFRESH'; response: { expiresAt: number } } | { type: 'REFRESH'; errors: WireError[] };

/** A frame the node could not act on at all (malformed JSON, unknown objType). */
export interface ErrorFrame {
  type: 'ERROR';
  errors: WireError[];
}

export type ServerFrame =
  | ConnectedFrame
  | TokenValidationFrame
  | RegisterReply
  | UnregisterReply
  | NotificationFrame
  | TokenExpiringFrame
  | RefreshReply
  | ErrorFrame;

/** The HTTP envelope of every system API answer. */
export interface Envelope<T> {
  success: boolean;
  statusCode: number;
  data?: T;
  errors?: WireError[];
}

export interface TokenGrant {
  token: string;
  refresh_token: string;
  /** Seconds until `token` expires. */
  expires_in: number;
}
