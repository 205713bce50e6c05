/**
 * One emit, whichever way it came (the fastify route, the fast path, an item of a batch): its checks in their order, its
 * Idempotency-Key, its publish and its answer. Routes only read their request into this, and write its answer back.
 */
import { MAX_JSON_DEPTH, nestedDeeperThan } from '@herald/protocol';
import type { ApiUser } from '../auth/authenticator.ts';
import { DeliveryPending, type Broker, type Once } from '../broker/broker.ts';
import type { EmitConfig } from '../config/schema.ts';
import type { DeliveryBacklog } from '../hub/backlog.ts';
import type { DeliveryLag } from '../hub/lag.ts';
import { GatewayError } from '../errors.ts';
import type { EventCatalogue } from '../events/catalogue.ts';
import type { Metrics } from '../metrics.ts';
import { IdempotencyKeys, isReplayed, type ClaimedKey, type Published, type Replayed } from './idempotency.ts';

/** What an emit is checked against and published through: the node's, shared by every way an emit comes. */
export interface EmitOptions {
  catalogue: EventCatalogue;
  broker: Broker;
  metrics: Metrics;
  /** The hub's: what an emit checks before it is taken, and what a waiting one waits for. */
  backlog: DeliveryBacklog;
  /** The hub's: how far behind in time its busy connections are, checked and waited for as the backlog is. */
  lag: DeliveryLag;
  whenBacklogged: EmitConfig['whenBacklogged'];
  /** Emits' Idempotency-Keys, fleet-wide. */
  keys: IdempotencyKeys;
}

/**
 * An emit's answer: its name and how it was published; `replayed`: a repeat of an emit already published under its
 * Idempotency-Key (nothing published now; the rest is the first's).
 */
export interface EmitAnswer extends Published {
  name: string;
  replayed: boolean;
}

export interface EmitBody {
  name: string;
  eventData: Record<string, unknown>;
}

/** Seconds a refused emit is told to wait: the backlog and the lag drain at the clients' pace, within a second or so. */
const OVERLOADED_RETRY_AFTER_S = 1;

/** One emit, once its caller is known and its body's shape checked. */
export type Emitter = (apiUser: ApiUser, body: EmitBody, idempotencyKey: string | undefined) => Promise<EmitAnswer>;

/**
 * An emit's steps: its checks, its Idempotency-Key's claim (idempotency.ts), its publish and the claim's settling.
 * `emit` runs them for one emit (the fastify route, the fast path, each item of a batch); the emit stream runs them for
 * a batch of entries, a step at a time, so that its publishes leave in the stream's order.
 */
export class Emits {
  readonly #options: EmitOptions;
  readonly #waits: boolean;

  constructor(options: EmitOptions) {
    this.#options = options;
    this.#waits = options.whenBacklogged === 'wait';
  }

  /**
   * What refuses an emit before anything is done for it, in this order: its key's form (BAD_REQUEST naming the header),
   * eventData nested too deep (serialising it for a client or another node would overflow the stack mid fan-out), an
   * unknown event or one the API user may not emit. Answers the key.
   */
  check(apiUser: ApiUser, { name, eventData }: EmitBody, idempotencyKey: string | undefined): string | undefined {
    const key = IdempotencyKeys.read(idempotencyKey);
    if (nestedDeeperThan(eventData, MAX_JSON_DEPTH)) {
      throw new GatewayError('BAD_REQUEST', `eventData nests deeper than ${MAX_JSON_DEPTH} levels`);
    }
    this.#options.catalogue.forEmit(name, apiUser);
    return key;
  }

  claim(apiUser: ApiUser, key: string, { name, eventData }: EmitBody): Promise<ClaimedKey | Replayed> {
    return this.#options.keys.claim(apiUser, key, name, eventData);
  }

  /**
   * Publish a checked emit within the node's backlog and lag bounds, and settle its claim (freed if it was not published):
   * answers how it was published. Its first Redis commands are sent before this returns, so emits published one after
   * another in a turn of the event loop are appended in that order.
   */
  async publish({ name, eventData }: EmitBody, claim: ClaimedKey | undefined): Promise<Published> {
    const { backlog, lag, metrics, broker } = this.#options;
    let done: Published;
    try {
      if (!this.#waits && backlog.over) {
        metrics.emitsRefused.inc({ reason: 'backlog' });
        throw new GatewayError('OVERLOADED', `this node has more than ${backlog.bound} bytes on their way to its clients`, OVERLOADED_RETRY_AFTER_S);
      }
      if (!this.#waits && lag.refuses()) {
        metrics.emitsRefused.inc({ reason: 'lag' });
        throw new GatewayError('OVERLOADED', `this node's busy clients are ${Math.round(lag.medianMs)} ms behind (median; every emit is refused past ${lag.emitBoundMs} ms)`, OVERLOADED_RETRY_AFTER_S);
      }
      metrics.emits.inc({ event: name });
      done = await published(broker, metrics, name, eventData, claim?.once);
    } catch (error) {
      await claim?.settle(undefined);
      throw error;
    }
    metrics.publishes.inc(done.nodes);
    // Not waited for: the answer need not wait a round trip more. A repeat on this node is claimed after it (the
    // same connection to Redis, in order); one elsewhere that comes first is told 409, and its retry gets the answer.
    if (claim !== undefined) void claim.settle(done);
    return done;
  }

  readonly emit: Emitter = async (apiUser, body, idempotencyKey) => {
    const key = this.check(apiUser, body, idempotencyKey);
    const claim = key === undefined ? undefined : await this.claim(apiUser, key, body);
    if (claim !== undefined && isReplayed(claim)) return { name: body.name, ...claim, replayed: true };
    const done = await this.publish(body, claim);
    // This node's own fan-out of it was begun within publish (a route's history may hold it back): waited for.
    if (this.#waits) await Promise.all([this.#options.backlog.settled(), this.#options.lag.settled()]);
    return { name: body.name, ...done, replayed: false };
  };
}

async function published(broker: Broker, metrics: Metrics, name: string, eventData: Record<string, unknown>, once: Once | undefined): Promise<Published> {
  try {
    return { nodes: await broker.publish(name, eventData, once), pending: false };
  } catch (error) {
    if (error instanceof DeliveryPending) {
      metrics.emitsPending.inc();
      return { nodes: error.nodes, pending: true };
    }
    metrics.emitsFailed.inc();
    throw error;
  }
}
