/**
 * The batch emit (docs/protocol.md 5.2): `POST .../emit-events-ws` with `{"events":[{name, eventData, idempotencyKey?},
 * ...]}`. Each item is an emit of its own: the same checks in the same order (emitter.ts), its own Idempotency-Key and
 * its own answer, in order, so one bad item refuses only itself. The items are published together: their Redis reads
 * and writes leave in the same batches (reads.ts, connection.ts), not one round trip after another. Not on the emit's
 * fast path: one call carries many emits, so fastify's cost is shared out.
 */
import type { FastifyError, FastifyInstance, onRequestHookHandler } from 'fastify';
import { emitBatchPath, isRecord, type Envelope } from '@herald/protocol';
import type { ApiUser } from '../auth/authenticator.ts';
import { GatewayError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import type { EmitBody, Emitter } from '../emit/emitter.ts';
import { emitted, ok, refusalOf } from './envelope.ts';

export interface EmitBatchOptions {
  userPath: string;
  metrics: Metrics;
  /** The emit route's token hook: request.apiUser is set by it. */
  authenticate: onRequestHookHandler;
  emit: Emitter;
  /** config emit.maxBatchEvents */
  maxBatchEvents: number;
}

/** An item's answer: an emit's envelope, `replayed` when it repeated one published under its Idempotency-Key. */
type ItemAnswer = Envelope<unknown> & { replayed?: true };

const batchBody = {
  type: 'object',
  required: ['events'],
  properties: { events: { type: 'array' } },
} as const;

export function emitBatchRoute(app: FastifyInstance, { userPath, metrics, authenticate, emit, maxBatchEvents }: EmitBatchOptions): void {
  app.post<{ Body: { events: unknown[] } }>(emitBatchPath(userPath), { schema: { body: batchBody }, onRequest: authenticate }, async (request, reply) => {
    const { events } = request.body;
    if (events.length === 0 || events.length > maxBatchEvents) {
      throw new GatewayError('BAD_REQUEST', `a batch holds 1 to ${maxBatchEvents} events (emit.maxBatchEvents); this one holds ${events.length}`);
    }
    const apiUser = request.apiUser as ApiUser;
    let retryAfterS: number | undefined;
    const results = await Promise.all(events.map(async (item, index): Promise<ItemAnswer> => {
      try {
        const { body, idempotencyKey } = emitOf(item, index);
        const answer = await emit(apiUser, body, idempotencyKey);
        const envelope = emitted(answer);
        return answer.replayed ? { ...envelope, replayed: true } : envelope;
      } catch (error) {
        const refusal = refusalOf(error as FastifyError, metrics, request.log);
        if (refusal.retryAfterS !== undefined) retryAfterS = Math.max(retryAfterS ?? 0, refusal.retryAfterS);
        return refusal.body;
      }
    }));
    // A retry is worth it for some items (503, 409): the longest wait any of them was told.
    if (retryAfterS !== undefined) void reply.header('retry-after', String(retryAfterS));
    return ok({ results });
  });
}

/**
 * An item as an emit: `name` a non-empty string (a number or boolean is taken as its text, as the emit's schema coerces
 * it), `eventData` an object, `idempotencyKey` a string if given. Anything else is BAD_REQUEST for this item, naming it.
 */
function emitOf(item: unknown, index: number): { body: EmitBody; idempotencyKey: string | undefined } {
  const where = `events[${index}]`;
  if (!isRecord(item)) throw new GatewayError('BAD_REQUEST', `${where} must be an object with name and eventData`);
  const { name, eventData, idempotencyKey } = item;
  const text = typeof name === 'number' || typeof name === 'boolean' ? String(name) : name;
  if (typeof text !== 'string' || text.length === 0) throw new GatewayError('BAD_REQUEST', `${where}.name must be a non-empty string`);
  if (!isRecord(eventData)) throw new GatewayError('BAD_REQUEST', `${where}.eventData must be an object`);
  if (idempotencyKey !== undefined && typeof idempotencyKey !== 'string') throw new GatewayError('BAD_REQUEST', `${where}.idempotencyKey must be a string`);
  return { body: { name: text, eventData }, idempotencyKey };
}

