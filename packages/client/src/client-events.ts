/** The events a HeraldClient tells the application of (HeraldClient.on), and their payloads. */
import type { OnEvent, WireError } from '@herald/protocol';
import type { EventMap, Notification } from './typed.ts';

export interface CloseInfo {
  code: number;
  reason: string;
}

export interface DisconnectedEvent extends CloseInfo {
  /** TOKEN_VALIDATION errors when a handshake was refused; otherwise empty. */
  errors: WireError[];
  willReconnect: boolean;
  /** The wait before the next attempt, when there is one. */
  delayMs: number | undefined;
}

/** A subscription the node did not accept again after a reconnect; the client no longer holds it. */
export interface RefusedSubscription {
  /** The handle the application knows. */
  eventId: string;
  onEvent: OnEvent;
  errors: WireError[];
}

export interface ReconnectedEvent {
  /** Which attempt since the connection ended succeeded (1 = the first). */
  attempt: number;
  /** Handles registered again; notifications keep carrying them. */
  registered: string[];
  refused: RefusedSubscription[];
  /**
   * Per handle of an event with history that resumed from its last position: true when every notification it
   * missed was replayed (they came through 'notification' before this event), false when the gateway's history
   * no longer reached back (fetch the state anew).
   */
  recovered: Record<string, boolean>;
}

/**
 * Notifications of a subscription of an event with history were lost while it stayed connected: they started a new
 * epoch (the gateway lost their history), or the gateway marked the next one `recovered: false` (a gap its history
 * could no longer fill). The notification that told it is delivered right after.
 */
export interface HistoryLostEvent {
  /** The handle. */
  eventId: string;
}

export interface ClientEvents<E extends object = EventMap> {
  notification: Notification<E>;
  /** After every close: of an open connection, of a failed attempt, and of close() by the application. */
  disconnected: DisconnectedEvent;
  /** Open again, with the held subscriptions registered again. */
  reconnected: ReconnectedEvent;
  /** The connection took new tokens in band (REFRESH): the node keeps it open until `expiresAt` (ms). */
  refreshed: { expiresAt: number };
  /** Notifications of a live subscription were lost (its history was lost, or could not fill a gap): fetch the state anew. */
  historyLost: HistoryLostEvent;
  /**
   * getTokens failed (the held tokens are used), a frame answered nothing, or the node refused a REFRESH (then it
   * closes the connection at its tokens' expiry, 4001, and the client reconnects). The client carries on.
   */
  error: Error;
}
