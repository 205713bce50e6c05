/**
 * Control messages and revocations in Redis. A control message goes on the same sharded channel as the emits for
 * its node (`gw:node:{<nodeId>}`), so one node's messages keep their order, marked by its first byte (markers.ts).
 *
 * The live nodes are those of the lease's sorted set `gw:{nodes}` whose heartbeat is younger than the lease: a node
 * that stopped beating is not sent anything, even before a survivor sweeps it. Revocations are one sorted set,
 * `gw:{revocations}` (member: the subject, score: when it was revoked, ms), pruned of what has outlived every token
 * it could concern at each write; one key, so one slot on a Cluster.
 */
import type { Revocation } from '../broker.ts';
import type { Connection } from './connection.ts';
import type { Keyspace } from './keys.ts';
import { Marker, markedFrame } from './markers.ts';

export interface ControlChannelOptions {
  connection: Connection;
  keys: Keyspace;
  nodeId: string;
  leaseMs: number;
  /** This node's own handler: a message to itself does not go through Redis. */
  deliverHere: (message: string) => void;
}

export class ControlChannel {
  readonly #options: ControlChannelOptions;

  constructor(options: ControlChannelOptions) {
    this.#options = options;
  }

  /** The nodes whose heartbeat is within the lease, this one always among them. */
  async liveNodes(): Promise<string[]> {
    const { connection, keys, nodeId, leaseMs } = this.#options;
    const live = await connection.commands.zrangebyscore(keys.nodes, `(${Date.now() - leaseMs}`, '+inf');
    return live.includes(nodeId) ? live : [nodeId, ...live];
  }

  async broadcast(message: string): Promise<string[]> {
    const nodes = await this.liveNodes();
    const framed = markedFrame(Marker.control, message);
    await Promise.all(nodes.map((nodeId) => this.#send(nodeId, message, framed)));
    return nodes;
  }

  sendTo(nodeId: string, message: string): Promise<void> {
    return this.#send(nodeId, message, markedFrame(Marker.control, message));
  }

  async revoke(subject: string, revokedAt: number, keepMs: number): Promise<void> {
    const redis = this.#options.connection.commands;
    const key = this.#options.keys.revocations;
    await redis.zadd(key, 'GT', revokedAt, subject);
    await redis.zremrangebyscore(key, '-inf', `(${revokedAt - keepMs}`);
  }

  async revocations(since: number): Promise<Revocation[]> {
    const flat = await this.#options.connection.commands.zrangebyscore(this.#options.keys.revocations, since, '+inf', 'WITHSCORES');
    const found: Revocation[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) found.push([flat[i]!, Number(flat[i + 1])]);
    return found;
  }

  async #send(nodeId: string, message: string, framed: Buffer): Promise<void> {
    if (nodeId === this.#options.nodeId) return this.#options.deliverHere(message);
    await this.#options.connection.commands.spublish(this.#options.keys.channel(nodeId), framed);
  }
}
