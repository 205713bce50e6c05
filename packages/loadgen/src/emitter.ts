/**
 * The application's back end under load: `connections` keep-alive HTTP connections calling emit-event-ws back
 * to back (or `rate` calls a second in all), each call naming the next recipient in turn and carrying the
 * time it was written (`sentAt`), so that listeners can tell how late it arrived. It counts how many
 * notifications the calls answered 200 should have delivered. A call refused 503 (a node past its delivery
 * backlog's bound, or its fleet unreachable) is counted apart, and its connection backs off before its next call,
 * as a back end told Retry-After does; its figures are the calls taken. With `idempotent`, each emit carries an
 * Idempotency-Key of its own (none repeats: what is measured is the key's cost); with `batch` > 1, each call is a
 * batch of that many emits (emit-events-ws), each to the next recipient.
 */
import { API_TOKEN_HEADER, emitBatchPath, emitPath, IDEMPOTENCY_KEY_HEADER } from '@herald/protocol';
import { clockMs } from './frames.ts';
import { Histogram } from './histogram.ts';
import { HttpConnection, jsonPostHead } from './http-connection.ts';

export interface EmitterOptions {
  /** http://host:port of a node. */
  httpBase: string;
  userPath: string;
  apiToken: string;
  connections: number;
  durationS: number;
  /** Calls a second in all; undefined: as fast as the answers come. */
  rate: number | undefined;
  event: string;
  /** Named in turn as eventData.recipientId; '' sends no recipientId (a broadcast). */
  recipients: readonly string[];
  /** How many listeners a call naming recipients[i] reaches. */
  weights: readonly number[];
  timeoutMs: number;
  /** Asked before each call: true holds it (pace.ts), and the connection asks again HOLD_PAUSE_MS later. */
  hold?: () => boolean;
  /** Each emit with an Idempotency-Key of its own. */
  idempotent?: boolean;
  /** Emits per call: 1, emit-event-ws; more, emit-events-ws. */
  batch?: number;
}

export interface EmitterStats {
  /** Calls written. */
  sent: number;
  ok: number;
  non2xx: number;
  /** Of non2xx: refused 503, each followed by a pause of the connection (REFUSED_PAUSE_MS). */
  refused: number;
  /** Calls without an answer, by reason. */
  errors: Record<string, number>;
  /** Write → whole answer. */
  latency: Histogram;
  /** Notifications the calls answered 2xx should have delivered (every item of a batch answered 200). */
  expected: number;
  /** performance.now() of the first write and of the last answer. */
  startedAt: number;
  endedAt: number;
}

const ERROR_PAUSE_MS = 100;
/**
 * A connection's pause after a 503. Shorter than the node's Retry-After (1 s, HTTP's smallest): the node answers a
 * refusal for the cost of any answer, and a backlog at its bound drains in a fraction of a second, so a sender that
 * waited the whole second would leave the node idle and measure the wait.
 */
const REFUSED_PAUSE_MS = 50;
const HOLD_PAUSE_MS = 5;

/** One connection and the call it has in flight; its handler is made once, not per call. */
class Slot {
  readonly connection: HttpConnection;
  /** The recipients (indices) of the call in flight: one, or a batch's. */
  recipients: number[] = [];
  writtenAt = 0;
  readonly onResponse: (status: number, error: string | undefined) => void;

  constructor(connection: HttpConnection, onResponse: (slot: Slot, status: number, error: string | undefined) => void) {
    this.connection = connection;
    this.onResponse = (status, error) => onResponse(this, status, error);
  }
}

export class Emitter {
  readonly stats: EmitterStats = { sent: 0, ok: 0, non2xx: 0, refused: 0, errors: {}, latency: new Histogram(), expected: 0, startedAt: 0, endedAt: 0 };
  readonly #options: EmitterOptions;
  readonly #head: string;
  /** What makes each run's keys its own: runs within a key's window must not repeat each other's. */
  readonly #keys = `wsload-${process.pid}-${Date.now()}`;
  #issued = 0;
  #endAt = 0;
  #idle = 0;
  #stopped = false;
  #done: (() => void) | undefined;

