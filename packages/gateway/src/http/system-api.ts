/** The system API: tokens and emit. Routes only translate HTTP into authenticator, catalogue and broker calls. */
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_TOKEN_HEADER, emitPath, IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, isRecord, tokenPath } from '@herald/protocol';
import type { ApiUser, Authenticator, TokenRequest } from '../auth/authenticator.ts';
import { GatewayError } from '../errors.ts';
import { emitBatchRoute } from './emit-batch.ts';
import type { EmitBody, Emits } from '../emit/emitter.ts';
import type { Metrics } from '../metrics.ts';
import { emitted, ok, refusalOf } from './envelope.ts';
import type { FastAnswer, FastRoute } from './fast-path.ts';
import { tokenHeader } from './headers.ts';
import { clientOf, limitBy, type RateLimiter } from './rate-limit.ts';

export interface SystemApiOptions {
  userPath: string;
  authenticator: Authenticator;
  metrics: Metrics;
  /** The node's one emit: the route, its fast path and the batch take theirs through it. */
  emits: Emits;
}

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

/** The emit and the batch of emits (emit-batch.ts), which share the token hook and the emitter. */
export function emitRoute(app: FastifyInstance, options: SystemApiOptions, maxBatchEvents: number): void {
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

  const { emit } = options.emits;
  emitBatchRoute(app, { userPath: options.userPath, metrics: options.metrics, authenticate, emit, maxBatchEvents });
  app.post<{ Body: EmitBody }>(
    emitPath(options.userPath),
    { schema: { body: emitBody }, onRequest: authenticate },
    async (request, reply) => {
      const key = request.headers[IDEMPOTENCY_KEY_HEADER];
      const answer = await emit(request.apiUser as ApiUser, request.body, typeof key === 'string' ? key : undefined);
      if (answer.replayed) void reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
      const envelope = emitted(answer);
      return reply.code(envelope.statusCode).send(envelope);
    },
  );
}

/**
 * The emit on the fast path: the API token checked as the route's hook does, as soon as the head is read (a refusal is
 * answered before the body is read, as fastify answers it); then the body as the route's schema has it (else undefined:
 * fastify answers it, coercing or refusing), and every answer the same as fastify's, errors included.
 */
export function emitFastRoute(options: SystemApiOptions, log: FastifyBaseLogger): FastRoute {
  const { emit } = options.emits;
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
      return emit(apiUser, { name, eventData }, idempotencyKey).then((answer): FastAnswer => {
        const envelope = emitted(answer);
        counted(envelope.statusCode);
        return { statusCode: envelope.statusCode, body: JSON.stringify(envelope), replayed: answer.replayed };
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
