/** Parse and structurally validate client frames. Semantic checks (does the event exist?) belong to the gateway. */
import { ErrorCode, type WireError } from './codes.ts';
import {
  DEFAULT_FRAME_LIMITS,
  MAX_CRITERIA_FIELDS,
  MAX_FIELD_NAME_LENGTH,
  MAX_FRAME_DEPTH,
  MAX_SELECT_FIELDS,
  MAX_TOKEN_LENGTH,
  nestedDeeperThan,
  quoted,
  utf8Length,
  type FrameLimits,
} from './limits.ts';
import { EventType, SCHEMA_POST_BULK_INSERT, type Criteria, type OnEvent, type Position, type RefreshFrame } from './messages.ts';

export type Parsed<T> = { ok: true; value: T } | { ok: false; errors: WireError[] };

/** A REGISTER or UNREGISTER whose onEvents is an array; entries are checked one by one later. */
export interface RawEntriesFrame {
  objType: 'REGISTER' | 'UNREGISTER';
  onEvents: unknown[];
}

/** A frame whose objType is known: entries to check one by one, or a REFRESH whose tokens are strings within bounds. */
export type RawClientFrame = RawEntriesFrame | RefreshFrame;

const fail = (code: ErrorCode, message: string): { ok: false; errors: WireError[] } => ({
  ok: false,
  errors: [{ code, message }],
});

/** A JSON object: not null, not an array. */
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function parseClientFrame(text: string, limits: FrameLimits = DEFAULT_FRAME_LIMITS): Parsed<RawClientFrame> {
  let frame: unknown;
  try {
    frame = JSON.parse(text);
  } catch {
    return fail(ErrorCode.MALFORMED_JSON, 'the frame is not valid JSON');
  }
  if (!isRecord(frame)) return fail(ErrorCode.BAD_FRAME, 'the frame must be a JSON object');
  if (nestedDeeperThan(frame, MAX_FRAME_DEPTH)) {
    return fail(ErrorCode.BAD_FRAME, `the frame nests deeper than ${MAX_FRAME_DEPTH} levels`);
  }
  const { objType, onEvents } = frame;
  if (objType === 'REFRESH') return parseRefresh(frame);
  if (objType !== 'REGISTER' && objType !== 'UNREGISTER') {
    return fail(ErrorCode.UNKNOWN_OBJ_TYPE, `objType must be REGISTER, UNREGISTER or REFRESH, got ${quoted(objType)}`);
  }
  if (!Array.isArray(onEvents)) return fail(ErrorCode.BAD_FRAME, 'onEvents must be an array');
  if (onEvents.length > limits.maxEntries) {
    return fail(ErrorCode.BAD_FRAME, `a frame may hold at most ${limits.maxEntries} onEvents entries, got ${onEvents.length}`);
  }
  return { ok: true, value: { objType, onEvents } };
}

/** A token: a string of 1 to MAX_TOKEN_LENGTH characters (its signature is the gateway's to check). */
const isToken = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= MAX_TOKEN_LENGTH;

/** REFRESH: `apiToken` required, `personToken` optional (absent or null: none); other fields are ignored. */
function parseRefresh(frame: Record<string, unknown>): Parsed<RefreshFrame> {
  const { apiToken, personToken } = frame;
  if (!isToken(apiToken)) return fail(ErrorCode.BAD_FRAME, `apiToken must be a token: a string of 1 to ${MAX_TOKEN_LENGTH} characters`);
  if (personToken === undefined || personToken === null) return { ok: true, value: { objType: 'REFRESH', apiToken } };
  if (!isToken(personToken)) return fail(ErrorCode.BAD_FRAME, `personToken must be a token: a string of 1 to ${MAX_TOKEN_LENGTH} characters`);
  return { ok: true, value: { objType: 'REFRESH', apiToken, personToken } };
}

function parseCriteria(condition: unknown, limits: FrameLimits): Parsed<Criteria | undefined> {
  if (condition === undefined || condition === null) return { ok: true, value: undefined };
  if (!isRecord(condition)) return fail(ErrorCode.BAD_FRAME, 'condition must be an object');
  if (condition.conditionType !== 'RESPONSE') {
    return fail(ErrorCode.BAD_FRAME, 'condition.conditionType must be RESPONSE');
  }
  const { criteria } = condition;
  if (criteria === undefined) return { ok: true, value: undefined };
  if (!isRecord(criteria)) return fail(ErrorCode.BAD_FRAME, 'condition.criteria must be an object');
  const fields = Object.keys(criteria);
  if (fields.length > MAX_CRITERIA_FIELDS) {
    return fail(ErrorCode.BAD_FRAME, `criteria may have at most ${MAX_CRITERIA_FIELDS} fields, got ${fields.length}`);
  }
  for (const field of fields) {
    const value = criteria[field];
    // "," and "|" separate fields and parts of route keys, so they cannot be part of a field name.
    if (!isName(field) || /[,|]/.test(field)) {
      return fail(
        ErrorCode.BAD_FRAME,
        `criteria field ${quoted(field)} must be 1 to ${MAX_FIELD_NAME_LENGTH} characters without "," or "|"`,
      );
    }
    const kind = typeof value;
    if (kind !== 'string' && kind !== 'number' && kind !== 'boolean') {
      return fail(ErrorCode.CRITERIA_NOT_SCALAR, `criteria.${field} must be a string, number or boolean`);
    }
    if (kind === 'string' && utf8Length(value as string) > limits.maxCriteriaValueBytes) {
      return fail(ErrorCode.BAD_FRAME, `criteria.${field} may be at most ${limits.maxCriteriaValueBytes} bytes (UTF-8)`);
    }
  }
  return { ok: true, value: criteria as Criteria };
}

