/**
 * Routes: how a subscription and an emit meet without a scan.
 *
 * A subscription's criteria has a shape (its sorted field names) and values. An emit's eventData yields, for
 * each shape in use for the event, one values key; a map lookup then finds the subscribers. The same keys
 * name routes across the fleet (the broker's registry), so they must be stable strings.
 */
import { createHash } from 'node:crypto';
import { EventType, SCHEMA_POST_BULK_INSERT, type Criteria, type OnEvent, type Scalar } from '@herald/protocol';

/** A route: an event, a criteria shape, and the values of that shape's fields. */
export interface Route {
  readonly event: string;
  /** Sorted criteria field names; empty for subscribers without criteria (they get every emit). */
  readonly fields: readonly string[];
  readonly valuesKey: string;
  /** `<event>|<shapeKey>|<valuesKey>`: unique across the fleet. */
  readonly key: string;
}

/** The internal event name of a table's inserts: it routes like any event name (it holds no "|"). */
export function tableEvent(instance: string, database: string, collection: string): string {
  return `${SCHEMA_POST_BULK_INSERT}:${instance}/${database}/${collection}`;
}

/** The event name a REGISTER entry routes under. */
export function routeEventOf(onEvent: OnEvent): string {
  if (onEvent.eventType !== EventType.INSTANCES) return onEvent.apiName;
  return tableEvent(onEvent.instance ?? '', onEvent.database ?? '', onEvent.collection ?? '');
}

/** Equality is on the string form of scalars, so `2` and `"2"` match (JSON clients disagree on id types). */
export function scalarString(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
    case 'boolean':
      return String(value);
    default:
      return undefined;
  }
}

export const shapeKeyOf = (fields: readonly string[]): string => fields.join(',');

/** Length-prefixed when there are several values, so no value can forge a separator. */
function joinValues(values: readonly string[]): string {
  if (values.length === 1) return values[0] as string;
  let key = '';
  for (const value of values) key += `${value.length}:${value}`;
  return key;
}

export function routeKeyOf(event: string, shapeKey: string, valuesKey: string): string {
  return `${event}|${shapeKey}|${valuesKey}`;
}

export function routeOf(event: string, criteria: Criteria | undefined): Route {
  const fields = criteria ? Object.keys(criteria).sort() : [];
  const valuesKey = joinValues(fields.map((field) => scalarString((criteria as Criteria)[field] as Scalar) as string));
  return { event, fields, valuesKey, key: routeKeyOf(event, shapeKeyOf(fields), valuesKey) };
}

/** The values key that `eventData` has for a shape, or undefined when a field is missing or not a scalar. */
export function valuesKeyIn(eventData: Record<string, unknown>, fields: readonly string[]): string | undefined {
  if (fields.length === 1) return scalarString(eventData[fields[0] as string]);
  const values: string[] = [];
  for (const field of fields) {
    const value = scalarString(eventData[field]);
    if (value === undefined) return undefined;
    values.push(value);
  }
  return joinValues(values);
}

/**
 * A subscription's id is a digest of what was asked for, so every connection that registers the same thing
 * shares it, and one encoded NOTIFICATION serves them all. Registering the same thing twice is idempotent.
 */
export function eventIdOf(route: Route, onEvent: OnEvent): string {
  const asked = JSON.stringify([route.key, onEvent.select ?? null, onEvent.getEventData]);
  // 128 bits of the digest, encoded on their own: a slice of a longer string would keep the whole alive.
  return createHash('sha256').update(asked).digest().subarray(0, 16).toString('base64url');
}

/** The fields of eventData a subscriber selected. */
export function project(eventData: Record<string, unknown>, select: readonly string[]): Record<string, unknown> {
  const projected: Record<string, unknown> = {};
  for (const field of select) if (field in eventData) projected[field] = eventData[field];
  return projected;
}
