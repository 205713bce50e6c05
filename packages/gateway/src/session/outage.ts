/**
 * A node that lost the fleet's Redis cannot deliver: emits for its clients are published to a channel it no longer
 * reads, and past the connected lease its routes are swept. So while Redis is lost it takes no new client (HTTP 503,
 * as a draining node does), and past `lostCloseMs` it lets its clients go (4004, in paced, jittered batches), so that
 * they reconnect through the load balancer to nodes that can serve them and resume there. When Redis answers again
 * it takes clients again, and stops letting them go: those still here stay (what they missed of events with history
 * reaches them through their routes' histories).
 */
import { CloseCode } from '@herald/protocol';
import { closePaced, type Pace } from '../hub/departures.ts';
import type { Hub } from '../hub/hub.ts';

export interface OutageObserver {
  /** Redis has been lost for `lostForMs`: `clients` are about to be let go. */
  lettingGo(clients: number, lostForMs: number): void;
  /** The let-go ended: `closed` clients were closed, in `ms` (fewer if Redis came back meanwhile). */
  letGo(closed: number, ms: number): void;
}

export interface OutageOptions {
  hub: Hub;
  /** How long after Redis was lost the clients are let go (config redis.lostCloseMs). */
  lostCloseMs: number;
  pace: Omit<Pace, 'jitter'>;
  /** Refuse new clients with `why` (HTTP 503), or (undefined) let them in again. */
  admit(refusing: string | undefined): void;
  observer: OutageObserver;
}

const WHY_REFUSED = "the node lost the fleet's Redis: try another node";

export class RedisOutage {
  readonly #options: OutageOptions;
  /** When Redis was lost; undefined while it answers. Each loss is its own: a let-go goes on only while it lasts. */
  #lostAt: number | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: OutageOptions) {
    this.#options = options;
  }

  lost(): void {
    if (this.#lostAt !== undefined) return;
    const lostAt = (this.#lostAt = performance.now());
    this.#options.admit(WHY_REFUSED);
    this.#timer = setTimeout(() => void this.#letGo(lostAt), this.#options.lostCloseMs);
    this.#timer.unref();
  }

  back(): void {
    this.stop();
    this.#options.admit(undefined);
  }

  /** Forget the loss without letting clients in (the node drains: its own close tells them to go). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#lostAt = undefined;
  }

  async #letGo(lostAt: number): Promise<void> {
    const { hub, pace, observer } = this.#options;
    const start = performance.now();
    observer.lettingGo(hub.sessions.size, start - lostAt);
    const going = () => this.#lostAt === lostAt;
    const reason = 'node cut off from Redis: reconnect';
    let closed = 0;
    // Again for any that finished a handshake begun before the loss (new ones are refused meanwhile).
    for (let round = [...hub.sessions]; round.length > 0 && going(); round = [...hub.sessions]) {
      closed += await closePaced(hub, round, { ...pace, jitter: true }, CloseCode.NODE_CUT_OFF, reason, going);
    }
    observer.letGo(closed, performance.now() - start);
  }
}
