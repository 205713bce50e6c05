/**
 * The emit stream in Redis (broker/ingest.ts): a Redis stream of the fleet's Redis, read by every node in one consumer
 * group (XREADGROUP), acknowledged once published (XACK), claimed back from a node that went away (XAUTOCLAIM). Two
 * connections of its own: one that waits in the blocking read, one for the rest (an XACK must not wait behind it).
 * One key, so on a Redis Cluster the stream is in one slot; its dead-letter stream is another key, written apart.
 */
import type { Cluster, Redis, Result } from 'ioredis';
import type { IngestStream, StreamBacklog, StreamEntry } from '../ingest.ts';
import type { Liveness } from './clients.ts';
import { clientOf, type RedisTarget } from './connection.ts';

export interface RedisStreamOptions {
  target: RedisTarget;
  /** As the broker's connections: a connection attempt unanswered this long is tried again. */
  liveness: Liveness;
  stream: string;
  group: string;
  /** This node: its consumer's name in the group. */
  consumer: string;
  deadLetterStream: string;
  /** The dead-letter stream keeps about this many entries. */
  deadLetterMaxLen: number;
  /** A consumer of the group with nothing pending and idle this long (a node gone for good) is removed at a trim. */
  forgetConsumerMs: number;
}

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** Take the lease (`holder`, for `ms`) if free, or extend it if `holder` holds it: 1; else 0. */
    heraldLead(key: string, holder: string, ms: number): Result<number, Context>;
    /** Give the lease up if `holder` holds it. */
    heraldResign(key: string, holder: string): Result<number, Context>;
  }
}

const SCRIPTS = {
  heraldLead: `
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`,
  heraldResign: `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`,
};

/** An entry as Redis answers it: [id, [field, value, ...]], or null for one deleted since it was delivered. */
type RawEntry = [string, string[]] | null;

const entriesOf = (raw: readonly RawEntry[]): StreamEntry[] =>
  raw.flatMap((entry) => {
    if (entry === null) return [];
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < entry[1].length; i += 2) fields[entry[1][i]!] = entry[1][i + 1]!;
    return [{ id: entry[0], fields }];
  });

const msOf = (id: string): number => Number(id.slice(0, id.indexOf('-')));

/** The id right after `id`: XTRIM MINID keeps it and what follows. */
function after(id: string): string {
  const dash = id.indexOf('-');
  return `${id.slice(0, dash)}-${Number(id.slice(dash + 1)) + 1}`;
}

export class RedisStream implements IngestStream {
  readonly #options: RedisStreamOptions;
  readonly #reader: Redis | Cluster;
  readonly #commands: Redis | Cluster;

