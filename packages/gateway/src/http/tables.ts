/**
 * The table API: read a collection, save rows into it. Every successful save notifies the clients registered
 * for the table's SCHEMA_POST_BULK_INSERT, one notification per saved row that their criteria match; a failed
 * save notifies nobody. Routes only translate: access is the TableCatalogue's, storage the DataSource's.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isRecord } from '@herald/protocol';
import type { Authenticator } from '../auth/authenticator.ts';
import type { Broker } from '../broker/broker.ts';
import type { DataSource, Filter, Row } from '../data/data-source.ts';
import { GatewayError } from '../errors.ts';
import { tableEvent } from '../events/routing.ts';
import type { Caller, TableCatalogue, TableRef } from '../events/tables.ts';
import type { Metrics } from '../metrics.ts';
import { ok } from './envelope.ts';
import { API_TOKEN_HEADER, PERSON_TOKEN_HEADER, tokenHeader } from './headers.ts';

/** Rows in one save: a bound on the work (and the notifications) one request can cause. */
export const MAX_ROWS_PER_SAVE = 1000;

export interface TablesOptions {
  userPath: string;
  authenticator: Authenticator;
  tables: TableCatalogue;
  dataSources: ReadonlyMap<string, DataSource>;
  broker: Broker;
  metrics: Metrics;
}

function parseFind(find: unknown): Filter | undefined {
  if (find === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(find));
  } catch {
    parsed = undefined;
  }
  if (!isRecord(parsed)) throw new GatewayError('BAD_REQUEST', 'querystring/find must be a JSON object, e.g. find={"country":"India"}');
  return parsed as Filter; // the data source checks what is in it (data/filter.ts)
}

function rowsOf(body: unknown): Row[] {
  const rows = Array.isArray(body) ? body : [body];
  if (rows.length === 0 || rows.length > MAX_ROWS_PER_SAVE || !rows.every(isRecord)) {
    throw new GatewayError('BAD_REQUEST', `body must be a row (an object) or an array of 1 to ${MAX_ROWS_PER_SAVE} rows`);
  }
  return rows;
}

export function tableRoutes(app: FastifyInstance, options: TablesOptions): void {
  const { authenticator, tables, dataSources, broker, metrics } = options;
  const prefix = `/api/schema/${options.userPath}/:instance/:database/:collection`;

  /** The tokens given, checked; then whether they are enough for this table. */
  const authorize = (request: FastifyRequest): TableRef => {
    const apiToken = tokenHeader(request, API_TOKEN_HEADER);
    const personToken = tokenHeader(request, PERSON_TOKEN_HEADER);
    const caller: Caller = {
      apiUser: apiToken === undefined ? undefined : authenticator.verifyApiUser(apiToken),
      person: personToken === undefined ? undefined : authenticator.verifyPerson(personToken),
    };
    const ref = request.params as TableRef;
    tables.check(ref, caller);
    return ref;
  };
  const sourceOf = ({ instance }: TableRef): DataSource => {
    const source = dataSources.get(instance);
    if (!source) throw new GatewayError('NOT_FOUND', `no instance ${instance}`);
    return source;
  };

  app.get(prefix, async (request) => {
    const ref = authorize(request);
    const find = parseFind((request.query as Record<string, unknown>).find);
    return ok(await sourceOf(ref).getAll({ ...ref, ...(find && { find }) }));
  });

  app.post(`${prefix}/save-single-or-multiple`, async (request) => {
    const ref = authorize(request);
    const saved = await sourceOf(ref).insert(ref, rowsOf(request.body));
    const event = tableEvent(ref.instance, ref.database, ref.collection);
    // The rows are saved whatever happens next; a fleet that cannot be reached loses their notifications, counted.
    const published = await Promise.allSettled(saved.map((row) => broker.publish(event, row)));
    const failed = published.filter((outcome) => outcome.status === 'rejected').length;
    if (failed > 0) metrics.emitsFailed.inc(failed);
    return ok(saved);
  });
}
