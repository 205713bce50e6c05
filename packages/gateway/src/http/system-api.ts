/** The system API: tokens and emit. Routes only translate HTTP into authenticator, catalogue and broker calls. */
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  API_TOKEN_HEADER, emitPath, IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, isRecord, MAX_JSON_DEPTH, nestedDeeperThan, tokenPath, type Envelope,
} from '@herald/protocol';
import type { ApiUser, Authenticator, TokenRequest } from '../auth/authenticator.ts';
import type { Broker, Once } from '../broker/broker.ts';
import type { EmitConfig } from '../config/schema.ts';
import type { DeliveryBacklog } from '../hub/backlog.ts';
import { GatewayError } from '../errors.ts';
import type { EventCatalogue } from '../events/catalogue.ts';
import type { Metrics } from '../metrics.ts';
import { ok, refusalOf } from './envelope.ts';
import type { FastAnswer, FastRoute } from './fast-path.ts';
import { tokenHeader } from './headers.ts';
import { IdempotencyKeys, isReplayed } from './idempotency.ts';
import { clientOf, limitBy, type RateLimiter } from './rate-limit.ts';

export interface SystemApiOptions {
  userPath: string;
  authenticator: Authenticator;
  catalogue: EventCatalogue;
  broker: Broker;
  metrics: Metrics;
  /** The hub's: what an emit checks before it is taken, and what a waiting one waits for. */
  backlog: DeliveryBacklog;
  whenBacklogged: EmitConfig['whenBacklogged'];
  /** Emits' Idempotency-Keys, fleet-wide. */
  keys: IdempotencyKeys;
}

/** An emit's answer; `replayed`: a repeat of an emit already published under its Idempotency-Key (nothing published now). */
export interface EmitAnswer {
  envelope: Envelope<unknown>;
  replayed: boolean;
}

/** Seconds a refused emit is told to wait: the backlog drains at the clients' pace, within a second or so. */
const OVERLOADED_RETRY_AFTER_S = 1;

const credentials = {
  type: 'object',
  required: ['u', 'p'],
  properties: { u: { type: 'string', minLength: 1 }, p: { type: 'string' } },
} as const;

const tokenBody = {
  type: 'object',
  required: ['authTokenType'],
  properties: {
    authTokenType: { type: 'string', enum: ['AM', 'AM_DB', 'REFRESH'] },
    authTokenAM: credentials,
    authTokenAMDB: {
      type: 'object',
      required: ['u', 'p'],
      properties: {
        ...credentials.properties,
        generator: { type: 'string' },
        instance: { type: 'string' },
        database: { type: 'string' },
        collection: { type: 'string' },
        usernameColumn: { type: 'string' },
        passwordColumn: { type: 'string' },
      },
    },
    refreshToken: { type: 'string', minLength: 1 },
  },
  allOf: [
    { if: { properties: { authTokenType: { const: 'AM' } } }, then: { required: ['authTokenAM'] } },
    { if: { properties: { authTokenType: { const: 'AM_DB' } } }, then: { required: ['authTokenAMDB'] } },
    { if: { properties: { authTokenType: { const: 'REFRESH' } } }, then: { required: ['refreshToken'] } },
  ],
} as const;

const emitBody = {
  type: 'object',
  required: ['name', 'eventData'],
  properties: {
    name: { type: 'string', minLength: 1 },
    eventData: { type: 'object' },
  },
} as const;

declare module 'fastify' {
  interface FastifyRequest {
    apiUser: ApiUser | null;
  }
}

interface TokenBody {
  authTokenType: 'AM' | 'AM_DB' | 'REFRESH';
  authTokenAM?: { u: string; p: string };
  authTokenAMDB?: Extract<TokenRequest, { kind: 'AM_DB' }>['credentials'];
  refreshToken?: string;
}

interface EmitBody {
  name: string;
  eventData: Record<string, unknown>;
}

/** The body was validated by the schema, so the fields its type names are there. */
function tokenRequest(body: TokenBody): TokenRequest {
  switch (body.authTokenType) {
    case 'AM':
      return { kind: 'AM', ...(body.authTokenAM as { u: string; p: string }) };
    case 'AM_DB':
      return { kind: 'AM_DB', credentials: body.authTokenAMDB as Extract<TokenRequest, { kind: 'AM_DB' }>['credentials'] };
    case 'REFRESH':
      return { kind: 'REFRESH', refreshToken: body.refreshToken as string };
  }
}

/**
 * POST .../token: what browsers and back ends call alike, on either port. `tokenRequests`: the limit on token requests
 * per client address (one limiter for both ports), spent before the body is read.
 */
export function tokenRoute(
  app: FastifyInstance,
  { userPath, authenticator }: Pick<SystemApiOptions, 'userPath' | 'authenticator'>,
  tokenRequests: RateLimiter,
): void {
  const limitTokenRequests = limitBy((request) => [tokenRequests, clientOf(request)]);
  app.post<{ Body: TokenBody }>(tokenPath(userPath), { schema: { body: tokenBody }, onRequest: limitTokenRequests }, async (request) =>
    ok(await authenticator.issue(tokenRequest(request.body))),
  );
}

