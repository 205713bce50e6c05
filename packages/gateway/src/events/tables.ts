/**
 * The tables the config declares: who may read and who may write each, and which of its columns the table API
 * never shows. The table API and INSTANCES registrations ask here.
 */
import { API_TOKEN_HEADER, isRecord, PERSON_TOKEN_HEADER } from '@herald/protocol';
import type { ApiUser, Person } from '../auth/authenticator.ts';
import type { AccessLevel, Config, TableAccess } from '../config/schema.ts';
import type { Filter, Row } from '../data/data-source.ts';
import { GatewayError } from '../errors.ts';

export interface TableRef {
  instance: string;
  database: string;
  collection: string;
}

/** Who is asking: an API user and a person when their tokens were given and good. */
export interface Caller {
  apiUser: ApiUser | undefined;
  person: Person | undefined;
}

/** Reading covers GET and following the table's inserts (INSTANCES); writing covers saves. */
export type TableUse = keyof TableAccess;

/** A declared table, as the table API may show it. */
export class Table {
  readonly name: string;
  readonly access: Readonly<TableAccess>;
  readonly #hidden: ReadonlySet<string>;

  constructor(name: string, access: Readonly<TableAccess>, hidden: ReadonlySet<string>) {
    this.name = name;
    this.access = access;
    this.#hidden = hidden;
  }

  /** The row without its hidden columns (the row itself when the table hides none). */
  visible(row: Row): Row {
    if (this.#hidden.size === 0) return row;
    const shown: Row = {};
    for (const [column, value] of Object.entries(row)) if (!this.#hidden.has(column)) shown[column] = value;
    return shown;
  }

  /**
   * Throws BAD_REQUEST for a filter on a hidden column: its answers would tell the column's values one by one. A part
   * of `$and` that is not a filter is left to the data source's check of the filter language (data/filter.ts).
   */
  checkFind(filter: Filter, path = 'find'): void {
    for (const [key, condition] of Object.entries(filter)) {
      if (key === '$and' && Array.isArray(condition)) {
        condition.forEach((part, i) => isRecord(part) && this.checkFind(part, `${path}.$and[${i}]`));
      } else if (this.#hidden.has(key.split('.', 1)[0] as string)) {
        throw new GatewayError('BAD_REQUEST', `${path}: column ${key} cannot be searched (the table hides it)`);
      }
    }
  }
}

const NEEDS: Record<Exclude<AccessLevel, 'none' | 'public'>, string> = {
  apiUser: `an API user token (${API_TOKEN_HEADER})`,
  both: `an API user token (${API_TOKEN_HEADER}) and a person token (${PERSON_TOKEN_HEADER})`,
};

export class TableCatalogue {
  readonly #tables = new Map<string, Table>();

  constructor({ instances, tokenGenerators }: Pick<Config, 'instances' | 'tokenGenerators'>) {
    const passwordColumns = new Map<string, string[]>();
    for (const { instance, database, collection, passwordColumn } of Object.values(tokenGenerators)) {
      const name = `${instance}/${database}/${collection}`;
      passwordColumns.set(name, [...(passwordColumns.get(name) ?? []), passwordColumn]);
    }
    for (const [instance, { databases }] of Object.entries(instances)) {
      for (const [database, { collections }] of Object.entries(databases)) {
        for (const [collection, { access, hidden }] of Object.entries(collections)) {
          const name = `${instance}/${database}/${collection}`;
          this.#tables.set(name, new Table(name, access, new Set([...hidden, ...(passwordColumns.get(name) ?? [])])));
        }
      }
    }
  }

  /**
   * The table, if the caller may use it so. Throws NOT_FOUND for an undeclared table, TABLE_FORBIDDEN when nobody
   * may, TOKEN_MISSING or PERSON_TOKEN_REQUIRED when the caller lacks a token.
   */
  check({ instance, database, collection }: TableRef, caller: Caller, use: TableUse): Table {
    const name = `${instance}/${database}/${collection}`;
    const table = this.#tables.get(name);
    if (table === undefined) throw new GatewayError('NOT_FOUND', `no table ${name}`);
    const level = table.access[use];
    if (level === 'public') return table;
    const using = use === 'read' ? 'reading' : 'writing';
    if (level === 'none') throw new GatewayError('TABLE_FORBIDDEN', `table ${name} allows no ${using} through the table API`);
    if (!caller.apiUser) throw new GatewayError('TOKEN_MISSING', `${using} this table needs ${NEEDS[level]}`);
    if (level === 'both' && !caller.person) {
      throw new GatewayError('PERSON_TOKEN_REQUIRED', `${using} this table needs a person token too (${PERSON_TOKEN_HEADER})`);
    }
    return table;
  }
}
