/**
 * Emits' idempotency keys in Redis (Broker.claim, settle): one string per key, `gw:once:{<id>}` (the id is a digest of
 * the API user and the key, so keys spread over a Cluster's slots). It holds `p<digest>` while the first emit with the
 * key is being published (for the claim's pendingMs: a publisher that dies lets it go then), then `d<digest>\n<answer>`
 * for the key's window. The claim is one script: of two emits with one key on two nodes, exactly one finds it free.
 * Every emit with a key makes a claim and a settle, so both go where the emit's reads go (reads.ts: their lean
 * connection, with one redis-server), scripts by their SHA1, the claims (and the dones) of one turn in one script.
 */
import type { Result } from 'ioredis';
import type { Claimed, Once } from '../broker.ts';
import type { Commands } from './clients.ts';
import type { Keyspace } from './keys.ts';
import { runScript, scriptSha, type Reads } from './reads.ts';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** For each key: what it holds ('' if nothing, and then it holds its pending value from now). ARGV: pending, ms per key. */
    heraldOnceClaim(keys: number, ...keysThenArgs: Array<string | number>): Result<string[], Context>;
    /** Free the key if it still holds `pending` (ours). */
    heraldOnceRelease(key: string, pending: string): Result<number, Context>;
    /** Each key holds its done value for its window. ARGV: done, ms per key. */
    heraldOnceDone(keys: number, ...keysThenArgs: Array<string | number>): Result<number, Context>;
  }
}

const SCRIPTS = {
  heraldOnceClaim: `
local answers = {}
for i = 1, #KEYS do
  local held = redis.call('GET', KEYS[i])
  if held then answers[i] = held else
    redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'PX', ARGV[2 * i])
    answers[i] = ''
  end
end
return answers`,
  heraldOnceRelease: `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
  heraldOnceDone: `
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[2 * i - 1], 'PX', ARGV[2 * i]) end
return #KEYS`,
};

const SHA = Object.fromEntries(Object.entries(SCRIPTS).map(([name, lua]) => [name, scriptSha(lua)])) as Record<keyof typeof SCRIPTS, string>;

/** A key and its value with its time to live: what a claim and a done write. */
interface Write {
  key: string;
  value: string;
  ms: number;
}

/**
 * Writes of one kind made in one turn of the event loop, sent as one script on their keys (with one redis-server: a
 * Cluster's keys are on different shards, so there each is its own script). Unpaced emits with keys come tens to a
 * turn: one script for them all costs the node one command and Redis one script call, not one per emit.
 */
class PerTurn<R> {
  readonly #send: (writes: readonly Write[]) => Promise<R[]>;
  readonly #together: boolean;
  #waiting: Array<{ write: Write; answer: PromiseWithResolvers<R> }> = [];

  constructor(together: boolean, send: (writes: readonly Write[]) => Promise<R[]>) {
    this.#together = together;
    this.#send = send;
  }

  write(write: Write): Promise<R> {
    if (!this.#together) return this.#send([write]).then(([answer]) => answer!);
    if (this.#waiting.length === 0) setImmediate(() => this.#flush());
    const answer = Promise.withResolvers<R>();
    this.#waiting.push({ write, answer });
    return answer.promise;
  }

  #flush(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    this.#send(waiting.map(({ write }) => write)).then(
      (answers) => waiting.forEach(({ answer }, i) => answer.resolve(answers[i]!)),
      (error: unknown) => waiting.forEach(({ answer }) => answer.reject(error)),
    );
  }
}

const keysAndArgs = (writes: readonly Write[]): [string[], Array<string | number>] => [writes.map((write) => write.key), writes.flatMap((write) => [write.value, write.ms])];

export class RedisOnce {
  readonly #redis: Commands;
  readonly #reads: Reads;
  readonly #keys: Keyspace;
  readonly #claims: PerTurn<string>;
  readonly #dones: PerTurn<number>;

  constructor(redis: Commands, reads: Reads, keys: Keyspace) {
    this.#redis = redis;
    this.#reads = reads;
    this.#keys = keys;
    redis.defineCommand('heraldOnceClaim', { lua: SCRIPTS.heraldOnceClaim });
    redis.defineCommand('heraldOnceDone', { lua: SCRIPTS.heraldOnceDone });
    redis.defineCommand('heraldOnceRelease', { numberOfKeys: 1, lua: SCRIPTS.heraldOnceRelease });
    this.#claims = new PerTurn(reads.inOrder, (writes) => this.#script(SHA.heraldOnceClaim, writes, (count, words) => redis.heraldOnceClaim(count, ...words)) as Promise<string[]>);
    this.#dones = new PerTurn(reads.inOrder, (writes) =>
      this.#script(SHA.heraldOnceDone, writes, (count, words) => redis.heraldOnceDone(count, ...words)).then(() => writes.map(() => 1)));
  }

  async claim({ id }: Once, digest: string, pendingMs: number): Promise<Claimed> {
    const held = String(await this.#claims.write({ key: this.#keys.once(id), value: `p${digest}`, ms: pendingMs }));
    if (held === '') return { state: 'new' };
    if (held.startsWith('p')) return { state: 'pending', digest: held.slice(1) };
    const newline = held.indexOf('\n');
    return { state: 'done', digest: held.slice(1, newline), answer: held.slice(newline + 1) };
  }

  async settle({ id, windowMs }: Once, digest: string, answer: string | undefined): Promise<void> {
    const key = this.#keys.once(id);
    if (answer !== undefined) return void (await this.#dones.write({ key, value: `d${digest}\n${answer}`, ms: windowMs }));
    const pending = `p${digest}`;
    await runScript(this.#reads, SHA.heraldOnceRelease, [key], [pending], () => this.#redis.heraldOnceRelease(key, pending));
  }

  /** A script on `writes`' keys, by its SHA1 on the emit's reads' connection (through ioredis, which loads it, when Redis lacks it). */
  async #script(sha: string, writes: readonly Write[], resend: (count: number, words: Array<string | number>) => Promise<unknown>): Promise<unknown> {
    const [keys, args] = keysAndArgs(writes);
    return (await runScript(this.#reads, sha, keys, args, () => resend(keys.length, [...keys, ...args]))).reply;
  }
}
