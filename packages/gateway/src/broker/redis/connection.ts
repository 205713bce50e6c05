/**
 * One Redis connection abstraction over a single redis-server or a Redis Cluster: commands, and this node's
 * sharded channel. Commands fail at once while Redis is unreachable (no offline queue), so an emit answers
 * 503 instead of hanging, and route writes are repaired by a resync when Redis is back.
 */
import { Cluster, Redis, type Command, type RedisOptions } from 'ioredis';
import type { Commands, Liveness } from './clients.ts';
import { Probe } from './probe.ts';
import { readsFor, readsThrough, retryDelayMs, type LeanReadsListener, type Reads } from './reads.ts';

export interface RedisTarget {
  url?: string | undefined;
  cluster?: readonly string[] | undefined;
}

export interface Connection {
  readonly commands: Commands;
  /** The emit's reads (reads.ts). */
  readonly reads: Reads;
  /** Whether commands can be sent now. */
  ready(): boolean;
  /** Resolves once commands can be sent (ioredis keeps reconnecting until then). */
  whenReady(): Promise<void>;
  /**
   * The names of the clients connected to Redis now (CLIENT LIST; on a Cluster, of every master). A process that
   * died has none: the kernel closed its sockets and Redis saw it.
   */
  clientNames(): Promise<Set<string>>;
  /** Receive messages on a sharded channel. */
  subscribe(channel: string, onMessage: (message: Buffer) => void): Promise<void>;
  /**
   * Called each time the command connection becomes ready (first time, and after each reconnect); on a Redis Cluster,
   * also each time one master's connection does (a shard back after a failover, or back empty).
   */
  onReady(listener: () => void): void;
  close(): Promise<void>;
}

function commonOptions({ lostAfterMs }: Liveness) {
  return {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // Keep trying forever, at most once a second: the node stays up and recovers by itself.
    retryStrategy: retryDelayMs,
    // A connection attempt into a partition (SYN unanswered) is dropped and tried again, as a silent connection is.
    connectTimeout: lostAfterMs,
  } satisfies RedisOptions;
}

/**
 * One redis-server's connection, whose commands of one turn of the event loop leave in one write. ioredis's
 * autopipelining does that too, but builds a Pipeline per turn (copying the defined scripts into it), a callback
 * and a nextTick per reply, and sends no batch while the previous one awaits its replies. Here each command is
 * written at once, as without autopipelining, into the socket corked until the loop's check phase: the commands
 * of every I/O callback of this turn go out in one system call, and replies are read in order as usual.
 */
class BatchingRedis extends Redis {
  #corked = false;

  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    if (!this.#corked && this.status === 'ready') {
      this.#corked = true;
      const socket = this.stream;
      socket.cork();
      setImmediate(() => {
        this.#corked = false;
        socket.uncork();
      });
    }
    return super.sendCommand(command, stream);
  }
}

const DEFAULT_URL = 'redis://127.0.0.1:6379';

/** The wait before a subscriber whose channel was refused connects again to try it. */
const RESUBSCRIBE_RETRY_MS = 1000;

/** A Cluster master as `host:port`, as ioredis takes it. */
export function hostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
}

const CLUSTER_RETRY = (attempt: number): number => Math.min(100 * attempt, 1000);

/**
 * A client of its own on `target` (one redis-server, or a Cluster), with the options of the broker's connections: for a
 * part that must not share one (the emit stream's read waits in Redis for seconds). No probe: its calls fail and are
 * retried by its owner.
 */
export function clientOf(target: RedisTarget, name: string, liveness: Liveness): Redis | Cluster {
  const common = commonOptions(liveness);
  if (!target.cluster) return new Redis(target.url ?? DEFAULT_URL, { ...common, connectionName: name });
  const { enableOfflineQueue, maxRetriesPerRequest, connectTimeout } = common;
  return new Cluster(target.cluster.map(hostPort), { enableOfflineQueue, clusterRetryStrategy: CLUSTER_RETRY, redisOptions: { maxRetriesPerRequest, connectTimeout, connectionName: name } });
}

/** What the connection tells its owner about Redis's reachability. */
export interface ConnectionListeners {
  leanReads?: LeanReadsListener;
  /** The command connection, once ready, closed (`why`: the last error seen, if any); once until it is ready again. */
  lost?: (why: string) => void;
  /** Ready again after `lost`. */
  back?: () => void;
}

