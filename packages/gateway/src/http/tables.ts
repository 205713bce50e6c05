/**
 * The table API: read a collection a page at a time, save rows into it. Every successful save notifies the clients
 * registered for the table's SCHEMA_POST_BULK_INSERT, one notification per saved row that their criteria match; a
 * failed save notifies nobody. Routes only translate: access and hidden columns are the TableCatalogue's, storage
 * the DataSource's. Every call spends one request of its caller's rate limit first.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { API_TOKEN_HEADER, MAX_JSON_DEPTH, NEXT_SKIP_HEADER, PERSON_TOKEN_HEADER, TABLE_SAVE_SEGMENT, isRecord, nestedDeeperThan, tablePath } from '@herald/protocol';
import type { ApiUser, Authenticator } from '../auth/authenticator.ts';
import { DeliveryPending, type Broker } from '../broker/broker.ts';
import type { Config } from '../config/schema.ts';
import type { DataSource, Filter, Row } from '../data/data-source.ts';
import { GatewayError } from '../errors.ts';
import { tableEvent } from '../events/routing.ts';
import type { Caller, Table, TableCatalogue, TableRef, TableUse } from '../events/tables.ts';
import type { Metrics } from '../metrics.ts';
import { ok, okOfJson } from './envelope.ts';
import { tokenHeader } from './headers.ts';
import { clientOf, limitBy, type RateLimiters } from './rate-limit.ts';

/** Rows in one save: a bound on the work (and the notifications) one request can cause. */
export const MAX_ROWS_PER_SAVE = 1000;
/** The largest `skip`: what every data source takes as a count. */
const MAX_SKIP = 2 ** 31 - 1;
/** Set on a GET answer after which more rows may follow: the `skip` of the next page. */

export interface TablesOptions {
  userPath: string;
  authenticator: Authenticator;
  tables: TableCatalogue;
  dataSources: ReadonlyMap<string, DataSource>;
  broker: Broker;
  metrics: Metrics;
  limits: Config['tables'];
  rateLimiters: RateLimiters;
}

type Query = Record<string, unknown>;

function parseFind(find: unknown): Filter | undefined {
  if (find === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = typeof find === 'string' ? JSON.parse(find) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!isRecord(parsed)) throw new GatewayError('BAD_REQUEST', 'querystring/find must be a JSON object, e.g. find={"country":"India"}');
  if (nestedDeeperThan(parsed)) throw new GatewayError('BAD_REQUEST', `querystring/find nests deeper than ${MAX_JSON_DEPTH} levels`);
  return parsed as Filter; // the data source checks what is in it (data/filter.ts)
}

/** A whole number from the query string, from `min` to `max`; `fallback` when it is not given. */
function countParam(query: Query, name: string, min: number, max: number, fallback: number): number {
  const text = query[name];
  if (text === undefined) return fallback;
  const value = typeof text === 'string' && /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  if (!(value >= min && value <= max)) throw new GatewayError('BAD_REQUEST', `querystring/${name} must be a whole number from ${min} to ${max}`);
  return value;
}

/** The rows of a save body, each checked: its _id, its nesting (MAX_JSON_DEPTH) and the bytes of its JSON (maxRowBytes). */
function rowsOf(body: unknown, maxRowBytes: number, metrics: Metrics): Row[] {
  const rows = Array.isArray(body) ? body : [body];
  if (rows.length === 0 || rows.length > MAX_ROWS_PER_SAVE || !rows.every(isRecord)) {
    throw new GatewayError('BAD_REQUEST', `body must be a row (an object) or an array of 1 to ${MAX_ROWS_PER_SAVE} rows`);
  }
  rows.forEach((row, i) => {
    const name = Array.isArray(body) ? `body[${i}]` : 'body';
    // MongoDB refuses an array as _id, and an object may hold operators: a 500 there, so refused here for every source.
    if (row._id !== undefined && typeof row._id !== 'string' && typeof row._id !== 'number') {
      throw new GatewayError('BAD_REQUEST', `${name}._id must be a string or a number`);
    }
    if (nestedDeeperThan(row)) {
      metrics.tableRowsRefused.inc({ reason: 'depth' });
      throw new GatewayError('BAD_REQUEST', `${name} nests deeper than ${MAX_JSON_DEPTH} levels`);
    }
    const bytes = Buffer.byteLength(JSON.stringify(row));
    if (bytes > maxRowBytes) {
      metrics.tableRowsRefused.inc({ reason: 'size' });
      throw new GatewayError('BAD_REQUEST', `${name} is ${bytes} bytes of JSON; a row may have at most ${maxRowBytes} (tables.maxRowBytes)`);
    }
  });
  return rows;
}

