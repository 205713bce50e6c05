/**
 * Route histories in Redis: per route of an event with history, a stream of its last notifications (gw:hist:{R}, IDs
 * `<offset>-0`, fields d = the eventData JSON and t = the time of the append, ms) and its position (gw:hmeta:{R}:
 * s = last offset, e = epoch). Both keys share a slot (keys.ts), so each change is one script on both.
 *
 * - Append: s + 1 is the offset; an absent epoch is set to the candidate the node passes (Lua has no randomness
 *   of its own), and any stream left from before is deleted (its offsets belong to a lost position). XADD trims
 *   with MAXLEN ~ size: Redis drops whole stream nodes (100 entries by default) once size is passed, so a route
 *   keeps between size and ~size + 100 entries; exact trimming (=) rewrites a node's listpack at every append once
 *   full, and a few more entries kept cost nothing to correctness (a resume checks what the stream holds). The stream
 *   expires ttlSeconds after the last append (an idle route drops its entries), the position positionTtlSeconds after
 *   the last append or read.
 * - Read: the position (created, with the candidate epoch, when absent: a client registered before any emit must
 *   hold an epoch to resume from), and with a range the entries (since, upTo], if the epoch is the client's, there
 *   are at most `limit` of them, the stream holds every one, and the first is younger than ttlSeconds (entries are
 *   in time order: the rest are younger still). Age is thus enforced where it matters, at the read, and by expiry.
 *
 * - Append once (an emit with an idempotency key): the same, unless the key was appended to the route in this epoch
 *   within its window: then nothing is appended and the first append's position is answered. The keys appended live
 *   in a hash per window of time (gw:honce:{R}:<n>, in R's slot; this window's and the last are looked in), which
 *   expires two windows on: bounded by the keyed emits of two windows, with no scan.
 *
 * Times are the nodes' clocks, passed in: Redis's TIME was a sizeable part of the append's cost in Redis
 * (docs/architecture.md, "Measured costs"), and the nodes of a fleet are taken to agree to within a second or so (an
 * entry appended by a node whose clock is ahead by x stays replayable x longer). Lua has no randomness of its own
 * either: the candidate epoch comes from the node too.
 */
import type { Position } from '@herald/protocol';
import type { Result } from 'ioredis';
import type { HistoryConfig } from '../../config/schema.ts';
import type { HistoryRange, HistoryRead, Once, Unrecovered } from '../broker.ts';
import { newEpoch } from '../history.ts';
import type { Commands } from './clients.ts';
import type { Keyspace } from './keys.ts';
import { runScript, scriptSha, type Reads } from './reads.ts';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** Append to a route's history; answers [offset, epoch]. */
    heraldHistoryAppend(
      stream: string, position: string, epoch: string, json: string, size: number, ttlMs: number, positionTtlMs: number, nowMs: number,
    ): Result<[number, string], Context>;
    /** The same, once per idempotency key (`onceId`) within the windows of its two keys; answers [offset, epoch]. */
    heraldHistoryAppendOnce(
      stream: string, position: string, onceNow: string, onceBefore: string, epoch: string, json: string, size: number, ttlMs: number,
      positionTtlMs: number, nowMs: number, onceId: string, onceTtlMs: number,
    ): Result<[number, string], Context>;
    /** A route's position, and a range of its entries: [epoch, offset, why not whole ('' when whole), ...eventData JSON]. */
    heraldHistoryRead(
      stream: string, position: string, epoch: string, sinceOffset: string, sinceEpoch: string, upTo: number, limit: number, ttlMs: number,
      positionTtlMs: number, nowMs: number,
    ): Result<Array<string | number>, Context>;
  }
}

/** Lua: append ARGV[2] to the stream KEYS[1] at the next offset of the position KEYS[2]; sets `offset` and `epoch`. */
const APPEND = `
local offset = redis.call('HINCRBY', KEYS[2], 's', 1)
local epoch = redis.call('HGET', KEYS[2], 'e')
if not epoch then
  epoch = ARGV[1]
  redis.call('HSET', KEYS[2], 'e', epoch)
  redis.call('DEL', KEYS[1])
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], offset .. '-0', 'd', ARGV[2], 't', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
`;

