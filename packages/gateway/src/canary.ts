/**
 * The delivery canary. Every interval this node puts a canary on every live node's channel, its own included, through
 * the broker (Redis) as an emit goes; a peer answers on this node's channel. A round trip is timed when the canary (or
 * the answer) comes back; one not back within the timeout is missed. The node's own canary is the check that matters
 * most: when none has come back for the timeout, this node's channel no longer delivers (its subscriber connection is
 * gone, or Redis stopped reading it), emits for its clients are lost, and the node must not take new clients.
 *
 * On the wire (the broker frames it): `ping,<from>,<seq>`, answered by `pong,<answerer>,<seq>` to <from> (node ids hold
 * no comma: config/schema.ts).
 */
import type { Broker } from './broker/broker.ts';

export interface CanaryObserver {
  /** A canary came back: to this node's own channel (`self`) or to a peer's and answered. */
  roundTrip(seconds: number, target: 'self' | 'peer'): void;
  missed(target: 'self' | 'peer'): void;
  /** No canary of this node came back through its own channel for `silentMs`: the node is not ready until one does. */
  channelLost(silentMs: number): void;
  /** A canary came back through this node's own channel after channelLost. */
  channelBack(silentMs: number): void;
}

export interface CanaryOptions {
  broker: Broker;
  intervalMs: number;
  timeoutMs: number;
  observer: CanaryObserver;
}

interface Sent {
  target: string;
  /** performance.now() when sent, moved later by the time this node's own event loop stood still since. */
  sentAt: number;
}

/** How often a node whose own channel is lost sends its canary (when that is sooner than canary.intervalMs). */
const LOST_ROUND_MS = 1000;

export class Canary {
  readonly #options: CanaryOptions;
  readonly #nodeId: string;
  /** Canaries on their way, by `<seq> <target>`. */
  readonly #pending = new Map<string, Sent>();
  #seq = 0;
  #timer: NodeJS.Timeout | undefined;
  /** While the channel is lost, the next round comes sooner than the interval's. */
  #soon: NodeJS.Timeout | undefined;
  /** When a canary last came back through this node's own channel (or the canary started), moved as sentAt is. */
  #ownBackAt = performance.now();
  /** When the last round ran: a round that comes late tells how long this node's event loop stood still. */
  #roundAt = performance.now();
  #lost = false;

  constructor(options: CanaryOptions) {
    this.#options = options;
    this.#nodeId = options.broker.nodeId;
  }

  /** Whether this node's own channel delivered within the timeout. */
  healthy(): boolean {
    const now = performance.now();
    return now - this.#ownBackAt - this.#stoodStillMs(now) <= this.#options.timeoutMs;
  }

  start(): void {
    this.#ownBackAt = performance.now();
    this.#roundAt = this.#ownBackAt;
    this.#timer = setInterval(() => void this.#round(), this.#options.intervalMs);
    this.#timer.unref();
    void this.#round();
  }

  stop(): void {
    clearInterval(this.#timer);
    clearTimeout(this.#soon);
    this.#pending.clear();
  }

  /** The broker's handler of canaries on this node's channel. */
  readonly receive = (canary: string): void => {
    const [kind, from, seq] = canary.split(',');
    if (from === undefined || seq === undefined) return;
    if (kind === 'ping' && from !== this.#nodeId) {
      // An answer that fails is the sender's missed canary; nothing to do here.
      this.#options.broker.sendCanary(from, `pong,${this.#nodeId},${seq}`).catch(() => {});
    } else if (kind === 'ping' || kind === 'pong') {
      this.#back(`${seq} ${from}`);
    }
  };

  #back(key: string): void {
    const sent = this.#pending.get(key);
    if (sent === undefined) return;
    this.#pending.delete(key);
    const now = performance.now();
    const self = sent.target === this.#nodeId;
    this.#options.observer.roundTrip((now - sent.sentAt) / 1000, self ? 'self' : 'peer');
    if (!self) return;
    const silentMs = now - this.#ownBackAt;
    this.#ownBackAt = now;
    if (this.#lost) {
      this.#lost = false;
      this.#options.observer.channelBack(silentMs);
    }
  }

  /** Count what timed out, tell a lost channel once, and send this round's canaries. */
  async #round(): Promise<void> {
    const { broker, timeoutMs, observer } = this.#options;
    const now = performance.now();
    this.#notCountingStall(now);
    for (const [key, sent] of this.#pending) {
      if (now - sent.sentAt <= timeoutMs) continue;
      this.#pending.delete(key);
      observer.missed(sent.target === this.#nodeId ? 'self' : 'peer');
    }
    if (!this.#lost && !this.healthy()) {
      this.#lost = true;
      observer.channelLost(now - this.#ownBackAt);
    }
    const seq = String(++this.#seq);
    let nodes: readonly string[];
    try {
      nodes = await broker.liveNodes();
    } catch {
      // Redis is out of reach: the canary to this node is as good as sent and missed.
      nodes = [this.#nodeId];
    }
    for (const target of nodes) {
      this.#pending.set(`${seq} ${target}`, { target, sentAt: performance.now() });
      broker.sendCanary(target, `ping,${this.#nodeId},${seq}`).catch(() => {});
    }
    // A node not ready for its lost channel (Redis lost, or its subscription refused) is ready again as soon as a
    // canary comes back: while lost, one is sent every second rather than every interval.
    clearTimeout(this.#soon);
    if (this.#lost && this.#options.intervalMs > LOST_ROUND_MS) {
      this.#soon = setTimeout(() => void this.#round(), LOST_ROUND_MS);
      this.#soon.unref();
    }
  }

  /**
   * The time this node's own event loop stood still (a round late by it: a starved machine, a long collection) is not
   * the channel's silence: canaries that came back meanwhile wait unread behind this timer. It is taken off every
   * wait, so that a starved node does not call its channel lost, nor turn not-ready, for its own stall.
   */
  #notCountingStall(now: number): void {
    const stoodStillMs = this.#stoodStillMs(now);
    this.#roundAt = now;
    if (stoodStillMs === 0) return;
    this.#ownBackAt += stoodStillMs;
    for (const sent of this.#pending.values()) sent.sentAt += stoodStillMs;
  }

  /** How long past its interval the round timer is: time this node's event loop stood still (or stands still now). */
  #stoodStillMs(now: number): number {
    return Math.max(0, now - this.#roundAt - this.#options.intervalMs);
  }
}
