/** The in-memory DataSource: MongoDB's semantics for the filters it supports, no server needed. */
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { checkFilter } from './filter.ts';
import type { CollectionRef, DataSource, Filter, FindQuery, Row } from './data-source.ts';

export class MemoryDataSource implements DataSource {
  readonly #collections = new Map<string, Row[]>();

  /** `seed` maps "database/collection" to its initial rows. */
  constructor(seed: Record<string, Row[]> = {}) {
    for (const [key, rows] of Object.entries(seed)) this.#collections.set(key, rows.map(withId));
  }

  async getAll(query: FindQuery): Promise<Row[]> {
    if (query.find) checkFilter(query.find);
    const rows = this.#collections.get(keyOf(query)) ?? [];
    const matching = query.find ? rows.filter((row) => matches(row, query.find as Filter)) : rows;
    // As in MongoDB, a limit of 0 means no limit.
    const skip = query.skip ?? 0;
    return structuredClone(matching.slice(skip, query.limit ? skip + query.limit : undefined));
  }

  async insert(target: CollectionRef, rows: Row[]): Promise<Row[]> {
    const stored = rows.map(withId);
    const key = keyOf(target);
    const existing = this.#collections.get(key);
    if (existing) existing.push(...stored);
    else this.#collections.set(key, stored);
    return structuredClone(stored);
  }

  async close(): Promise<void> {}
}

const keyOf = (ref: CollectionRef): string => `${ref.database}/${ref.collection}`;

/** Like MongoDB, every stored row has an `_id`; a 24-hex-digit string stands in for an ObjectId. */
function withId(row: Row): Row {
  return { _id: randomBytes(12).toString('hex'), ...structuredClone(row) };
}

/** Matches a filter that checkFilter accepted. */
function matches(row: Row, filter: Filter): boolean {
  for (const [field, condition] of Object.entries(filter)) {
    if (field === '$and' ? !(condition as Filter[]).every((part) => matches(row, part)) : !fieldMatches(row[field], condition)) {
      return false;
    }
  }
  return true;
}

/** MongoDB equality: a value matches an equal value, or an array field containing it. */
function equals(value: unknown, wanted: unknown): boolean {
  if (isDeepStrictEqual(value, wanted)) return true;
  if (wanted === null && value === undefined) return true;
  return Array.isArray(value) && value.some((item) => isDeepStrictEqual(item, wanted));
}

function fieldMatches(value: unknown, condition: unknown): boolean {
  if (typeof condition !== 'object' || condition === null || Array.isArray(condition)) return equals(value, condition);
  const operators = Object.keys(condition);
  if (!operators.some((key) => key.startsWith('$'))) return equals(value, condition);
  return Object.entries(condition).every(([operator, operand]) =>
    operator === '$eq' ? equals(value, operand) : (operand as unknown[]).some((wanted) => equals(value, wanted)),
  );
}