  constructor(options: EmitterOptions) {
    this.#options = options;
    const url = new URL(options.httpBase);
    const path = (options.batch ?? 1) > 1 ? emitBatchPath(options.userPath) : emitPath(options.userPath);
    this.#head = jsonPostHead(url, path, { [API_TOKEN_HEADER]: options.apiToken });
  }

  /** Run for durationS (or until `signal`), then wait for the calls in flight. */
  async run(signal?: AbortSignal): Promise<EmitterStats> {
    const { connections, durationS, timeoutMs, httpBase } = this.#options;
    const url = new URL(httpBase);
    this.stats.startedAt = performance.now();
    this.#endAt = this.stats.startedAt + durationS * 1000;
    const stop = () => (this.#stopped = true);
    signal?.addEventListener('abort', stop, { once: true });
    const finished = new Promise<void>((resolve) => (this.#done = resolve));
    for (let i = 0; i < connections; i++) {
      const connection = new HttpConnection({ host: url.hostname, port: Number(url.port || 80), timeoutMs });
      this.#next(new Slot(connection, (slot, status, error) => this.#answered(slot, status, error)));
    }
    await finished;
    signal?.removeEventListener('abort', stop);
    this.stats.endedAt = performance.now();
    return this.stats;
  }

  #next(slot: Slot): void {
    const index = this.#issued;
    const { rate } = this.#options;
    const due = rate === undefined ? performance.now() : this.stats.startedAt + (index * 1000) / rate;
    if (this.#stopped || due >= this.#endAt) return this.#retire(slot);
    if (this.#options.hold?.() === true) {
      setTimeout(() => this.#next(slot), HOLD_PAUSE_MS);
      return;
    }
    this.#issued++;
    const wait = due - performance.now();
    if (wait >= 1) setTimeout(() => this.#write(slot, index), wait);
    else this.#write(slot, index);
  }

  #write(slot: Slot, index: number): void {
    const { recipients, event, idempotent = false, batch = 1 } = this.#options;
    const sentAt = clockMs().toFixed(3);
    const emitOf = (at: number): string => {
      const recipient = recipients[at % recipients.length];
      const eventData = recipient ? `{"recipientId":"${recipient}","sentAt":${sentAt}}` : `{"title":"wsload","sentAt":${sentAt}}`;
      return `"name":"${event}","eventData":${eventData}`;
    };
    let body: string;
    let key = '';
    if (batch > 1) {
      slot.recipients = Array.from({ length: batch }, (_, i) => (index * batch + i) % recipients.length);
      const items = slot.recipients.map((_, i) => `{${emitOf(index * batch + i)}${idempotent ? `,"idempotencyKey":"${this.#keys}-${index}-${i}"` : ''}}`);
      body = `{"events":[${items.join(',')}]}`;
    } else {
      slot.recipients = [index % recipients.length];
      body = `{${emitOf(index)}}`;
      if (idempotent) key = `${IDEMPOTENCY_KEY_HEADER}: ${this.#keys}-${index}\r\n`;
    }
    this.stats.sent++;
    slot.writtenAt = performance.now();
    // The key's line goes before Content-Length, which the head ends with.
    const head = key === '' ? this.#head : this.#head.replace(/Content-Length: $/, `${key}Content-Length: `);
    slot.connection.send(`${head}${body.length}\r\n\r\n${body}`, slot.onResponse);
  }

  #answered(slot: Slot, status: number, error: string | undefined): void {
    const { stats } = this;
    if (error !== undefined) {
      stats.errors[error] = (stats.errors[error] ?? 0) + 1;
      // A node that refuses connections must not turn the emitter into a busy loop.
      setTimeout(() => this.#next(slot), ERROR_PAUSE_MS);
      return;
    }
    stats.latency.record(performance.now() - slot.writtenAt);
    if (status >= 200 && status < 300) {
      stats.ok++;
      for (const recipient of slot.recipients) stats.expected += this.#options.weights[recipient] ?? 0;
    } else {
      stats.non2xx++;
      if (status === 503) {
        stats.refused++;
        setTimeout(() => this.#next(slot), REFUSED_PAUSE_MS);
        return;
      }
    }
    this.#next(slot);
  }

  #retire(slot: Slot): void {
    slot.connection.close();
    if (++this.#idle === this.#options.connections) this.#done?.();
  }
}