/** A name from a frame (an event, a field, a table part): a string of 1 to MAX_FIELD_NAME_LENGTH characters. */
const isName = (value: unknown): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= MAX_FIELD_NAME_LENGTH;

function parseSelect(select: unknown): Parsed<string[] | undefined> {
  if (select === undefined) return { ok: true, value: undefined };
  const fields = typeof select === 'string' ? select.split(',').map((field) => field.trim()) : select;
  if (!Array.isArray(fields) || fields.length > MAX_SELECT_FIELDS || !fields.every(isName)) {
    return fail(
      ErrorCode.BAD_FRAME,
      `select must be at most ${MAX_SELECT_FIELDS} field names (1 to ${MAX_FIELD_NAME_LENGTH} characters), as an array or a comma-separated string`,
    );
  }
  return { ok: true, value: fields as string[] };
}

/** An epoch as the gateway makes them (base64url), and no longer than this: a client's `since` names one. */
const EPOCH = /^[A-Za-z0-9_-]{1,64}$/;

/** `since`: where a client resumes a history; absent (or null) is fine, anything but a sound position is not. */
function parseSince(since: unknown): Parsed<Position | undefined> {
  if (since === undefined || since === null) return { ok: true, value: undefined };
  if (isRecord(since) && Number.isSafeInteger(since.offset) && (since.offset as number) >= 0 && typeof since.epoch === 'string' && EPOCH.test(since.epoch)) {
    return { ok: true, value: { offset: since.offset as number, epoch: since.epoch } };
  }
  return fail(ErrorCode.BAD_FRAME, 'since must be {"offset": <a non-negative integer>, "epoch": "<up to 64 of A-Z a-z 0-9 _ ->"}');
}

/** One REGISTER entry: shape only. `select` may be an array or "a,b" as API Maker accepts both. */
export function parseOnEvent(entry: unknown, limits: FrameLimits = DEFAULT_FRAME_LIMITS): Parsed<OnEvent> {
  if (!isRecord(entry)) return fail(ErrorCode.BAD_FRAME, 'each onEvents entry must be an object');
  const { eventType } = entry;
  if (eventType !== EventType.CUSTOM_WS_EVENTS && eventType !== EventType.INSTANCES) {
    return fail(ErrorCode.UNKNOWN_EVENT_TYPE, `eventType ${quoted(eventType)} is not supported`);
  }
  if (!isName(entry.apiName)) {
    return fail(ErrorCode.BAD_FRAME, `apiName must be a string of 1 to ${MAX_FIELD_NAME_LENGTH} characters`);
  }
  const table = eventType === EventType.INSTANCES ? parseTable(entry) : { ok: true as const, value: {} };
  if (!table.ok) return table;
  if (entry.getEventData !== undefined && typeof entry.getEventData !== 'boolean') {
    return fail(ErrorCode.BAD_FRAME, 'getEventData must be a boolean');
  }
  const criteria = parseCriteria(entry.condition, limits);
  if (!criteria.ok) return criteria;
  const select = parseSelect(entry.select);
  if (!select.ok) return select;
  const since = parseSince(entry.since);
  if (!since.ok) return since;
  const onEvent: OnEvent = {
    eventType,
    apiName: entry.apiName,
    ...table.value,
    getEventData: entry.getEventData ?? true,
  };
  if (select.value) onEvent.select = select.value;
  if (criteria.value) onEvent.condition = { conditionType: 'RESPONSE', criteria: criteria.value };
  if (since.value) onEvent.since = since.value;
  return { ok: true, value: onEvent };
}

/** An INSTANCES entry: SCHEMA_POST_BULK_INSERT of a named instance, database and collection. */
function parseTable(entry: Record<string, unknown>): Parsed<Pick<OnEvent, 'instance' | 'database' | 'collection'>> {
  if (entry.apiName !== SCHEMA_POST_BULK_INSERT) {
    return fail(ErrorCode.UNKNOWN_EVENT, `INSTANCES events are ${SCHEMA_POST_BULK_INSERT}, not ${quoted(entry.apiName)}`);
  }
  const { instance, database, collection } = entry;
  for (const [field, value] of Object.entries({ instance, database, collection })) {
    if (!isName(value) || !/^[A-Za-z0-9_.-]+$/.test(value)) {
      return fail(ErrorCode.BAD_FRAME, `${field} must name the ${field} (letters, digits, "_", "." and "-"; at most ${MAX_FIELD_NAME_LENGTH})`);
    }
  }
  return { ok: true, value: { instance: instance as string, database: database as string, collection: collection as string } };
}

export function parseEventId(entry: unknown): Parsed<string> {
  if (!isRecord(entry) || !isName(entry.eventId)) {
    return fail(ErrorCode.BAD_FRAME, 'each UNREGISTER entry must be {"eventId": "<id>"}');
  }
  return { ok: true, value: entry.eventId };
}
