/**
 * An emit as an entry of the emit stream (docs/protocol.md 5.3), for a back end that emits by XADD, even while no node
 * answers: the fields, and an XADD through any Redis client that takes a command's words.
 */
import { randomUUID } from 'node:crypto';

export interface StreamEmit {
  name: string;
  eventData: Record<string, unknown>;
  /** Default: a new UUID (without one the entry's id would be its key, and an entry added twice would be two emits). */
  idempotencyKey?: string;
  /** The configured API user to emit as; default the gateway's ingest.apiUser. */
  apiUser?: string;
}

/** The entry's fields and values, in XADD's order. */
export function streamFields({ name, eventData, idempotencyKey = randomUUID(), apiUser }: StreamEmit): string[] {
  const fields = ['name', name, 'eventData', JSON.stringify(eventData), 'idempotencyKey', idempotencyKey];
  return apiUser === undefined ? fields : [...fields, 'apiUser', apiUser];
}

/** What xadd needs of a Redis client: ioredis's `call`, or node-redis's `sendCommand` wrapped as one. */
export interface RedisCall {
  call(command: string, ...args: string[]): Promise<unknown>;
}

/**
 * XADD the emit to `stream` (default herald:emits); `maxLen` bounds the stream (MAXLEN ~). Answers the entry's id. A
 * retry of an XADD that may have gone through should pass the same idempotencyKey: the fleet publishes it once.
 */
export async function xadd(redis: RedisCall, emit: StreamEmit, { stream = 'herald:emits', maxLen }: { stream?: string; maxLen?: number } = {}): Promise<string> {
  const trim = maxLen === undefined ? [] : ['MAXLEN', '~', String(maxLen)];
  return String(await redis.call('XADD', stream, ...trim, '*', ...streamFields(emit)));
}