/** At most `limit` of `rows` as a JSON array, ending before the row that would take it past `maxBytes` (never empty). */
function pageOf(rows: Row[], limit: number, maxBytes: number): { json: string; count: number } {
  const parts: string[] = [];
  let bytes = 2;
  for (const row of rows) {
    if (parts.length === limit) break;
    const json = JSON.stringify(row);
    bytes += Buffer.byteLength(json) + 1;
    if (parts.length > 0 && bytes > maxBytes) break;
    parts.push(json);
  }
  return { json: `[${parts.join(',')}]`, count: parts.length };
}

export function tableRoutes(app: FastifyInstance, options: TablesOptions): void {
  const { authenticator, tables, dataSources, broker, metrics, limits, rateLimiters } = options;
  const prefix = tablePath(options.userPath, ':instance', ':database', ':collection');

  /** The caller's API user when its token is given and good; a bad one is refused by `authorize`, after the limit. */
  const apiUserOf = (request: FastifyRequest): ApiUser | undefined => {
    const token = tokenHeader(request, API_TOKEN_HEADER);
    try {
      return token === undefined ? undefined : authenticator.verifyApiUser(token);
    } catch {
      return undefined;
    }
  };
  const limitCalls = limitBy((request) => {
    const apiUser = apiUserOf(request);
    return apiUser === undefined
      ? [rateLimiters.tableCalls, clientOf(request)]
      : [rateLimiters.apiUserTableCalls, `${apiUser.name} ${clientOf(request)}`];
  });

  /** The tokens given, checked; then whether they are enough for this use of this table. */
  const authorize = (request: FastifyRequest, use: TableUse): [TableRef, Table] => {
    const apiToken = tokenHeader(request, API_TOKEN_HEADER);
    const personToken = tokenHeader(request, PERSON_TOKEN_HEADER);
    const caller: Caller = {
      apiUser: apiToken === undefined ? undefined : authenticator.verifyApiUser(apiToken),
      person: personToken === undefined ? undefined : authenticator.verifyPerson(personToken),
    };
    const ref = request.params as TableRef;
    return [ref, tables.check(ref, caller, use)];
  };
  const sourceOf = ({ instance }: TableRef): DataSource => {
    const source = dataSources.get(instance);
    if (!source) throw new GatewayError('NOT_FOUND', `no instance ${instance}`);
    return source;
  };

  app.get(prefix, { onRequest: limitCalls }, async (request, reply) => {
    const [ref, table] = authorize(request, 'read');
    const query = request.query as Query;
    const limit = countParam(query, 'limit', 1, limits.maxPageSize, limits.pageSize);
    const skip = countParam(query, 'skip', 0, MAX_SKIP, 0);
    const find = parseFind(query.find);
    if (find) table.checkFind(find);
    // One row more than the page: whether another page follows.
    const rows = await sourceOf(ref).getAll({ ...ref, ...(find && { find }), skip, limit: limit + 1 });
    const page = pageOf(rows.map((row) => table.visible(row)), limit, limits.maxPageBytes);
    if (page.count < rows.length) void reply.header(NEXT_SKIP_HEADER, String(skip + page.count));
    return reply.type('application/json; charset=utf-8').send(okOfJson(page.json));
  });

  app.post(`${prefix}/${TABLE_SAVE_SEGMENT}`, { onRequest: limitCalls, bodyLimit: limits.maxSaveBytes }, async (request) => {
    const [ref, table] = authorize(request, 'write');
    const saved = await sourceOf(ref).insert(ref, rowsOf(request.body, limits.maxRowBytes, metrics));
    const shown = saved.map((row) => table.visible(row));
    const event = tableEvent(ref.instance, ref.database, ref.collection);
    // The rows are saved whatever happens next; a fleet that cannot be reached loses their notifications, counted.
    const published = await Promise.allSettled(shown.map((row) => broker.publish(event, row)));
    for (const outcome of published) {
      if (outcome.status === 'rejected') (outcome.reason instanceof DeliveryPending ? metrics.emitsPending : metrics.emitsFailed).inc();
    }
    return ok(shown);
  });
}
