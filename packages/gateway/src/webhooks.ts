/**
 * Connect and disconnect webhooks (config `webhooks`): the back end learns who came and went without polling. Events
 * wait in a bounded queue and leave in batches, one POST of a JSON array at a time, at most every `batchMs` (at once
 * when `maxBatch` are waiting), signed with HMAC-SHA256 of the body (`x-herald-signature: sha256=<hex>`). A batch
 * that gets no answer, a timeout, a 5xx or a 429 is sent again after an exponential backoff with jitter, up to
 * `maxAttempts` times; any other 4xx is final. Nothing is lost silently: every event is counted once as sent,
 * failed (given up) or dropped (the queue was full, or the drain's deadline came first).
 */
import { createHmac } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { SIGNATURE_HEADER } from '@herald/protocol';
import type { Config } from './config/schema.ts';
import type { Session } from './hub/session.ts';
import type { Metrics } from './metrics.ts';

export type WebhookConfig = NonNullable<Config['webhooks']>;

export interface WebhookEvent {
  type: 'connect' | 'disconnect';
  /** ms since the epoch */
  at: number;
  node: string;
  apiUser: string;
  person: { generator: string; id: string } | null;
  /** The close code, for a disconnect. */
  code?: number;
}

/** The first retry waits about this long, each next one twice as long, up to RETRY_MAX_MS. */
const RETRY_BASE_MS = 200;
const RETRY_MAX_MS = 30_000;

export interface WebhooksOptions {
  config: WebhookConfig;
  nodeId: string;
  metrics: Metrics;
  /** A batch given up: logged by the node. */
  gaveUp(events: number, why: string): void;
  random?: () => number;
}

/** The signature of a body, as the header carries it. */
export function signatureOf(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export class Webhooks {
  readonly #options: WebhooksOptions;
  readonly #queue: WebhookEvent[] = [];
  #timer: NodeJS.Timeout | undefined;
  #sending: Promise<void> | undefined;
  /** Set by close(): nothing waits past it. */
  #deadline = Infinity;

  constructor(options: WebhooksOptions) {
    this.#options = options;
  }

  connected(session: Session): void {
    this.#push(this.#event('connect', session));
  }

  disconnected(session: Session, code: number): void {
    this.#push({ ...this.#event('disconnect', session), code });
  }

  /** Send what waits, within `deadline` (performance.now() ms); what is left then is dropped, counted. */
  async close(deadline: number): Promise<void> {
    this.#deadline = deadline;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#queue.length > 0 && performance.now() < deadline) await this.#send();
    await this.#sending;
    this.#drop(this.#queue.splice(0).length);
  }

  #event(type: WebhookEvent['type'], session: Session): WebhookEvent {
    const { person } = session;
    return {
      type,
      at: Date.now(),
      node: this.#options.nodeId,
      apiUser: session.apiUser.name,
      person: person === undefined ? null : { generator: person.generator, id: person.id },
    };
  }

  #push(event: WebhookEvent): void {
    if (this.#queue.length >= this.#options.config.maxQueue) return this.#drop(1);
    this.#queue.push(event);
    this.#schedule();
  }

  /** A full batch leaves at once, a partial one after batchMs; none while one is on its way, or while closing. */
  #schedule(): void {
    if (this.#deadline !== Infinity || this.#sending !== undefined || this.#queue.length === 0) return;
    const { maxBatch, batchMs } = this.#options.config;
    if (this.#queue.length >= maxBatch) void this.#send();
    else this.#timer ??= setTimeout(() => void this.#send(), batchMs).unref();
  }

  /** One batch at a time, in order. */
  #send(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const sending = (this.#sending ?? Promise.resolve()).then(() => this.#sendBatch());
    this.#sending = sending;
    void sending.then(() => {
      if (this.#sending !== sending) return;
      this.#sending = undefined;
      this.#schedule();
    });
    return sending;
  }

  async #sendBatch(): Promise<void> {
    const batch = this.#queue.splice(0, this.#options.config.maxBatch);
    if (batch.length === 0) return;
    const { metrics, config } = this.#options;
    const body = JSON.stringify(batch);
    let why = '';
    for (let attempt = 1; attempt <= config.maxAttempts; attempt++) {
      if (attempt > 1) {
        const wait = this.#backoff(attempt - 1);
        if (performance.now() + wait >= this.#deadline) break;
        metrics.webhookRetries.inc();
        await delay(wait);
      }
      const outcome = await this.#post(body);
      if (outcome === 'sent') return void metrics.webhookEvents.inc({ result: 'sent' }, batch.length);
      why = outcome.why;
      if (!outcome.retry) break;
    }
    metrics.webhookEvents.inc({ result: 'failed' }, batch.length);
    this.#options.gaveUp(batch.length, why);
  }

  async #post(body: string): Promise<'sent' | { retry: boolean; why: string }> {
    const { url, secret, timeoutMs } = this.#options.config;
    const timeout = Math.max(1, Math.min(timeoutMs, this.#deadline - performance.now()));
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', [SIGNATURE_HEADER]: signatureOf(body, secret) },
        body,
        signal: AbortSignal.timeout(timeout),
      });
      await response.body?.cancel();
      if (response.ok) return 'sent';
      return { retry: response.status >= 500 || response.status === 429, why: `HTTP ${response.status}` };
    } catch (error) {
      return { retry: true, why: (error as Error).message };
    }
  }

  /** Full jitter over an exponential window: retries of many nodes after one outage spread out. */
  #backoff(retry: number): number {
    const window = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (retry - 1));
    return window / 2 + (this.#options.random ?? Math.random)() * (window / 2);
  }

  #drop(events: number): void {
    if (events > 0) this.#options.metrics.webhookEvents.inc({ result: 'dropped' }, events);
  }
}
