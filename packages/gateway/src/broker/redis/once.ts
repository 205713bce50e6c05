/**
 * Emits' idempotency keys in Redis (Broker.claim, settle): one string per key, `gw:once:{<id>}` (the id is a digest of
 * the API user and the key, so keys spread over a Cluster's slots). It holds `p<digest>` while the first emit with the
 * key is being published (for the claim's pendingMs: a publisher that dies lets it go then), then `d<digest>\n<answer>`
 * for the key's window. The claim is one script: of two emits with one key on two nodes, exactly one finds it free.
 */
import type { Result } from 'ioredis';
import type { Claimed, Once } from '../broker.ts';
import type { Commands } from './clients.ts';
import type { Keyspace } from './keys.ts';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** What the key holds ('' if nothing, and then it holds `pending` from now). */
    heraldOnceClaim(key: string, pending: string, pendingMs: number): Result<string, Context>;
    /** Free the key if it still holds `pending` (ours). */
    heraldOnceRelease(key: string, pending: string): Result<number, Context>;
  }
}

const SCRIPTS = {
  heraldOnceClaim: `
local held = redis.call('GET', KEYS[1])
if held then return held end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ''`,
  heraldOnceRelease: `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
};

export class RedisOnce {
  readonly #redis: Commands;
  readonly #keys: Keyspace;

  constructor(redis: Commands, keys: Keyspace) {
    this.#redis = redis;
    this.#keys = keys;
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 1, lua });
  }

  async claim({ id }: Once, digest: string, pendingMs: number): Promise<Claimed> {
    const held = await this.#redis.heraldOnceClaim(this.#keys.once(id), `p${digest}`, pendingMs);
    if (held === '') return { state: 'new' };
    if (held.startsWith('p')) return { state: 'pending', digest: held.slice(1) };
    const newline = held.indexOf('\n');
    return { state: 'done', digest: held.slice(1, newline), answer: held.slice(newline + 1) };
  }

  async settle({ id, windowMs }: Once, digest: string, answer: string | undefined): Promise<void> {
    const key = this.#keys.once(id);
    if (answer === undefined) await this.#redis.heraldOnceRelease(key, `p${digest}`);
    else await this.#redis.set(key, `d${digest}\n${answer}`, 'PX', windowMs);
  }
}
