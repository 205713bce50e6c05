/**
 * One emit, whichever way it came (the fastify route, the fast path, an item of a batch): its checks in their order, its
 * Idempotency-Key, its publish and its answer. Routes only read their request into this, and write its answer back.
 */
import { MAX_JSON_DEPTH, nestedDeeperThan } from '@herald/protocol';
import type { ApiUser } from '../auth/authenticator.ts';
import type { Broker, Once } from '../broker/broker.ts';
import type { EmitConfig } from '../config/schema.ts';
import type { DeliveryBacklog } from '../hub/backlog.ts';
import { GatewayError } from '../errors.ts';
import type { EventCatalogue } from '../events/catalogue.ts';
import type { Metrics } from '../metrics.ts';
import { IdempotencyKeys, isReplayed } from './idempotency.ts';

/** What an emit is checked against and published through: the node's, shared by every way an emit comes. */
export interface EmitOptions {
  catalogue: EventCatalogue;
  broker: Broker;
  metrics: Metrics;
  /** The hub's: what an emit checks before it is taken, and what a waiting one waits for. */
  backlog: DeliveryBacklog;
  whenBacklogged: EmitConfig['whenBacklogged'];
  /** Emits' Idempotency-Keys, fleet-wide. */
  keys: IdempotencyKeys;
}

/**
 * An emit's answer: its name and the nodes it was published to; `replayed`: a repeat of an emit already published under
 * its Idempotency-Key (nothing published now; `nodes` is the first's).
 */
export interface EmitAnswer {
  name: string;
  nodes: number;
  replayed: boolean;
}

export interface EmitBody {
  name: string;
  eventData: Record<string, unknown>;
}

/** Seconds a refused emit is told to wait: the backlog drains at the clients' pace, within a second or so. */
const OVERLOADED_RETRY_AFTER_S = 1;

/** One emit, once its caller is known and its body's shape checked. */
export type Emitter = (apiUser: ApiUser, body: EmitBody, idempotencyKey: string | undefined) => Promise<EmitAnswer>;

/**
 * One emit, once its caller is known and its body's shape checked: the fastify route's, the fast path's and each of a
 * batch's. With an Idempotency-Key (idempotency.ts), the key is claimed before publishing, and settled after.
 */
export function emitter({ catalogue, broker, metrics, backlog, whenBacklogged, keys }: EmitOptions): Emitter {
  const waits = whenBacklogged === 'wait';
  return async (apiUser, { name, eventData }, idempotencyKey) => {
    const key = IdempotencyKeys.read(idempotencyKey);
    // Deeper than this, serialising it for a client or another node would overflow the stack mid fan-out.
    if (nestedDeeperThan(eventData, MAX_JSON_DEPTH)) {
      throw new GatewayError('BAD_REQUEST', `eventData nests deeper than ${MAX_JSON_DEPTH} levels`);
    }
    catalogue.forEmit(name, apiUser);
    const claim = key === undefined ? undefined : await keys.claim(apiUser, key, name, eventData);
    if (claim !== undefined && isReplayed(claim)) return { name, nodes: claim.nodes, replayed: true };
    let nodes: number;
    try {
      if (!waits && backlog.over) {
        metrics.emitsRefused.inc({ reason: 'backlog' });
        throw new GatewayError('OVERLOADED', `this node has more than ${backlog.bound} bytes on their way to its clients`, OVERLOADED_RETRY_AFTER_S);
      }
      metrics.emits.inc({ event: name });
      nodes = await published(broker, metrics, name, eventData, claim?.once);
    } catch (error) {
      await claim?.settle(undefined);
      throw error;
    }
    metrics.publishes.inc(nodes);
    await claim?.settle(nodes);
    // This node's own fan-out of it was begun within publish (a route's history may hold it back): waited for.
    if (waits) await backlog.settled();
    return { name, nodes, replayed: false };
  };
}

async function published(broker: Broker, metrics: Metrics, name: string, eventData: Record<string, unknown>, once: Once | undefined): Promise<number> {
  try {
    return await broker.publish(name, eventData, once);
  } catch (error) {
    metrics.emitsFailed.inc();
    throw error;
  }
}
