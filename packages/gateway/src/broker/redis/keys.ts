/**
 * The Redis keyspace. Every write is idempotent (sets, not counters), so a node can write its whole state
 * again at any time (after Redis restarts empty, or after failed writes) without double counting.
 * Every key carries a hash tag, so a Redis Cluster spreads routes over its slots, while
 * a node's own keys and channel share one slot (its state is removed in O(its own keys), on one shard).
 *
 * | key                          | type       | holds                                                        |
 * |------------------------------|------------|--------------------------------------------------------------|
 * | gw:route:{<routeKey>}        | set        | ids of the nodes with a local subscriber on the route        |
 * | gw:shapes:{<event>}          | set        | the criteria shapes in use for the event (sorted field names)|
 * | gw:shape:{<event>|<shape>}   | set        | ids of the nodes holding routes of that shape                |
 * | gw:node:{<nodeId>}:routes    | set        | the route keys a node holds (for the sweep and for resync)   |
 * | gw:{nodes}                   | sorted set | nodeId -> last heartbeat, ms                                 |
 * | gw:sweep:{<nodeId>}          | string     | the lock a sweeper holds while removing a dead node's state  |
 * | channel gw:node:{<nodeId>}   | sharded    | emits for that node (SPUBLISH / SSUBSCRIBE)                  |
 */
export interface Keyspace {
  route(routeKey: string): string;
  shapes(event: string): string;
  shapeNodes(event: string, shapeKey: string): string;
  nodeRoutes(nodeId: string): string;
  readonly nodes: string;
  sweepLock(nodeId: string): string;
  channel(nodeId: string): string;
}

export function keyspace(prefix = 'gw'): Keyspace {
  return {
    route: (routeKey) => `${prefix}:route:{${routeKey}}`,
    shapes: (event) => `${prefix}:shapes:{${event}}`,
    shapeNodes: (event, shapeKey) => `${prefix}:shape:{${event}|${shapeKey}}`,
    nodeRoutes: (nodeId) => `${prefix}:node:{${nodeId}}:routes`,
    nodes: `${prefix}:{nodes}`,
    sweepLock: (nodeId) => `${prefix}:sweep:{${nodeId}}`,
    channel: (nodeId) => `${prefix}:node:{${nodeId}}`,
  };
}
