/**
 * The route registry in Redis: which nodes hold which route. Routes live in hashes bucketed by their key
 * (keys.ts bucketOf): field = route key, value = the ids of the nodes holding it, joined by NODE_ID_SEPARATOR.
 * A bucket of up to hash-max-listpack-entries fields stays a listpack, where a route costs its key and its ids
 * and little else; a key of its own per route (a set) cost a dict entry, a key object and the set, ~380 bytes.
 *
 * Each change of a bucket is one Lua script on that one key: atomic, idempotent, and fine on a Redis Cluster.
 * Beside the buckets, each node keeps a bitmap of the buckets where it holds routes (and some where it held
 * them: see #marked), so that a sweeper (or the node itself, restarted under the same id) finds them without a
 * list of the node's route keys in Redis.
 */
import type { Result } from 'ioredis';
import { ConfigError } from '../../errors.ts';
import type { Commands } from './clients.ts';
import type { Connection } from './connection.ts';
import type { Reads } from './reads.ts';
import { NODE_ID_SEPARATOR as SEP } from '../../node-id.ts';
import { bucketOf, type Keyspace } from './keys.ts';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** Add a node to a route. */
    heraldRouteAdd(bucket: string, routeKey: string, nodeId: string): Result<number, Context>;
    /** Remove a node from a route; the field goes with its last node. */
    heraldRouteRemove(bucket: string, routeKey: string, nodeId: string): Result<number, Context>;
    /** Remove a node from every route of a bucket; answers the route keys it held there. */
    heraldRouteStrip(bucket: string, nodeId: string): Result<string[], Context>;
  }
}

/** Lua: take `id` out of `held` (the field `routeKey` of `bucket`); answers 1 if it was there. */
const DROP = `
local function drop(bucket, routeKey, held, id)
  local padded = '${SEP}' .. held .. '${SEP}'
  local from, to = string.find(padded, '${SEP}' .. id .. '${SEP}', 1, true)
  if not from then return 0 end
  local rest = string.sub(string.sub(padded, 1, from) .. string.sub(padded, to + 1), 2, -2)
  if rest == '' then redis.call('HDEL', bucket, routeKey) else redis.call('HSET', bucket, routeKey, rest) end
  return 1
end
`;

const SCRIPTS = {
  heraldRouteAdd: `
local held = redis.call('HGET', KEYS[1], ARGV[1])
if not held then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
if string.find('${SEP}' .. held .. '${SEP}', '${SEP}' .. ARGV[2] .. '${SEP}', 1, true) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], held .. '${SEP}' .. ARGV[2])
return 1`,
  heraldRouteRemove: `${DROP}
local held = redis.call('HGET', KEYS[1], ARGV[1])
if not held then return 0 end
return drop(KEYS[1], ARGV[1], held, ARGV[2])`,
  heraldRouteStrip: `${DROP}
local fields = redis.call('HGETALL', KEYS[1])
local stripped = {}
for i = 1, #fields, 2 do
  if drop(KEYS[1], fields[i], fields[i + 1], ARGV[1]) == 1 then stripped[#stripped + 1] = fields[i] end
end
return stripped`,
};

export class RouteRegistry {
  readonly #redis: Commands;
  readonly #reads: Reads;
  readonly #keys: Keyspace;
  readonly #nodeId: string;
  readonly #buckets: number;
  /**
   * The buckets whose bit this node has set. A bit is set with the bucket's first route here and stays set when
   * its routes go, until the node holds no route at all: a client whose route comes and goes (churn) then costs
   * two commands, not four, and a sweep merely strips a few buckets that hold nothing of the node's.
   */
  readonly #marked = new Set<number>();