  constructor(options: RedisStreamOptions, name: string) {
    this.#options = options;
    this.#reader = clientOf(options.target, name, options.liveness);
    this.#commands = clientOf(options.target, name, options.liveness);
    // Failures are seen by each call; unlistened, an error event would end the process.
    for (const each of [this.#reader, this.#commands]) each.on('error', () => {});
    for (const [name, lua] of Object.entries(SCRIPTS)) this.#commands.defineCommand(name, { numberOfKeys: 1, lua });
  }

  /** The lease's key: the stream's, with a suffix (on a Cluster, another slot: it is written alone). */
  get #leaseKey(): string {
    return `${this.#options.stream}:reader`;
  }

  async lead(ms: number): Promise<boolean> {
    return (await this.#commands.heraldLead(this.#leaseKey, this.#options.consumer, ms)) === 1;
  }

  async resign(): Promise<void> {
    await this.#commands.heraldResign(this.#leaseKey, this.#options.consumer);
  }

  async start(): Promise<void> {
    const { stream, group } = this.#options;
    const ready = (client: Redis | Cluster) => new Promise<void>((resolve) => (client.status === 'ready' ? resolve() : client.once('ready', () => resolve())));
    await Promise.all([ready(this.#commands), ready(this.#reader)]);
    await this.#commands.xgroup('CREATE', stream, group, '0', 'MKSTREAM').catch((error: Error) => {
      if (!error.message.startsWith('BUSYGROUP')) throw error;
    });
  }

  async read(count: number, blockMs: number): Promise<StreamEntry[]> {
    const { stream, group, consumer } = this.#options;
    const reply = (await this.#reader.xreadgroup('GROUP', group, consumer, 'COUNT', count, 'BLOCK', blockMs, 'STREAMS', stream, '>')) as
      | Array<[string, RawEntry[]]>
      | null;
    return reply === null ? [] : entriesOf(reply[0]![1]);
  }

  async claim(idleMs: number, count: number): Promise<StreamEntry[]> {
    const { stream, group, consumer } = this.#options;
    const [, claimed] = (await this.#commands.xautoclaim(stream, group, consumer, idleMs, '0-0', 'COUNT', count)) as [string, RawEntry[]];
    return entriesOf(claimed);
  }

  async ack(ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.#commands.xack(this.#options.stream, this.#options.group, ...ids);
  }

  async deadLetter(entry: StreamEntry, reason: string): Promise<void> {
    const { deadLetterStream, deadLetterMaxLen } = this.#options;
    const fields = Object.entries(entry.fields).flat();
    await this.#commands.xadd(deadLetterStream, 'MAXLEN', '~', deadLetterMaxLen, '*', 'reason', reason, 'id', entry.id, ...fields);
    await this.ack([entry.id]);
  }

  async backlog(): Promise<StreamBacklog> {
    const { pending, pendingFrom, lastDelivered, lag } = await this.#state();
    const next = await this.#firstAfter(lastDelivered);
    const oldest = Math.min(pendingFrom === undefined ? Infinity : msOf(pendingFrom), next === undefined ? Infinity : msOf(next));
    return { pending, undelivered: lag, oldestMs: oldest === Infinity ? undefined : Math.max(0, Date.now() - oldest) };
  }

  async trim(): Promise<void> {
    const { stream, group, forgetConsumerMs } = this.#options;
    const { pendingFrom, lastDelivered } = await this.#state();
    const next = await this.#firstAfter(lastDelivered);
    const keepFrom = [pendingFrom, next].filter((id): id is string => id !== undefined).sort((a, b) => msOf(a) - msOf(b) || a.localeCompare(b))[0];
    // Exact, not ~: every few seconds, and what it keeps is what may still be published.
    await this.#commands.xtrim(stream, 'MINID', keepFrom ?? after(lastDelivered));
    const consumers = (await this.#commands.xinfo('CONSUMERS', stream, group)) as Array<Array<string | number>>;
    for (const fields of consumers) {
      const consumer = fieldsOf(fields);
      if (Number(consumer.pending) === 0 && Number(consumer.idle) > forgetConsumerMs) await this.#commands.xgroup('DELCONSUMER', stream, group, String(consumer.name));
    }
  }

  async close(): Promise<void> {
    // disconnect, not quit: a quit would wait for the blocking read to end (and for a connection still being made).
    this.#reader.disconnect();
    this.#commands.disconnect();
  }

  /** The group's pending count and oldest pending id (XPENDING), its last delivered id and lag (XINFO GROUPS). */
  async #state(): Promise<{ pending: number; pendingFrom: string | undefined; lastDelivered: string; lag: number }> {
    const { stream, group } = this.#options;
    const [summary, groups] = await Promise.all([
      this.#commands.xpending(stream, group) as Promise<[number, string | null, string | null, unknown]>,
      this.#commands.xinfo('GROUPS', stream) as Promise<Array<Array<string | number>>>,
    ]);
    const mine = groups.map(fieldsOf).find((each) => each.name === group);
    return {
      pending: Number(summary[0]),
      pendingFrom: summary[1] ?? undefined,
      lastDelivered: String(mine?.['last-delivered-id'] ?? '0-0'),
      lag: Number(mine?.lag ?? 0),
    };
  }

  async #firstAfter(id: string): Promise<string | undefined> {
    const [first] = (await this.#commands.xrange(this.#options.stream, `(${id}`, '+', 'COUNT', 1)) as Array<[string, string[]]>;
    return first?.[0];
  }
}

function fieldsOf(flat: ReadonlyArray<string | number>): Record<string, string | number> {
  const fields: Record<string, string | number> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = flat[i + 1]!;
  return fields;
}
