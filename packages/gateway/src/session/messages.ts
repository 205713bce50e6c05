/**
 * Control messages between nodes, carried by the broker as JSON text it does not read (broker.ts: broadcast, sendTo).
 * Whatever arrives is checked before it is acted on: a message that is not one of these is refused whole (the
 * receiver counts it as a broker_message it could not deliver).
 */
import { CloseCode, isRecord, utf8Length } from '@herald/protocol';
import { subjectOf, subjectText, type Subject } from './subjects.ts';

/** Bytes a WebSocket close reason may hold (RFC 6455: 125 bytes of a close frame, 2 of them the code). */
export const MAX_CLOSE_REASON_BYTES = 123;

export type ControlMessage =
  /** Close the subject's connections with `code` (4003: may come back; 4503: may not) and `reason`. */
  | { type: 'disconnect'; subject: Subject; code: number; reason: string }
  /** The subject's tokens issued until `revokedAt` are revoked (already stored): refuse them, close what holds them. */
  | { type: 'revoke'; subject: Subject; revokedAt: number }
  /** How many connections here are the subject's, or hold a subscription to `event`: answer to node `from`. */
  | { type: 'presence'; id: string; from: string; query: PresenceQuery }
  | { type: 'presence-answer'; id: string; node: string; count: number };

export type PresenceQuery = { subject: Subject } | { event: string };

/** The message as it travels: subjects as their strings (subjects.ts). */
export function encodeControl(message: ControlMessage): string {
  switch (message.type) {
    case 'disconnect':
    case 'revoke':
      return JSON.stringify({ ...message, subject: subjectText(message.subject) });
    case 'presence': {
      const { query } = message;
      const wire = 'subject' in query ? { subject: subjectText(query.subject) } : { event: query.event };
      return JSON.stringify({ type: message.type, id: message.id, from: message.from, ...wire });
    }
    case 'presence-answer':
      return JSON.stringify(message);
  }
}

/** Throws an Error naming what is wrong with a message that is not a control message. */
export function decodeControl(text: string): ControlMessage {
  const message: unknown = JSON.parse(text);
  if (!isRecord(message)) throw new Error('a control message is not a JSON object');
  switch (message.type) {
    case 'disconnect': {
      const { code, reason } = message;
      if (code !== CloseCode.DISCONNECTED && code !== CloseCode.DISCONNECTED_FINAL) throw new Error(`a disconnect with code ${String(code)}`);
      if (typeof reason !== 'string' || utf8Length(reason) > MAX_CLOSE_REASON_BYTES) throw new Error('a disconnect without a reason that fits a close frame');
      return { type: 'disconnect', subject: subjectIn(message), code, reason };
    }
    case 'revoke':
      return { type: 'revoke', subject: subjectIn(message), revokedAt: finite(message.revokedAt, 'revokedAt') };
    case 'presence': {
      const query: PresenceQuery = typeof message.event === 'string' ? { event: message.event } : { subject: subjectIn(message) };
      return { type: 'presence', id: text1(message.id, 'id'), from: text1(message.from, 'from'), query };
    }
    case 'presence-answer':
      return { type: 'presence-answer', id: text1(message.id, 'id'), node: text1(message.node, 'node'), count: finite(message.count, 'count') };
    default:
      throw new Error(`a control message of type ${JSON.stringify(message.type)}`);
  }
}

function subjectIn(message: Record<string, unknown>): Subject {
  const subject = typeof message.subject === 'string' ? subjectOf(message.subject) : undefined;
  if (subject === undefined) throw new Error(`a control message names no subject: ${JSON.stringify(message.subject)}`);
  return subject;
}

function text1(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new Error(`a control message without ${field}`);
  return value;
}

function finite(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new Error(`a control message whose ${field} is not a number`);
  return value;
}
