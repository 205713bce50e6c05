/**
 * Session control across the fleet: disconnect and revoke a person or an API user on every node, and presence by
 * scatter-gather. Every node, the asking one included, acts on the same control messages (messages.ts), which the
 * broker carries to each live node; what a node does is LocalSessions'. Revocations are stored through the broker
 * first, so a node that misses the broadcast (or starts later) still learns them (revocations.ts).
 */
import { randomUUID } from 'node:crypto';
import { CloseCode, ErrorCode } from '@herald/protocol';
import type { Broker } from '../broker/broker.ts';
import type { Contain } from '../errors.ts';
import type { Hub } from '../hub/hub.ts';
import type { Metrics } from '../metrics.ts';
import type { LocalSessions } from './local.ts';
import { decodeControl, encodeControl, type ControlMessage, type PresenceQuery } from './messages.ts';
import type { Revocations } from './revocations.ts';
import { subjectText, type Subject } from './subjects.ts';

export interface FleetControlOptions {
  broker: Broker;
  hub: Hub;
  local: LocalSessions;
  revocations: Revocations;
  metrics: Metrics;
  contain: Contain;
  /** How long a revocation is stored: the longest life of a token. */
  keepRevocationsMs: number;
  /** How long a presence query waits for the nodes' answers (control.presenceTimeoutMs). */
  presenceTimeoutMs: number;
}

/** A presence query's sum: what the nodes that answered in time hold, and which live nodes did not answer. */
export interface PresenceCount {
  count: number;
  /** Nodes that answered with a count above 0. */
  nodes: number;
  asked: number;
  complete: boolean;
  missing: string[];
}

interface Gathering {
  answers: Map<string, number>;
  /** The nodes asked, once the broadcast has said; the gathering is over once each has answered. */
  asked: readonly string[] | undefined;
  done: () => void;
}

export class FleetControl {
  readonly #options: FleetControlOptions;
  readonly #gatherings = new Map<string, Gathering>();

  constructor(options: FleetControlOptions) {
    this.#options = options;
  }

  /** The broker's ControlHandler: a message that is not a control message is dropped and counted, nothing else. */
  readonly receive = (text: string): void => {
    try {
      this.#act(decodeControl(text));
    } catch (error) {
      this.#options.contain('broker_message', error);
    }
  };

  /** Close the subject's connections on every node; answers how many nodes were told. */
  async disconnect(subject: Subject, reconnect: boolean, reason: string): Promise<number> {
    const code = reconnect ? CloseCode.DISCONNECTED : CloseCode.DISCONNECTED_FINAL;
    return (await this.#options.broker.broadcast(encodeControl({ type: 'disconnect', subject, code, reason }))).length;
  }

  /** Revoke the subject's tokens issued until now: stored, then told to every node. */
  async revoke(subject: Subject): Promise<{ nodes: number; revokedAt: number }> {
    const { broker, keepRevocationsMs } = this.#options;
    const revokedAt = Date.now();
    await broker.revoke(subjectText(subject), revokedAt, keepRevocationsMs);
    const told = await broker.broadcast(encodeControl({ type: 'revoke', subject, revokedAt }));
    return { nodes: told.length, revokedAt };
  }

  /** A revocation this node learned (broadcast, start, or a read of the recent ones): its holders here are closed. */
  closeRevoked(subject: Subject, revokedAt: number): void {
    const closed = this.#options.local.closeAll(subject, CloseCode.TOKEN_REVOKED, ErrorCode.TOKEN_REVOKED, revokedAt);
    this.#options.metrics.controlCloses.inc({ action: 'revoke' }, closed);
  }

  /**
   * Ask every live node how many connections it holds that are the subject's, or hold a subscription to the event,
   * and add up the answers that come within presenceTimeoutMs. A node that does not answer (killed, or cut off from
   * Redis) is not counted, and is named in `missing`.
   */
  async presence(query: PresenceQuery): Promise<PresenceCount> {
    const id = randomUUID();
    const { promise, resolve } = Promise.withResolvers<void>();
    const gathering: Gathering = { answers: new Map(), asked: undefined, done: resolve };
    this.#gatherings.set(id, gathering);
    let timer: NodeJS.Timeout | undefined;
    try {
      const from = this.#options.broker.nodeId;
      gathering.asked = await this.#options.broker.broadcast(encodeControl({ type: 'presence', id, from, query }));
      this.#checkGathered(gathering);
      await Promise.race([promise, new Promise((timeUp) => (timer = setTimeout(timeUp, this.#options.presenceTimeoutMs)))]);
    } finally {
      clearTimeout(timer);
      this.#gatherings.delete(id);
    }
    return this.#sum(gathering);
  }

  #sum({ answers, asked = [] }: Gathering): PresenceCount {
    let count = 0;
    let nodes = 0;
    for (const node of asked) {
      const answer = answers.get(node) ?? 0;
      count += answer;
      if (answer > 0) nodes++;
    }
    const missing = asked.filter((node) => !answers.has(node));
    this.#options.metrics.presenceQueries.inc({ complete: String(missing.length === 0) });
    return { count, nodes, asked: asked.length, complete: missing.length === 0, missing };
  }

  #checkGathered(gathering: Gathering): void {
    if (gathering.asked?.every((node) => gathering.answers.has(node))) gathering.done();
  }

  #act(message: ControlMessage): void {
    const { local, metrics, revocations } = this.#options;
    switch (message.type) {
      case 'disconnect':
        metrics.controlCloses.inc({ action: 'disconnect' }, local.closeAll(message.subject, message.code, message.reason));
        return;
      case 'revoke':
        revocations.apply(subjectText(message.subject), message.revokedAt);
        return;
      case 'presence':
        return this.#answer(message.id, message.from, message.query);
      case 'presence-answer': {
        const gathering = this.#gatherings.get(message.id);
        if (gathering === undefined) return; // too late: the asker has answered already
        gathering.answers.set(message.node, message.count);
        this.#checkGathered(gathering);
      }
    }
  }

  #answer(id: string, from: string, query: PresenceQuery): void {
    const { local, hub, broker } = this.#options;
    const count = 'subject' in query ? local.count(query.subject) : hub.subscribersOf(query.event);
    // An answer that cannot be sent (Redis out of reach) leaves this node among the asker's missing ones.
    broker.sendTo(from, encodeControl({ type: 'presence-answer', id, node: broker.nodeId, count })).catch(() => {});
  }
}