/** `name`: what every connection calls itself (CLIENT SETNAME); a refused SETNAME is ignored (ioredis). */
export function connect(target: RedisTarget, name: string, liveness: Liveness, listeners: ConnectionListeners = {}): Connection {
  const common = commonOptions(liveness);
  if (target.cluster) {
    const cluster = new Cluster(target.cluster.map(hostPort), {
      shardedSubscribers: true,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      clusterRetryStrategy: CLUSTER_RETRY,
      redisOptions: { maxRetriesPerRequest: 1, connectionName: name, connectTimeout: common.connectTimeout },
    });
    // Each master's connection is asked, and cut alone: the other shards go on.
    const probe = new Probe({ ...liveness, clients: () => cluster.nodes('master'), cut: (master, why) => master.stream?.destroy(new Error(why)) });
    // The cluster client keeps sharded subscribers of its own, one per master.
    return connection(cluster, cluster, readsThrough(cluster, false), probe, listeners);
  }
  const url = target.url ?? DEFAULT_URL;
  // A connection in subscriber mode cannot send commands, so channels get a connection of their own.
  const commands = new BatchingRedis(url, { ...common, connectionName: name });
  // Channels are subscribed again by subscribe() below, not by ioredis: its own resubscription leaves a refusal unhandled.
  const subscriber = new Redis(url, { ...common, connectionName: name, enableOfflineQueue: true, autoResubscribe: false });
  const reads = readsFor(url, commands, liveness, listeners.leanReads);
  // One redis-server: a silent command connection means the others are cut off too (the channel's backlog included).
  const cutAll = (why: string) => {
    for (const client of [commands, subscriber]) client.stream?.destroy(new Error(why));
    reads.cut(why);
  };
  const probe = new Probe({ ...liveness, clients: () => [commands], cut: (_, why) => cutAll(why) });
  return connection(commands, subscriber, reads, probe, listeners);
}

function connection(commands: Commands, subscriber: Commands, reads: Reads, probe: Probe, listeners: ConnectionListeners): Connection {
  const clients = [...new Set([commands, subscriber])];
  // Errors are reported through readiness and failed commands; unlistened, they would crash the node.
  for (const client of clients) client.on('error', () => {});
  const reachability = watchReachability(commands, listeners);
  probe.start();
  return {
    commands,
    ready: () => commands.status === 'ready',
    whenReady: () =>
      commands.status === 'ready' ? Promise.resolve() : new Promise((resolve) => commands.once('ready', () => resolve())),
    async subscribe(channel, onMessage) {
      subscriber.on('smessageBuffer', (got: Buffer, message: Buffer) => {
        if (got.toString() === channel) onMessage(message);
      });
      await subscriber.ssubscribe(channel);
      if (subscriber === commands) return; // a Cluster keeps its sharded subscriptions itself
      // After a reconnect. A refusal (an ACL that no longer lets this node read its channel) drops the connection a
      // little later, and it tries again until it is let in; meanwhile the canary says the node's channel is lost.
      const retry = () => void setTimeout(() => (subscriber as Redis).disconnect(true), RESUBSCRIBE_RETRY_MS).unref();
      (subscriber as Redis).on('ready', () => void subscriber.ssubscribe(channel).catch(retry));
    },
    onReady(listener) {
      commands.on('ready', listener);
      if (!(commands instanceof Cluster)) return;
      for (const master of commands.nodes('master')) master.on('ready', listener);
      commands.on('+node', (node: Redis) => void node.on('ready', listener));
    },
    async clientNames() {
      const servers = commands instanceof Cluster ? commands.nodes('master') : [commands];
      const lists = await Promise.all(servers.map((server) => server.client('LIST') as Promise<string>));
      return new Set(lists.flatMap((list) => Array.from(list.matchAll(/ name=(\S+)/g), ([, named]) => named!)));
    },
    reads,
    async close() {
      reachability.closing();
      probe.stop();
      reads.close();
      await Promise.allSettled(clients.map((client) => client.quit()));
    },
  };
}

/**
 * One "lost" when the ready command connection closes, one "back" when it is ready again: ioredis reports every
 * failed reconnect attempt as an error, which would otherwise be a line a second for as long as Redis is away.
 */
function watchReachability(commands: Commands, { lost, back }: ConnectionListeners): { closing(): void } {
  let state: 'starting' | 'up' | 'lost' | 'closing' = 'starting';
  let lastError: string | undefined;
  commands.on('error', (error: Error) => void (lastError = error.message));
  commands.on('ready', () => {
    if (state === 'closing') return;
    if (state === 'lost') back?.();
    state = 'up';
    lastError = undefined;
  });
  commands.on('close', () => {
    if (state !== 'up') return;
    state = 'lost';
    lost?.(lastError ?? 'the connection closed');
  });
  // The node's own close is no loss.
  return { closing: () => void (state = 'closing') };
}
