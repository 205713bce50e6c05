/**
 * Names the two ends agree on outside the frames: the token parameters (a query on the WebSocket upgrade, headers
 * on HTTP, the same names), the paths of the back end's calls, and the headers the node adds. One place, so that a rename is one edit.
 */

/** The API user token, on the upgrade (API Maker's name: the same as the HTTP header's). */
export const API_TOKEN_QUERY = 'x-am-authorization';
/** The person token, optional, on the upgrade. */
export const PERSON_TOKEN_QUERY = 'x-am-user-authorization';
/** The API user token on HTTP calls. */
export const API_TOKEN_HEADER = 'x-am-authorization';
/** The person token on HTTP calls (the table API, can-connect code's `g.req`). */
export const PERSON_TOKEN_HEADER = 'x-am-user-authorization';

/** An emit's idempotency key (docs/protocol.md section 5): a repeat within the window is answered, not published. */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** On the answer to a repeat of an emit already published under its idempotency key: `true`. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';
/** An Idempotency-Key as taken: 1 to 255 printable ASCII characters. */
export const IDEMPOTENCY_KEY_FORM = /^[\x20-\x7e]{1,255}$/;

/** A table page that was cut short: the `skip` that reads the next one. */
export const NEXT_SKIP_HEADER = 'x-herald-next-skip';
/** A webhook body's HMAC-SHA256: `sha256=<hex>`. */
export const SIGNATURE_HEADER = 'x-herald-signature';

/** Every route of the system API is under `/api/system-api/<userPath>`. */
export const systemApiPath = (userPath: string): string => `/api/system-api/${userPath}`;
/** The token API: AM and AM_DB logins, and REFRESH. */
export const tokenPath = (userPath: string): string => `${systemApiPath(userPath)}/token`;
/** The back end's emit. */
export const emitPath = (userPath: string): string => `${systemApiPath(userPath)}/emit-event-ws`;
/** The back end's batch of emits. */
export const emitBatchPath = (userPath: string): string => `${systemApiPath(userPath)}/emit-events-ws`;
/** The control API (section 12 of docs/protocol.md). */
export const controlPaths = (userPath: string) =>
  ({
    disconnect: `${systemApiPath(userPath)}/disconnect`,
    revoke: `${systemApiPath(userPath)}/revoke`,
    presence: `${systemApiPath(userPath)}/presence`,
  }) as const;
/** A table's path: GET reads it, POST `<path>/save-single-or-multiple` saves into it (fastify's `:param` form works too). */
export const tablePath = (userPath: string, instance: string, database: string, collection: string): string =>
  `/api/schema/${userPath}/${instance}/${database}/${collection}`;
/** The table save's last segment. */
export const TABLE_SAVE_SEGMENT = 'save-single-or-multiple';

/** Liveness, readiness (the load balancer routes new clients by it) and the Prometheus scrape. */
export const HEALTH_PATH = '/healthz';
export const READY_PATH = '/readyz';
export const METRICS_PATH = '/metrics';
