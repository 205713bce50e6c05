/** The event catalogue: which events exist, who may register and emit them, and which criteria bind to a person. */
import { EventType, PERSON_TOKEN_QUERY, quoted, type OnEvent } from '@herald/protocol';
import type { ApiUser, Person } from '../auth/authenticator.ts';
import type { Config } from '../config/schema.ts';
import { GatewayError } from '../errors.ts';
import { scalarString } from './routing.ts';
import type { TableCatalogue } from './tables.ts';

export interface EventDefinition {
  readonly name: string;
  readonly registerGroups: ReadonlySet<string>;
  readonly emitGroups: ReadonlySet<string>;
  /** [criteria field, person column] pairs: the field is required and must equal the person's column. */
  readonly bind: ReadonlyArray<readonly [string, string]>;
}

const anyShared = (groups: ReadonlySet<string>, allowed: ReadonlySet<string>): boolean => {
  for (const group of groups) if (allowed.has(group)) return true;
  return false;
};

export class EventCatalogue {
  readonly #events = new Map<string, EventDefinition>();
  readonly #tables: TableCatalogue;

  constructor(events: Config['events'], tables: TableCatalogue) {
    this.#tables = tables;
    for (const [name, { groups, bind }] of Object.entries(events)) {
      this.#events.set(name, {
        name,
        registerGroups: new Set(groups.register),
        emitGroups: new Set(groups.emit),
        bind: Object.entries(bind),
      });
    }
  }

  /** Throws UNKNOWN_EVENT. */
  get(name: string): EventDefinition {
    const event = this.#events.get(name);
    if (!event) throw new GatewayError('UNKNOWN_EVENT', `no event named ${quoted(name)}`);
    return event;
  }

  /** The event, if `user` may emit it; throws UNKNOWN_EVENT or EVENT_FORBIDDEN. */
  forEmit(name: string, user: ApiUser): EventDefinition {
    const event = this.get(name);
    if (!anyShared(user.groups, event.emitGroups)) {
      throw new GatewayError('EVENT_FORBIDDEN', `API user ${user.name} may not emit ${name}`);
    }
    return event;
  }

  /**
   * Throws what forbids this registration: UNKNOWN_EVENT, EVENT_FORBIDDEN, PERSON_TOKEN_REQUIRED,
   * CRITERIA_NOT_YOURS; for a table's inserts, what forbids reading the table (TABLE_FORBIDDEN among them).
   */
  checkRegistration(onEvent: OnEvent, user: ApiUser, person: Person | undefined): void {
    if (onEvent.eventType === EventType.INSTANCES) {
      const { instance = '', database = '', collection = '' } = onEvent;
      try {
        this.#tables.check({ instance, database, collection }, { apiUser: user, person }, 'read');
      } catch (error) {
        if (error instanceof GatewayError && error.code === 'NOT_FOUND') throw new GatewayError('UNKNOWN_EVENT', error.message);
        throw error;
      }
      return;
    }
    const { apiName: name } = onEvent;
    const criteria = onEvent.condition?.criteria;
    const event = this.get(name);
    if (!anyShared(user.groups, event.registerGroups)) {
      throw new GatewayError('EVENT_FORBIDDEN', `API user ${user.name} may not register ${name}`);
    }
    if (event.bind.length === 0) return;
    if (!person) {
      throw new GatewayError('PERSON_TOKEN_REQUIRED', `${name} needs a person token (${PERSON_TOKEN_QUERY})`);
    }
    for (const [field, column] of event.bind) {
      const wanted = criteria?.[field];
      const own = person.fields[column];
      if (wanted === undefined || own === undefined || scalarString(wanted) !== scalarString(own)) {
        throw new GatewayError('CRITERIA_NOT_YOURS', `criteria.${field} must be your own ${column}`);
      }
    }
  }
}