export function emitRoute(app: FastifyInstance, options: SystemApiOptions): void {
  const { authenticator } = options;
  app.decorateRequest('apiUser', null);
  // Authentication is a hook, so a caller without a valid token learns that before anything about its body.
  // A callback, not async: every emit passes it, and an async hook costs a promise and a microtask each time.
  const authenticate = (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void => {
    try {
      request.apiUser = authenticator.verifyApiUser(apiTokenOf(request));
    } catch (error) {
      return done(error as Error);
    }
    done();
  };

  const emit = emitter(options);
  app.post<{ Body: EmitBody }>(
    emitPath(options.userPath),
    { schema: { body: emitBody }, onRequest: authenticate },
    async (request, reply) => {
      const key = request.headers[IDEMPOTENCY_KEY_HEADER];
      const { envelope, replayed } = await emit(request.apiUser as ApiUser, request.body, typeof key === 'string' ? key : undefined);
      if (replayed) void reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      return envelope;
    },
  );
}

/**
 * One emit, once its caller is known and its body's shape checked: the fastify route's and the fast path's. With an
 * Idempotency-Key (idempotency.ts), the key is claimed before publishing, and settled after.
 */
function emitter({ catalogue, broker, metrics, backlog, whenBacklogged, keys }: SystemApiOptions) {
  const waits = whenBacklogged === 'wait';
  return async (apiUser: ApiUser, { name, eventData }: EmitBody, idempotencyKey: string | undefined): Promise<EmitAnswer> => {
    const key = IdempotencyKeys.read(idempotencyKey);
    // Deeper than this, serialising it for a client or another node would overflow the stack mid fan-out.
    if (nestedDeeperThan(eventData, MAX_JSON_DEPTH)) {
      throw new GatewayError('BAD_REQUEST', `eventData nests deeper than ${MAX_JSON_DEPTH} levels`);
    }
    catalogue.forEmit(name, apiUser);
    const claim = key === undefined ? undefined : await keys.claim(apiUser, key, name, eventData);
    if (claim !== undefined && isReplayed(claim)) return { envelope: ok({ name, nodes: claim.nodes }), replayed: true };
    let nodes: number;
    try {
      if (!waits && backlog.over) {
        metrics.emitsRefused.inc({ reason: 'backlog' });
        throw new GatewayError('OVERLOADED', `this node has more than ${backlog.bound} bytes on their way to its clients`, OVERLOADED_RETRY_AFTER_S);
      }
      metrics.emits.inc({ event: name });
      nodes = await published(broker, metrics, name, eventData, claim?.once);
    } catch (error) {
      await claim?.settle(undefined);
      throw error;
    }
    metrics.publishes.inc(nodes);
    await claim?.settle(nodes);
    const envelope = ok({ name, nodes });
    // This node's own fan-out of it was begun within publish (a route's history may hold it back): waited for.
    if (waits) await backlog.settled();
    return { envelope, replayed: false };
  };
}

async function published(broker: Broker, metrics: Metrics, name: string, eventData: Record<string, unknown>, once: Once | undefined): Promise<number> {
  try {
    return await broker.publish(name, eventData, once);
  } catch (error) {
    metrics.emitsFailed.inc();
    throw error;
  }
}

/**
 * The emit on the fast path: the API token checked as the route's hook does, as soon as the head is read (a refusal is
 * answered before the body is read, as fastify answers it); then the body as the route's schema has it (else undefined:
 * fastify answers it, coercing or refusing), and every answer the same as fastify's, errors included.
 */
export function emitFastRoute(options: SystemApiOptions, log: FastifyBaseLogger): FastRoute {
  const emit = emitter(options);
  const { authenticator, metrics } = options;
  // herald_http_responses_total under the route's own pattern, as fastify's answers to the same path are counted.
  const counted = metrics.responses.forRoute(emitPath(options.userPath));
  const refused = (error: unknown): FastAnswer => {
    const { statusCode, body, retryAfterS } = refusalOf(error as FastifyError, metrics, log);
    counted(statusCode);
    return { statusCode, body: JSON.stringify(body), retryAfterS };
  };
  return (apiToken, idempotencyKey) => {
    let apiUser: ApiUser;
    try {
      apiUser = authenticator.verifyApiUser(requiredApiToken(apiToken));
    } catch (error) {
      return refused(error);
    }
    return ({ name, eventData }) => {
      if (typeof name !== 'string' || name.length === 0 || !isRecord(eventData)) return undefined;
      return emit(apiUser, { name, eventData }, idempotencyKey).then(({ envelope, replayed }): FastAnswer => {
        counted(200);
        return { statusCode: 200, body: JSON.stringify(envelope), replayed };
      }, refused);
    };
  };
}

function apiTokenOf(request: FastifyRequest): string {
  return requiredApiToken(tokenHeader(request, API_TOKEN_HEADER));
}

function requiredApiToken(token: string | undefined): string {
  if (token === undefined) {
    throw new GatewayError('TOKEN_MISSING', `the ${API_TOKEN_HEADER} header (the API user token) is required`);
  }
  return token;
}
