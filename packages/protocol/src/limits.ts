/**
 * Limits on what the gateway takes from outside (frames, emit bodies, table rows). Each bounds the memory or the
 * work one input can cause. JSON.parse reads any depth without trouble, but JSON.stringify and every recursive walk
 * of a value (select, structuredClone, an echo in a reply) overflow the stack a few thousand levels down: such a
 * value is refused where it comes in, never met later.
 */

/** Nesting a value from outside may have: objects and arrays inside one another. */
export const MAX_JSON_DEPTH = 64;

/** Nesting a client frame may have: a REGISTER entry's deepest part (criteria values) is at depth 5. */
export const MAX_FRAME_DEPTH = 16;

/** Fields in one criteria: each is a part of the route key, and of every lookup an emit makes. */
export const MAX_CRITERIA_FIELDS = 16;

/** Characters of a name in a frame: an event, a criteria or select field, a table part, an eventId. */
export const MAX_FIELD_NAME_LENGTH = 128;

/** Characters of a token in a REFRESH frame: a person token carries its generator's columns, yet stays far below this. */
export const MAX_TOKEN_LENGTH = 8192;

/** Field names in one select. */
export const MAX_SELECT_FIELDS = 64;

/** Limits of a client frame that a node may set (config `websocket`). */
export interface FrameLimits {
  /** Entries in one REGISTER or UNREGISTER frame. */
  maxEntries: number;
  /** UTF-8 bytes of a criteria value's string form: the node keeps it in its index and in Redis for as long as the route lives. */
  maxCriteriaValueBytes: number;
}

export const DEFAULT_FRAME_LIMITS: Readonly<FrameLimits> = Object.freeze({ maxEntries: 100, maxCriteriaValueBytes: 256 });

/**
 * Whether `value` nests objects or arrays deeper than `maxDepth` (a scalar is depth 0, `{}` and `[]` depth 1). Its
 * recursion stops at maxDepth + 1 levels, so it cannot overflow the stack on the values it exists to refuse; a flat
 * object costs one loop over its fields and no allocation (every emit passes here).
 */
export function nestedDeeperThan(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (maxDepth <= 0) return true;
  if (Array.isArray(value)) {
    for (const item of value) if (nestedDeeperThan(item, maxDepth - 1)) return true;
    return false;
  }
  const record = value as Record<string, unknown>;
  for (const key in record) if (nestedDeeperThan(record[key], maxDepth - 1)) return true;
  return false;
}

/** UTF-8 bytes of `text` (no Buffer: the protocol package also runs in browsers). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

const isLowSurrogate = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff;

/** A value from outside, quoted for an error message and cut short: a message never grows with the input. */
export function quoted(value: unknown, maxLength = 64): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length <= maxLength ? text : `${text.slice(0, maxLength)}… (${text.length} characters)`;
}
