/**
 * The Broker owns everything that crosses nodes: which node holds which route, and carrying an emit to
 * those nodes. The hub tells it when a route first appears on this node and when it last leaves, never
 * once per client; an emit is published once per node that holds a matching route, never once per client.
 * It also carries control messages (disconnects, revocations, presence queries: src/session/) to every live node
 * or to one, and stores revocations, without reading what they say.
 */
import type { Position } from '@herald/protocol';
import type { HistoryConfig } from '../config/schema.ts';
import type { Route } from '../events/routing.ts';

/**
 * Called on the receiving node for every emit that matched one of its routes. Must not mutate eventData.
 * `positions`: for an event with history, route key -> the position the emit was given in that route's history;
 * with them, `json`: eventData as JSON (the broker has it, and the history's notifications are written from it).
 */
export type DeliveryHandler = (event: string, eventData: Record<string, unknown>, positions?: ReadonlyMap<string, Position>, json?: string) => void;

/**
 * How Broker.publish rejects an emit it carried part of the way: it reached `nodes` nodes (this one counts), but not
 * every node holding its routes, or it is in a route's history and was sent on to nobody. Not a refusal: a retry would
 * deliver it twice to the nodes it reached, and appends nothing again where it is appended. For an event with history
 * the nodes it missed have it from the history (a gap fill when their route's next emit comes, or a client's resume);
 * without history, their clients miss it. Answered 202 (docs/protocol.md 5).
 */
export class DeliveryPending extends Error {
  readonly nodes: number;

  constructor(nodes: number, cause: unknown) {
    super(`published to ${nodes} node(s), not to every one holding its routes: ${(cause as Error).message}`, { cause });
    this.name = 'DeliveryPending';
    this.nodes = nodes;
  }
}

/** The events that keep a history, by name (config events.<name>.history). */
export type Histories = ReadonlyMap<string, HistoryConfig>;

/** One notification of a route's history. */
export interface HistoryEntry {
  offset: number;
  /** The emit's eventData as JSON, as it was stored. */
  json: string;
}

/** Why a read of a range did not answer it whole. */
export type Unrecovered = 'epoch_changed' | 'too_old' | 'capped';

/** A route's history as read (Broker.history). */
export interface HistoryRead {
  /** The history's epoch and last offset now (0: nothing appended in this epoch yet). */
  epoch: string;
  offset: number;
  /** The range asked for, in order, when it could be read whole; else empty. */
  entries: HistoryEntry[];
  /** Why the range could not be read whole; undefined when it was (or none was asked for). */
  unrecovered: Unrecovered | undefined;
}

/** A range of a route's history: the entries after `since` (in its epoch), up to `upTo`, if there are at most `limit`. */
export interface HistoryRange {
  since: Position;
  upTo: number;
  limit: number;
}

/** Called on a node for every control message sent to it (broadcast or sendTo), in the order sent from one node. */
export type ControlHandler = (message: string) => void;

/** Called on a node for every canary put on its channel (Broker.sendCanary). */
export type CanaryHandler = (canary: string) => void;

/**
 * What claiming an emit's idempotency key found (Broker.claim): the key is new (this emit publishes, then settles
 * it), another emit with it is being published, or one was published and answered `answer`. `digest` is the first
 * emit's body's digest: a key reused for another body is the caller's mistake.
 */
export type Claimed = { state: 'new' } | { state: 'pending'; digest: string } | { state: 'done'; digest: string; answer: string };

/** An emit's idempotency key, as the broker keeps it: fleet-wide (`id`, already scoped to its API user), for `windowMs`. */
export interface Once {
  id: string;
  windowMs: number;
}

/** A revocation as stored: the subject (e.g. `person:<generator>:<id>`) and when its tokens were revoked, ms. */
export type Revocation = readonly [subject: string, revokedAt: number];