const SCRIPTS = {
  heraldHistoryAppend: `${APPEND}
return {offset, epoch}`,
  heraldHistoryAppendOnce: `
local current = redis.call('HGET', KEYS[2], 'e')
local seen = current and (redis.call('HGET', KEYS[3], ARGV[7]) or redis.call('HGET', KEYS[4], ARGV[7]))
if seen then
  local colon = string.find(seen, ':', 1, true)
  if string.sub(seen, colon + 1) == current then return {tonumber(string.sub(seen, 1, colon - 1)), current} end
end
${APPEND}
redis.call('HSET', KEYS[3], ARGV[7], offset .. ':' .. epoch)
redis.call('PEXPIRE', KEYS[3], ARGV[8])
return {offset, epoch}`,
  heraldHistoryRead: `
local position = redis.call('HMGET', KEYS[2], 's', 'e')
local top, epoch = tonumber(position[1]) or 0, position[2]
if not epoch then
  epoch, top = ARGV[1], 0
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], 's', 0, 'e', epoch)
end
redis.call('PEXPIRE', KEYS[2], ARGV[7])
if ARGV[2] == '' then return {epoch, top, ''} end
if ARGV[3] ~= epoch then return {epoch, top, 'epoch_changed'} end
local since = tonumber(ARGV[2])
local upTo = math.min(tonumber(ARGV[4]), top)
local missed = upTo - since
if missed <= 0 then return {epoch, top, ''} end
if missed > tonumber(ARGV[5]) then return {epoch, top, 'capped'} end
local first = (since + 1) .. '-0'
local entries = redis.call('XRANGE', KEYS[1], first, upTo .. '-0')
if #entries ~= missed or entries[1][1] ~= first or tonumber(entries[1][2][4]) < tonumber(ARGV[8]) - tonumber(ARGV[6]) then
  return {epoch, top, 'too_old'}
end
local answer = {epoch, top, ''}
for i = 1, #entries do answer[i + 3] = entries[i][2][2] end
return answer`,
};

/** An append's answer: the emit's position in the route's history; `resent`: the script went through ioredis. */
export interface Appended {
  position: Position;
  resent: boolean;
}

const appended = (reply: unknown, resent: boolean): Appended => {
  const [offset, epoch] = reply as [number, string];
  return { position: { offset, epoch }, resent };
};

/** The appends' SHA1s, as EVALSHA names them. */
const APPEND_SHA = scriptSha(SCRIPTS.heraldHistoryAppend);
const APPEND_ONCE_SHA = scriptSha(SCRIPTS.heraldHistoryAppendOnce);

export class RedisHistories {
  readonly #redis: Commands;
  readonly #reads: Reads;
  readonly #keys: Keyspace;

  constructor(redis: Commands, reads: Reads, keys: Keyspace) {
    this.#redis = redis;
    this.#reads = reads;
    this.#keys = keys;
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { numberOfKeys: name === 'heraldHistoryAppendOnce' ? 4 : 2, lua });
  }

  /**
   * Every emit of an event with history makes one per route, so it goes where the emit's reads go (reads.ts): with
   * one redis-server, on their lean connection, before the read of the route's nodes (through ioredis, its command
   * objects and their writev were a large share of the node's CPU in unpaced emits). A Redis that no longer holds
   * the script (NOSCRIPT, after a restart) gets it again through ioredis: `resent`, on another connection than the
   * reads.
   */
  append(routeKey: string, json: string, { size, ttlSeconds, positionTtlSeconds }: HistoryConfig, once?: Once): Promise<Appended> {
    const now = Date.now();
    const stream = [this.#keys.history(routeKey), this.#keys.historyPosition(routeKey)] as const;
    const args = [newEpoch(), json, size, ttlSeconds * 1000, positionTtlSeconds * 1000, now] as const;
    if (once === undefined) {
      return this.#evalsha(APPEND_SHA, stream, args, () => this.#redis.heraldHistoryAppend(...stream, ...args));
    }
    const window = Math.floor(now / once.windowMs);
    const keys = [...stream, this.#keys.historyOnce(routeKey, window), this.#keys.historyOnce(routeKey, window - 1)] as const;
    const onceArgs = [...args, once.id, 2 * once.windowMs] as const;
    return this.#evalsha(APPEND_ONCE_SHA, keys, onceArgs, () => this.#redis.heraldHistoryAppendOnce(...keys, ...onceArgs));
  }

  async #evalsha(sha: string, keys: readonly string[], args: ReadonlyArray<string | number>, resend: () => Promise<unknown>): Promise<Appended> {
    const { reply, resent } = await runScript(this.#reads, sha, keys, args, resend);
    return appended(reply, resent);
  }

  async read(routeKey: string, { ttlSeconds, positionTtlSeconds }: HistoryConfig, range: HistoryRange | undefined): Promise<HistoryRead> {
    const keys = this.#keys;
    const [epoch, offset, why, ...jsons] = await this.#redis.heraldHistoryRead(
      keys.history(routeKey), keys.historyPosition(routeKey), newEpoch(),
      range === undefined ? '' : String(range.since.offset), range?.since.epoch ?? '', range?.upTo ?? 0, range?.limit ?? 0,
      ttlSeconds * 1000, positionTtlSeconds * 1000, Date.now(),
    );
    const first = (range?.since.offset ?? 0) + 1;
    return {
      epoch: String(epoch),
      offset: Number(offset),
      entries: jsons.map((json, i) => ({ offset: first + i, json: String(json) })),
      unrecovered: why === '' ? undefined : (why as Unrecovered),
    };
  }
}