  constructor({ commands: redis, reads }: Connection, keys: Keyspace, nodeId: string, routeBuckets: number) {
    this.#redis = redis;
    this.#reads = reads;
    this.#keys = keys;
    this.#nodeId = nodeId;
    this.#buckets = routeBuckets;
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 1, lua });
  }

  /**
   * Record this node's bucket count as the fleet's, or refuse a different one already recorded: nodes that
   * bucket routes differently would look for each other's routes in the wrong hashes.
   */
  async claimBucketCount(): Promise<void> {
    const key = this.#keys.routeBuckets;
    const recorded = await this.#redis.set(key, this.#buckets, 'NX', 'GET');
    if (recorded === null || Number(recorded) === this.#buckets) return;
    throw ConfigError.forFields([[
      'redis.routeBuckets',
      `this node has ${this.#buckets}, but the fleet on this Redis uses ${recorded} (recorded in ${key}). Every node ` +
        `of a fleet must use the same count; to change it, stop every node, delete ${key}, and start them all with ` +
        'the new count.',
    ]]);
  }

  async add(routeKey: string): Promise<void> {
    const bucket = bucketOf(routeKey, this.#buckets);
    const unmarked = !this.#marked.has(bucket);
    if (unmarked) this.#marked.add(bucket);
    // The bit is sent first: a node that dies between the two leaves no route that its sweeper cannot find.
    const marked = unmarked ? this.#redis.setbit(this.#keys.nodeBuckets(this.#nodeId), bucket, 1) : undefined;
    const added = this.#redis.heraldRouteAdd(this.#keys.routeBucket(bucket), routeKey, this.#nodeId);
    // Most routes need the one command: no Promise.all (an array, a promise and a reaction each) for them.
    await (marked ? Promise.all([marked, added]) : added);
  }

  /**
   * `last`: the node holds no other route (the broker, which keeps the node's routes, knows). Its bitmap is then
   * deleted: a node without routes leaves no key.
   */
  async remove(routeKey: string, last: boolean): Promise<void> {
    const bucket = bucketOf(routeKey, this.#buckets);
    if (last) this.#marked.clear();
    const removed = this.#redis.heraldRouteRemove(this.#keys.routeBucket(bucket), routeKey, this.#nodeId);
    await (last ? Promise.all([removed, this.#redis.del(this.#keys.nodeBuckets(this.#nodeId))]) : removed);
  }

  /** The hash a route is kept in. */
  bucketKey(routeKey: string): string {
    return this.#keys.routeBucket(bucketOf(routeKey, this.#buckets));
  }

  /** The ids of the nodes holding a route: one HGET. */
  async nodesOf(routeKey: string): Promise<string[]> {
    const ids = await this.#reads.hget(this.bucketKey(routeKey), routeKey);
    return ids === null ? [] : ids.split(SEP);
  }

  /** This node's state written again (resync): every route (idempotent scripts), its bitmap, the fleet's count. */
  async writeAll(routeKeys: Iterable<string>): Promise<void> {
    const buckets = [...routeKeys].map((routeKey) => [routeKey, bucketOf(routeKey, this.#buckets)] as const);
    this.#marked.clear();
    for (const [, bucket] of buckets) this.#marked.add(bucket);
    const writes: Promise<unknown>[] = [this.#redis.set(this.#keys.routeBuckets, this.#buckets, 'NX'), this.#writeBitmap()];
    for (const [routeKey, bucket] of buckets) writes.push(this.#redis.heraldRouteAdd(this.#keys.routeBucket(bucket), routeKey, this.#nodeId));
    await Promise.all(writes);
  }

  /** The buckets where this node holds routes, and some where it held them: those its bitmap marks. */
  heldBuckets(): number[] {
    return [...this.#marked];
  }

  /** The buckets where a node (a dead one, or this one's previous life) recorded routes. */
  async bucketsOf(nodeId: string): Promise<number[]> {
    const bitmap = await this.#redis.getBuffer(this.#keys.nodeBuckets(nodeId));
    const buckets: number[] = [];
    for (const [byte, bits] of (bitmap ?? Buffer.alloc(0)).entries()) {
      for (let bit = 0; bit < 8; bit++) if (bits & (0x80 >> bit)) buckets.push(byte * 8 + bit);
    }
    return buckets;
  }

  /** Take a node out of every route of these buckets; answers the route keys it held there. */
  async strip(nodeId: string, buckets: Iterable<number>): Promise<string[]> {
    const stripped = await Promise.all([...buckets].map((bucket) => this.#redis.heraldRouteStrip(this.#keys.routeBucket(bucket), nodeId)));
    return stripped.flat();
  }

  /** The whole bitmap in one SET (bit b of SETBIT is bit 7 - b % 8 of byte b / 8), or none without routes. */
  #writeBitmap(): Promise<unknown> {
    const key = this.#keys.nodeBuckets(this.#nodeId);
    if (this.#marked.size === 0) return this.#redis.del(key);
    const bitmap = Buffer.alloc(Math.ceil(this.#buckets / 8));
    for (const bucket of this.#marked) bitmap.writeUInt8(bitmap.readUInt8(bucket >> 3) | (0x80 >> (bucket & 7)), bucket >> 3);
    return this.#redis.set(key, bitmap);
  }
}