export interface Broker {
  /** This node's id in the fleet. */
  readonly nodeId: string;
  /** Whether the broker can carry emits now (a node that cannot reports not-ready). */
  ready(): boolean;
  /** Start receiving emits, control messages and canaries for this node. */
  start(onDelivery: DeliveryHandler, onControl?: ControlHandler, onCanary?: CanaryHandler): Promise<void>;
  /**
   * The first local subscriber on `route` appeared. Settles once other nodes can route to it, or once the
   * broker has taken charge of writing it when it can (Redis unreachable): it never rejects. The Redis broker
   * writes the adds of a millisecond together, so one may wait up to that long when clients register fast.
   * Calls for one route take effect in call order.
   */
  addRoute(route: Route): Promise<void>;
  /**
   * The last local subscriber on `route` left. Settles once the removal is written, which may be a little later
   * (the Redis broker writes the removals of 10 ms together); a route added again before then stays. Never rejects.
   */
  removeRoute(route: Route): Promise<void>;
  /**
   * Carry an emit to every node holding a route it matches; answers how many nodes it was published to.
   * The handler may run before or after the promise settles. Rejects with GatewayError UNAVAILABLE when the fleet
   * cannot be reached and nothing was published, with DeliveryPending when part of it was. `once`: the emit's
   * idempotency key. An event with history then appends to each route at most once per key within its window, in the
   * same atomic step as the append: an emit published again under the same key (its first publisher died before
   * settling it) carries its first positions, which receivers drop if they had them.
   */
  publish(event: string, eventData: Record<string, unknown>, once?: Once): Promise<number>;
  /**
   * Claim an idempotency key (`once.id`, fleet-wide) for an emit whose body digests to `digest`: answers what the key
   * holds, and if nothing, holds it as pending for `pendingMs` (a publisher that dies lets it go then). Rejects with
   * UNAVAILABLE.
   */
  claim(once: Once, digest: string, pendingMs: number): Promise<Claimed>;
  /**
   * Settle a claimed key: with `answer`, the emit was published and is answered so to every repeat within the key's
   * window; without, it was not (refused before publishing), and the key is free again. Rejects with UNAVAILABLE.
   */
  settle(once: Once, digest: string, answer: string | undefined): Promise<void>;
  /**
   * Carry a control message to every live node, this one included (directly, before this settles); answers the ids of
   * the nodes it was sent to. A node whose lease has run out is not live. Rejects with UNAVAILABLE when the fleet
   * cannot be reached.
   */
  broadcast(message: string): Promise<readonly string[]>;
  /** Carry a control message to one node (this one: directly). Rejects with UNAVAILABLE when the fleet cannot be reached. */
  sendTo(nodeId: string, message: string): Promise<void>;
  /**
   * Store that `subject`'s tokens issued until `revokedAt` (ms) are revoked (a later revocation of the same subject
   * wins), and forget every revocation older than `keepMs` before it. Rejects with UNAVAILABLE.
   */
  revoke(subject: string, revokedAt: number, keepMs: number): Promise<void>;
  /** The stored revocations made at or after `since` (ms). Rejects with UNAVAILABLE. */
  revocations(since: number): Promise<Revocation[]>;
  /**
   * A route's history (events with history only): its epoch and last offset, and with `range` the entries in it.
   * A route without history yet gets one (a new epoch), so that the emits after this read agree with it. Rejects
   * with GatewayError UNAVAILABLE when the fleet cannot be reached.
   */
  history(route: Route, range?: HistoryRange): Promise<HistoryRead>;
  /** The live nodes (those broadcast reaches), this one included. Rejects with UNAVAILABLE. */
  liveNodes(): Promise<readonly string[]>;
  /**
   * Put a canary on a node's channel. Unlike a control message, one to this node goes the whole way too (through
   * Redis): what a canary checks is that the node's channel delivers. Rejects with UNAVAILABLE.
   */
  sendCanary(nodeId: string, canary: string): Promise<void>;
  /** Keep this node's status record (a short JSON text) where every node reads it, while this node is live. Rejects with UNAVAILABLE. */
  putStatus(record: string): Promise<void>;
  /** The last status record of every live node that has one, by node id. Rejects with UNAVAILABLE. */
  fleetStatus(): Promise<ReadonlyMap<string, string>>;
  /** Stop receiving, and forget this node's routes (in Redis too: a drained node leaves nothing behind). */
  close(): Promise<void>;
}

/** What a broker reports about the fleet's health; the node turns it into metrics and logs. */
export interface BrokerObserver {
  /** This node wrote all its routes again (start, Redis restarted or flushed, or after failed writes). */
  resynced(routes: number): void;
  /** This node removed a dead node's routes. */
  swept(deadNodeId: string, routes: number): void;
  /** This node judged no one dead this round: its own heartbeat ran late, so its clock of others' is not to be trusted. */
  sweepDeferred(): void;
  /** A node's lease lapsed, but Redis still holds its connection: stalled rather than dead, so not swept (yet). */
  spared(nodeId: string): void;
  /** A registry write failed; a resync will repair it. */
  writeFailed(error: Error): void;
  /**
   * The emit's registry reads moved onto their lean connection to Redis (`lean`) or back onto the broker's
   * client (not `lean`; `why`). Only a broker on one redis-server at a plain URL has the lean connection.
   */
  leanReads(lean: boolean, why: string): void;
  /** A message on this node's channel could not be read or delivered: it is dropped, and nothing else is. */
  undeliverable(error: unknown): void;
  /** An emit of an event with history was appended to `routes` routes' histories. */
  historyAppended(routes: number): void;
  /** An emit's appends failed (the emit is answered 503). */
  historyAppendFailed(error: Error): void;
  /** The connection to Redis was lost (`why`); told once until it is back. */
  redisLost(why: string): void;
  /** Redis answers again after redisLost. */
  redisBack(): void;
}
