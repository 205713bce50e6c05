/**
 * The Redis keyspace. Every registry write is idempotent (set members, hash fields, bits; never counters), so a node
 * can write its whole state again at any time (after Redis restarts empty, or after failed writes) without double
 * counting (the histories' counters are no registry: a lost one means a new epoch, history.ts). Every key carries a
 * hash tag, so a Redis Cluster spreads route buckets over its slots, while a node's own keys and channel share one
 * slot (its state is removed in O(its own keys), on one shard).
 *
 * | key                          | type       | holds                                                        |
 * |------------------------------|------------|--------------------------------------------------------------|
 * | gw:routes:{<bucket>}         | hash       | route key -> ids of the nodes holding it, joined by ","      |
 * | gw:shapes:{<event>}          | set        | the criteria shapes in use for the event (sorted field names)|
 * | gw:shape:{<event>|<shape>}   | set        | ids of the nodes holding routes of that shape                |
 * | gw:node:{<nodeId>}:buckets   | bitmap     | bit b set: the node holds (or held) a route in bucket b       |
 * | gw:{nodes}                   | sorted set | nodeId -> last heartbeat, ms                                 |
 * | gw:sweep:{<nodeId>}          | string     | the lock a sweeper holds while removing a dead node's state  |
 * | gw:{config}:routeBuckets     | string     | the fleet's bucket count: every node must use the same       |
 * | gw:{revocations}             | sorted set | subject -> when its tokens were revoked, ms (control.ts)     |
 * | gw:{status}                  | hash       | nodeId -> its status record, JSON (status.ts)                |
 * | channel gw:node:{<nodeId>}   | sharded    | emits and control messages for that node (SPUBLISH / SSUBSCRIBE) |
 * | gw:node:<nodeId>             | client name| the node's connections (CLIENT SETNAME): stalled, not dead  |
 * | gw:hist:{<routeKey>}         | stream     | a history event's route: its last notifications, IDs <offset>-0 |
 * | gw:hmeta:{<routeKey>}        | hash       | that route's position: s = last offset, e = epoch            |
 * | gw:hshapes:{<event>}         | sorted set | a history event's shapes -> when a node last held one, ms    |
 * | gw:once:{<id>}               | string     | an emit's idempotency key: pending, or its answer (once.ts)  |
 * | gw:honce:{<routeKey>}:<n>    | hash       | keys appended to that route in window n -> offset:epoch      |
 * | gw:shard:{<tag>}             | string     | a Redis Cluster master's data's incarnation (shards.ts)      |
 *
 * A route's bucket is bucketOf(routeKey, routeBuckets): many routes share one small hash, which Redis keeps as a
 * listpack (no per-route key, no per-route dict entry). See routes.ts.
 *
 * A route's history and position are changed together by one script (history.ts), so they must share a slot. A hash
 * tag is the text between the first "{" and the first "}" after it. Both keys are "<brace-free prefix>{<routeKey>}",
 * so in both the first "{" is the one after the prefix, and the tag runs to the first "}" at or after the start of
 * the route key: the same text in both, whatever braces the route key holds (criteria values are clients' strings).
 * It is never empty (an empty tag would hash the whole key, which differs): a route key starts with its event name,
 * which is never empty and holds no "}". Events without history have none of these keys.
 */

export interface Keyspace {
  routeBucket(bucket: number): string;
  shapes(event: string): string;
  shapeNodes(event: string, shapeKey: string): string;
  nodeBuckets(nodeId: string): string;
  readonly nodes: string;
  sweepLock(nodeId: string): string;
  readonly routeBuckets: string;
  readonly revocations: string;
  readonly status: string;
  channel(nodeId: string): string;
  /** The name the node's connections give themselves (CLIENT SETNAME takes no spaces: the id is URI-encoded). */
  clientName(nodeId: string): string;
  history(routeKey: string): string;
  historyPosition(routeKey: string): string;
  historyShapes(event: string): string;
  /** An idempotency key (its id: a digest, brace-free). */
  once(id: string): string;
  /** The idempotency keys appended to a route's history in the `window`-th window since the epoch of time. */
  historyOnce(routeKey: string, window: number): string;
  /** A Redis Cluster master's marker: `tag` is chosen so that the key is on one of its slots. */
  shardMarker(tag: string): string;
}

export function keyspace(prefix = 'gw'): Keyspace {
  // Every emit names a bucket, and every route write: each key is built once (built each time, they showed in an
  // unpaced notify run's profile). At most redis.routeBuckets of them.
  const bucketKeys = new Map<number, string>();
  return {
    routeBucket: (bucket) => {
      let key = bucketKeys.get(bucket);
      if (key === undefined) bucketKeys.set(bucket, (key = `${prefix}:routes:{${bucket}}`));
      return key;
    },
    shapes: (event) => `${prefix}:shapes:{${event}}`,
    shapeNodes: (event, shapeKey) => `${prefix}:shape:{${event}|${shapeKey}}`,
    nodeBuckets: (nodeId) => `${prefix}:node:{${nodeId}}:buckets`,
    nodes: `${prefix}:{nodes}`,
    sweepLock: (nodeId) => `${prefix}:sweep:{${nodeId}}`,
    routeBuckets: `${prefix}:{config}:routeBuckets`,
    revocations: `${prefix}:{revocations}`,
    status: `${prefix}:{status}`,
    channel: (nodeId) => `${prefix}:node:{${nodeId}}`,
    clientName: (nodeId) => `${prefix}:node:${encodeURIComponent(nodeId)}`,
    history: (routeKey) => `${prefix}:hist:{${routeKey}}`,
    historyPosition: (routeKey) => `${prefix}:hmeta:{${routeKey}}`,
    historyShapes: (event) => `${prefix}:hshapes:{${event}}`,
    once: (id) => `${prefix}:once:{${id}}`,
    historyOnce: (routeKey, window) => `${prefix}:honce:{${routeKey}}:${window}`,
    shardMarker: (tag) => `${prefix}:shard:{${tag}}`,
  };
}

/**
 * The bucket of a route key: 32-bit FNV-1a over its UTF-16 code units, modulo the bucket count. Every node
 * computes the same bucket for the same key, so writers and emitters meet in one hash.
 */
export function bucketOf(routeKey: string, routeBuckets: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < routeKey.length; i++) hash = Math.imul(hash ^ routeKey.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % routeBuckets;
}
