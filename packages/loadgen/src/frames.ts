/**
 * What wsload sends and reads on the wire. Server frames are classified by their first bytes and `sentAt` is
 * read straight from the bytes: a listener receiving tens of thousands of notifications a second must not
 * parse each one (its garbage would be the p99 tail of the figures).
 */

/** Milliseconds since the epoch, with sub-millisecond resolution, comparable across processes on one machine. */
export function clockMs(): number {
  return performance.timeOrigin + performance.now();
}

export type FrameType = 'CONNECTED' | 'REGISTER' | 'NOTIFICATION' | 'TOKEN_VALIDATION' | 'ERROR' | 'OTHER';

const PREFIXES: ReadonlyArray<[FrameType, Buffer]> = (
  ['NOTIFICATION', 'CONNECTED', 'REGISTER', 'TOKEN_VALIDATION', 'ERROR'] as const
).map((type) => [type, Buffer.from(`{"type":"${type}"`)]);

export function frameType(frame: Buffer): FrameType {
  for (const [type, prefix] of PREFIXES) {
    if (frame.length >= prefix.length && frame.compare(prefix, 0, prefix.length, 0, prefix.length) === 0) return type;
  }
  return 'OTHER';
}

const ALL_VALID = Buffer.from('"invalidOnEvents":[]');

/** A REGISTER reply whose entries were all accepted. */
export function registerAccepted(frame: Buffer): boolean {
  return frame.includes(ALL_VALID);
}

/** The first error code of a refusal frame, for counting failures by reason. */
export function firstErrorCode(frame: Buffer): string {
  return /"code":"([A-Z_]+)"/.exec(frame.toString())?.[1] ?? 'UNKNOWN';
}

const SENT_AT = Buffer.from('"sentAt":');
const ZERO = 0x30;
const NINE = 0x39;
const DOT = 0x2e;

/** The number after `"sentAt":` (ms), or NaN when the frame has none. Reads bytes: no string is made. */
export function sentAtOf(frame: Buffer): number {
  const at = frame.indexOf(SENT_AT);
  if (at < 0) return NaN;
  let value = 0;
  let scale = 0;
  let digits = 0;
  for (let i = at + SENT_AT.length; i < frame.length; i++) {
    const byte = frame[i]!;
    if (byte === DOT && scale === 0) {
      scale = 1;
    } else if (byte >= ZERO && byte <= NINE) {
      value = value * 10 + (byte - ZERO);
      if (scale > 0) scale *= 10;
      digits++;
    } else {
      break;
    }
  }
  if (digits === 0) return NaN;
  return scale > 0 ? value / scale : value;
}

/** One REGISTER frame: one event, criteria `recipientId` when given, and `since` to resume a history from. */
export function registerFrame(event: string, recipientId: string | undefined, since?: FramePosition): string {
  const onEvent: Record<string, unknown> = { eventType: 'CUSTOM_WS_EVENTS', apiName: event };
  if (recipientId !== undefined) onEvent.condition = { conditionType: 'RESPONSE', criteria: { recipientId } };
  if (since !== undefined) onEvent.since = since;
  return JSON.stringify({ objType: 'REGISTER', onEvents: [onEvent] });
}

/** A position in a route's history (an event with history), as NOTIFICATION frames and REGISTER replies carry it. */
export interface FramePosition {
  offset: number;
  epoch: string;
}

const OFFSET = Buffer.from('"offset":');
const EPOCH = Buffer.from(',"epoch":"');
const QUOTE = 0x22;

/**
 * The first `"offset":N,"epoch":"E"` of a frame: a NOTIFICATION's (before its eventData, so never the emitter's own
 * fields) or a REGISTER reply's one entry; undefined without one.
 */
export function positionOf(frame: Buffer): FramePosition | undefined {
  const at = frame.indexOf(OFFSET);
  if (at < 0) return undefined;
  let offset = 0;
  let i = at + OFFSET.length;
  for (; i < frame.length && frame[i]! >= ZERO && frame[i]! <= NINE; i++) offset = offset * 10 + (frame[i]! - ZERO);
  if (frame.compare(EPOCH, 0, EPOCH.length, i, i + EPOCH.length) !== 0) return undefined;
  const end = frame.indexOf(QUOTE, i + EPOCH.length);
  return end < 0 ? undefined : { offset, epoch: frame.toString('latin1', i + EPOCH.length, end) };
}

const NOT_RECOVERED = Buffer.from('"recovered":false');

/** A REGISTER reply saying its resume did not reach back. */
export function notRecovered(frame: Buffer): boolean {
  return frame.includes(NOT_RECOVERED);
}
