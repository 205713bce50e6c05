/**
 * Emits' idempotency keys in Redis (Broker.claim, settle): one string per key, `gw:once:{<id>}` (the id is a digest of
 * the API user and the key, so keys spread over a Cluster's slots). It holds `p<digest>` while the first emit with the
 * key is being published (for the claim's pendingMs: a publisher that dies lets it go then), then `d<digest>\n<answer>`
 * for the key's window. The claim is one script: of two emits with one key on two nodes, exactly one finds it free.
 * Every emit with a key makes a claim and a settle, so both go where the emit's reads go (reads.ts: their lean
 * connection, with one redis-server), each a script by its SHA1.
 */
import { createHash } from 'node:crypto';
import type { Result } from 'ioredis';
import type { Claimed, Once } from '../broker.ts';
import type { Commands } from './clients.ts';
import type { Keyspace } from './keys.ts';
import { runScript, type Reads } from './reads.ts';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** What the key holds ('' if nothing, and then it holds `pending` from now). */
    heraldOnceClaim(key: string, pending: string, pendingMs: number): Result<string, Context>;
    /** Free the key if it still holds `pending` (ours). */
    heraldOnceRelease(key: string, pending: string): Result<number, Context>;
    /** The key holds `done` for `windowMs`. */
    heraldOnceDone(key: string, done: string, windowMs: number): Result<string, Context>;
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
  heraldOnceDone: `return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])`,
};

const SHA = Object.fromEntries(Object.entries(SCRIPTS).map(([name, lua]) => [name, createHash('sha1').update(lua).digest('hex')])) as Record<keyof typeof SCRIPTS, string>;

export class RedisOnce {
  readonly #redis: Commands;
  readonly #reads: Reads;
  readonly #keys: Keyspace;

  constructor(redis: Commands, reads: Reads, keys: Keyspace) {
    this.#redis = redis;
    this.#reads = reads;
    this.#keys = keys;
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 1, lua });
  }

  async claim({ id }: Once, digest: string, pendingMs: number): Promise<Claimed> {
    const key = this.#keys.once(id);
    const pending = `p${digest}`;
    const { reply } = await runScript(this.#reads, SHA.heraldOnceClaim, [key], [pending, pendingMs], () => this.#redis.heraldOnceClaim(key, pending, pendingMs));
    const held = String(reply);
    if (held === '') return { state: 'new' };
    if (held.startsWith('p')) return { state: 'pending', digest: held.slice(1) };
    const newline = held.indexOf('\n');
    return { state: 'done', digest: held.slice(1, newline), answer: held.slice(newline + 1) };
  }

  async settle({ id, windowMs }: Once, digest: string, answer: string | undefined): Promise<void> {
    const key = this.#keys.once(id);
    if (answer === undefined) {
      const pending = `p${digest}`;
      await runScript(this.#reads, SHA.heraldOnceRelease, [key], [pending], () => this.#redis.heraldOnceRelease(key, pending));
    } else {
      const done = `d${digest}\n${answer}`;
      await runScript(this.#reads, SHA.heraldOnceDone, [key], [done, windowMs], () => this.#redis.heraldOnceDone(key, done, windowMs));
    }
  }
}
