/** Encoders for server frames. The NOTIFICATION encoder is on the hot path: it serialises eventData once. */
import type { WireError } from './codes.ts';
import type { EventType, Position, ServerFrame } from './messages.ts';

export function encodeFrame(frame: ServerFrame): string {
  return JSON.stringify(frame);
}

export const CONNECTED_FRAME = encodeFrame({ type: 'CONNECTED', response: { connected: true } });

/** TOKEN_EXPIRING: the connection's tokens expire at `expiresAt` (ms). */
export function encodeTokenExpiring(expiresAt: number): string {
  return encodeFrame({ type: 'TOKEN_EXPIRING', response: { expiresAt } });
}

export function encodeErrors(type: 'TOKEN_VALIDATION' | 'ERROR', errors: WireError[]): string {
  return encodeFrame({ type, errors });
}

/**
 * A NOTIFICATION's text, for every recipient that registered the same subscription (same eventId).
 * `eventDataJson` is already serialised (undefined when the subscriber asked for getEventData:false). `position`:
 * an event with history's; its fields come before eventData, so a reader scanning the bytes finds ours first.
 * `afterLoss`: notifications of the subscription before this one were lost (`"recovered":false`, after the position).
 */
export function encodeNotification(eventId: string, eventType: EventType, eventDataJson: string | undefined, position?: Position, afterLoss = false): string {
  const data = eventDataJson === undefined ? '' : `,"eventData":${eventDataJson}`;
  const at = position === undefined ? '' : `,"offset":${position.offset},"epoch":${JSON.stringify(position.epoch)}${afterLoss ? ',"recovered":false' : ''}`;
  return `{"type":"NOTIFICATION","response":{"eventId":${JSON.stringify(eventId)},"eventType":"${eventType}"${at}${data}}}`;
}
