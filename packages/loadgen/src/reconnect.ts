/**
 * Reconnection of held clients (--reconnect), as an application using the client SDK does it: a client
 * whose socket the node closed (1001 while it drains, 1006 when it died) waits as the SDK does
 * (`reconnectDelayAfter`: up to the lower bound after a 1001, else a random time between the bounds), connects
 * again through the same URL with the same tokens and sends the same REGISTER. A refused attempt (HTTP 503 from a
 * draining node or from admission under a storm, ECONNREFUSED while the node is down, a timeout) waits again, the
 * full window as the SDK's later attempts do (`reconnectDelay`), and tries again, until the run ends. A first
 * connect that fails so is tried again the same way (the SDK's `retryFirstConnect`). A refusal in the node's own
 * words (a token or a REGISTER refused) would only be refused again, and ends the client. Also here: what the
 * report says about it.
 */
import { reconnectDelay, reconnectDelayAfter } from '@herald/client';
import { ErrorCode } from '@herald/protocol';
import { clockMs } from './frames.ts';
import type { ClientObserver, ClientOptions, HistoryOutcome, LoadClient } from './load-client.ts';
import { newClient } from './ws-client.ts';
import type { PoolSnapshot } from './snapshot.ts';
import { seriesFrom } from './timeline.ts';

/** Bounds of the wait before each attempt, ms (the SDK's minDelayMs and maxDelayMs). */
export interface ReconnectPolicy {
  minDelayMs: number;
  maxDelayMs: number;
}

/**
 * The pool whose clients come back: it puts a returning client in its place and counts what happened. A client
 * that is back closes and is told notifications as any of the pool's clients (ClientObserver's own callbacks).
 */
export interface ReconnectHost extends Pick<ClientObserver, 'closed' | 'notification' | 'subscribed'> {
  back(client: LoadClient, awayMs: number): void;
  /** A client whose first connect failed is ready at last, on a later attempt. */
  joined(client: LoadClient): void;
  /** An attempt failed: another follows, unless it was refused for good (the client then stays away). */
  retryFailed(reason: string): void;
  /** With --resume: what a returning client's history did (load-client.ts). */
  history?(client: LoadClient, what: HistoryOutcome): void;
  /** A first connect was refused for good: the client has failed. */
  firstConnectFailed(client: LoadClient, reason: string): void;
}

/** Whether an attempt that failed for `reason` (LoadClient's) may succeed if made again: all but the node's refusals. */
export function retriable(reason: string): boolean {
  return !Object.hasOwn(ErrorCode, reason) || reason === ErrorCode.UNAVAILABLE || reason === ErrorCode.INTERNAL;
}

/** Observes the reconnect attempts: a new LoadClient per attempt, with the dropped client's index and plan. */
export class Reconnector implements ClientObserver {
  readonly #policy: ReconnectPolicy;
  readonly #host: ReconnectHost;
  readonly #options: (index: number) => ClientOptions;
  /** Client index → clockMs of its drop, while it is away; a first connect being retried has none. */
  readonly #droppedAt = new Map<number, number>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #attempts = new Set<LoadClient>();
  #closed = false;

  constructor(policy: ReconnectPolicy, host: ReconnectHost, options: (index: number) => ClientOptions) {
    this.#policy = policy;
    this.#host = host;
    this.#options = options;
  }

  /** A held client's socket was closed by the other side at `atMs`, with `code`: bring it back. */
  dropped(client: LoadClient, atMs: number, code: number): void {
    this.#droppedAt.set(client.index, atMs);
    const { minDelayMs, maxDelayMs } = this.#policy;
    this.#retry(client, reconnectDelayAfter(code, 1, minDelayMs, maxDelayMs));
  }

  #retry(previous: LoadClient, delayMs: number): void {
    if (this.#closed) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      // It resumes from where the dropped one was (with --resume; else it has no position).
      const attempt = newClient(previous.index, previous.plan, this, this.#options(previous.index), previous.position);
      this.#attempts.add(attempt);
      attempt.start();
    }, delayMs);
    this.#timers.add(timer);
  }

  ready(attempt: LoadClient): void {
    this.#attempts.delete(attempt);
    const droppedAt = this.#droppedAt.get(attempt.index);
    if (droppedAt === undefined) return this.#host.joined(attempt);
    this.#droppedAt.delete(attempt.index);
    this.#host.back(attempt, clockMs() - droppedAt);
  }

  /** An attempt failed: a dropped client's, or a first connect (the pool hands those here too). */
  failed(attempt: LoadClient, reason: string): void {
    this.#attempts.delete(attempt);
    const again = retriable(reason);
    if (!again && !this.#droppedAt.has(attempt.index)) return this.#host.firstConnectFailed(attempt, reason);
    this.#host.retryFailed(reason);
    if (again) this.#retry(attempt, reconnectDelay(this.#policy.minDelayMs, this.#policy.maxDelayMs));
  }

  /** A client that came back was dropped again: the host counts it, and hands it back through `dropped`. */
  closed(attempt: LoadClient, code: number): void {
    this.#host.closed(attempt, code);
  }

  notification(attempt: LoadClient, frame: Buffer): void {
    this.#host.notification(attempt, frame);
  }

  history(attempt: LoadClient, what: HistoryOutcome): void {
    this.#host.history?.(attempt, what);
  }

  subscribed(attempt: LoadClient, accepted: boolean): void {
    this.#host.subscribed?.(attempt, accepted);
  }

  /** The run is over: no more attempts, and those in flight are dropped. */
  close(): void {
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    for (const attempt of this.#attempts) attempt.terminate();
    this.#attempts.clear();
  }
}

export interface ReconnectFigures {
  /** Drops (a client dropped twice counts twice), returns, and clients still away at the end. */
  dropped: number;
  back: number;
  away: number;
  /** Seconds from the first drop to the last return; null while a client is still away (or none dropped). */
  allBackS: number | null;
  /** [seconds since the first drop, clients connected and registered], every 0.1 s: "clients back over time". */
  series: Array<[number, number]>;
}

export function reconnectFigures(s: PoolSnapshot): ReconnectFigures {
  const away = s.dropped - s.back;
  const allBack = s.dropped > 0 && away === 0;
  return {
    dropped: s.dropped,
    back: s.back,
    away,
    allBackS: allBack ? Math.round(s.lastBackAt - s.firstDropAt) / 1000 : null,
    series: s.firstDropAt === 0 ? [] : seriesFrom(s.level, s.firstDropAt),
  };
}
