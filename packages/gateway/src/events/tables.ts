/** The tables the config declares, and who may use each: the table API and INSTANCES registrations ask here. */
import type { ApiUser, Person } from '../auth/authenticator.ts';
import type { Config, TableAccess } from '../config/schema.ts';
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

export class TableCatalogue {
  readonly #access = new Map<string, TableAccess>();

  constructor(instances: Config['instances']) {
    for (const [instance, { databases }] of Object.entries(instances)) {
      for (const [database, { collections }] of Object.entries(databases)) {
        for (const [collection, { access }] of Object.entries(collections)) {
          this.#access.set(`${instance}/${database}/${collection}`, access);
        }
      }
    }
  }

  /** Throws NOT_FOUND for an undeclared table, TOKEN_MISSING or PERSON_TOKEN_REQUIRED when the caller lacks a token. */
  check({ instance, database, collection }: TableRef, caller: Caller): void {
    const access = this.#access.get(`${instance}/${database}/${collection}`);
    if (access === undefined) {
      throw new GatewayError('NOT_FOUND', `no table ${instance}/${database}/${collection}`);
    }
    if (access === 'public') return;
    if (!caller.apiUser) throw new GatewayError('TOKEN_MISSING', 'this table needs an API user token (x-am-authorization)');
    if (access === 'both' && !caller.person) {
      throw new GatewayError('PERSON_TOKEN_REQUIRED', 'this table needs a person token too (x-am-user-authorization)');
    }
  }
}
