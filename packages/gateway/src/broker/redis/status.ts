/**
 * The fleet's status records: one hash `gw:{status}`, a field per node holding its last record (JSON). A node writes
 * its own every status interval; the lease's sweep and a node's drain remove a node's field (lease.ts), and readers
 * keep only the fields of live nodes, so a node that died shows until it is no longer live, not until it is swept.
 */
import type { Connection } from './connection.ts';
import type { Keyspace } from './keys.ts';

export async function putStatus(connection: Connection, keys: Keyspace, nodeId: string, record: string): Promise<void> {
  await connection.commands.hset(keys.status, nodeId, record);
}

export async function statusOf(connection: Connection, keys: Keyspace, nodes: readonly string[]): Promise<Map<string, string>> {
  if (nodes.length === 0) return new Map();
  const records = await connection.commands.hmget(keys.status, ...nodes);
  return new Map(nodes.flatMap((nodeId, i) => (records[i] == null ? [] : [[nodeId, records[i]!]])));
}
