/**
 * This node's part in reading the emit stream (config ingest; docs/protocol.md 5.3). One node at a time reads it: the
 * one holding the reader's lease (claimIdleMs, renewed every third of it; every other node asks for it every blockMs),
 * so that entries are published in the order they were added, whichever node takes them. It emits each entry as its
 * API user through the emit's own steps (emit/emitter.ts: its checks, its Idempotency-Key, which is the entry's
 * idempotencyKey or else its id), a batch a step at a time (checks, then claims, then publishes issued in the stream's
 * order, then acknowledgements), and acknowledges it once published.
 *
 * An entry that can never be published (not an emit, an unknown event or API user, one its API user may not emit, its
 * key used for another body) goes to the dead-letter stream with why, acknowledged. One that cannot be published now
 * (Redis unreachable, the node's backlog over its bound, its key being published elsewhere) stays pending, and the
 * reader takes the pending entries again, oldest first and a second later, before it reads a new one. A node that
 * takes the lease over (its reader died, or left) does the same first: it claims every entry left pending.
 */
import { isRecord } from '@herald/protocol';
import type { ApiUser } from '../auth/authenticator.ts';
import type { IngestStream, StreamEntry } from '../broker/ingest.ts';
import type { IngestConfig } from '../config/schema.ts';
import type { EmitBody, Emits } from '../emit/emitter.ts';
import { isReplayed, type ClaimedKey } from '../emit/idempotency.ts';
import { GatewayError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';

export interface IngestOptions {
  stream: IngestStream;
  emits: Emits;
  /** The configured API users, by name: an entry is emitted as config ingest.apiUser's, or as the one it names. */
  apiUsers: ReadonlyMap<string, ApiUser>;
  config: IngestConfig;
  metrics: Metrics;
  /** A read, claim or acknowledgement failed (Redis unreachable): the loop waits a second and goes on. */
  failed(error: Error): void;
}

/** Codes after which an entry is tried again later: the fleet cannot publish it now, but may. */
const LATER = new Set(['UNAVAILABLE', 'OVERLOADED', 'IDEMPOTENCY_KEY_IN_USE', 'INTERNAL']);

/** How often the backlog is measured and the stream trimmed of what every node is done with. */
const MEASURE_EVERY_MS = 5000;
/** The wait before the reader takes again what it could not publish, or reads after a failure. */
const RETRY_AFTER_FAILURE_MS = 1000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Taken {
  entry: StreamEntry;
  apiUser: ApiUser;
  body: EmitBody;
  key: string;
}

export class Ingest {
  readonly #options: IngestOptions;
  readonly #timers: NodeJS.Timeout[] = [];
  #running: Promise<void> | undefined;
  #stopped = false;
  /** Whether this node holds the reader's lease (as its last renewal found). */
  #leading = false;
  /** Entries were left pending (by this node, or by the reader before it): they are taken again before any new one. */
  #behind = true;

  constructor(options: IngestOptions) {
    this.#options = options;
  }

  async start(): Promise<void> {
    const { stream, config } = this.#options;
    await stream.start();
    this.#running = this.#loop();
    this.#every(Math.max(10, config.claimIdleMs / 3), () => this.#renew());
    this.#every(MEASURE_EVERY_MS, () => this.#measure());
  }

  /** Stop reading, and give the lease up: another node claims what this one left pending, and reads on. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#timers.splice(0)) clearInterval(timer);
    const { stream } = this.#options;
    await stream.close();
    await this.#running;
    if (this.#leading) await stream.resign().catch(() => {});
  }

  async #loop(): Promise<void> {
    const { stream, config } = this.#options;
    while (!this.#stopped) {
      try {
        if (!this.#leading) {
          this.#leading = await stream.lead(config.claimIdleMs);
          // Taking it over: what the last reader left pending comes first.
          if (!this.#leading) await sleep(config.blockMs);
          else this.#behind = true;
        } else if (!this.#behind) this.#behind = !(await this.#take(await stream.read(config.batch, config.blockMs)));
        else await this.#catchUp();
      } catch (error) {
        if (this.#stopped) return;
        this.#options.failed(error as Error);
        this.#behind = true;
        await sleep(RETRY_AFTER_FAILURE_MS);
      }
    }
  }

  /** The pending entries, oldest first (this node's, and what a reader before it left), claimed and taken again. */
  async #catchUp(): Promise<void> {
    const { stream, config, metrics } = this.#options;
    const pending = await stream.claim(0, config.batch);
    metrics.ingestEntries.inc({ result: 'claimed' }, pending.length);
    this.#behind = pending.length > 0 && !(await this.#take(pending));
    if (this.#behind) await sleep(RETRY_AFTER_FAILURE_MS);
  }

  /** Keep the lease; a reader that lost it (a stall past claimIdleMs) stops after the batch it is in. */
  async #renew(): Promise<void> {
    if (!this.#leading) return;
    const { stream, config } = this.#options;
    this.#leading = await stream.lead(config.claimIdleMs).catch(() => false);
  }

  /**
   * A batch, a step at a time: checks, claims, publishes (issued in the stream's order), acknowledgements. Answers
   * whether every entry was done with; else some were left pending.
   */
  async #take(entries: readonly StreamEntry[]): Promise<boolean> {
    if (entries.length === 0) return true;
    const { stream, emits } = this.#options;
    const done: string[] = [];
    /** Per entry refused or published: whether it is done with (else left pending). */
    const outcomes: Array<Promise<boolean>> = [];
    const taken = this.#checked(entries, outcomes);
    const claims = await Promise.all(taken.map((each) => emits.claim(each.apiUser, each.key, each.body).catch((error: unknown) => error as Error)));
    for (const [i, each] of taken.entries()) {
      const claim = claims[i]!;
      if (claim instanceof Error) outcomes.push(this.#refused(each.entry, claim));
      else if (isReplayed(claim)) {
        this.#options.metrics.ingestEntries.inc({ result: 'replayed' });
        done.push(each.entry.id);
      } else outcomes.push(this.#publish(each, claim, done));
    }
    const allDone = (await Promise.all(outcomes)).every(Boolean);
    await stream.ack(done);
    return allDone;
  }

  /** The entries that are emits, as whom; the others refused, their outcomes added to `outcomes`. */
  #checked(entries: readonly StreamEntry[], outcomes: Array<Promise<boolean>>): Taken[] {
    const taken: Taken[] = [];
    for (const entry of entries) {
      try {
        const { apiUser, body, key } = this.#emitOf(entry);
        this.#options.emits.check(apiUser, body, key);
        taken.push({ entry, apiUser, body, key });
      } catch (error) {
        outcomes.push(this.#refused(entry, error as Error));
      }
    }
    return taken;
  }

  /** Answers whether the entry is done with. */
  #publish(each: Taken, claim: ClaimedKey, done: string[]): Promise<boolean> {
    return this.#options.emits.publish(each.body, claim).then(
      () => {
        this.#options.metrics.ingestEntries.inc({ result: 'published' });
        done.push(each.entry.id);
        return true;
      },
      (error: Error) => this.#refused(each.entry, error),
    );
  }

  /** Dead-lettered for good (answers true: done with), or left pending to be tried again (false). */
  async #refused(entry: StreamEntry, error: Error): Promise<boolean> {
    const code = error instanceof GatewayError ? error.code : 'INTERNAL';
    if (LATER.has(code)) {
      this.#options.metrics.ingestEntries.inc({ result: 'retried' });
      return false;
    }
    this.#options.metrics.ingestEntries.inc({ result: 'dead_lettered' });
    await this.#options.stream.deadLetter(entry, `${code}: ${error.message}`);
    return true;
  }

  /** An entry as an emit: fields name, eventData (JSON of an object), idempotencyKey and apiUser (both optional). */
  #emitOf(entry: StreamEntry): { apiUser: ApiUser; body: EmitBody; key: string } {
    const { name, eventData, idempotencyKey, apiUser: named } = entry.fields;
    const apiUserName = named ?? this.#options.config.apiUser;
    const apiUser = this.#options.apiUsers.get(apiUserName);
    if (apiUser === undefined) throw new GatewayError('BAD_REQUEST', `no API user ${apiUserName} is configured`);
    if (name === undefined || name === '') throw new GatewayError('BAD_REQUEST', 'the entry has no field name');
    let data: unknown;
    try {
      data = JSON.parse(eventData ?? '');
    } catch {
      throw new GatewayError('BAD_REQUEST', 'the field eventData is not JSON');
    }
    if (!isRecord(data)) throw new GatewayError('BAD_REQUEST', 'the field eventData is not a JSON object');
    return { apiUser, body: { name, eventData: data }, key: idempotencyKey ?? entry.id };
  }

  async #measure(): Promise<void> {
    const { stream, metrics } = this.#options;
    try {
      const { pending, undelivered, oldestMs } = await stream.backlog();
      metrics.ingestWaiting.set({ state: 'pending' }, pending);
      metrics.ingestWaiting.set({ state: 'undelivered' }, undelivered);
      metrics.ingestOldest.set((oldestMs ?? 0) / 1000);
      await stream.trim();
    } catch (error) {
      if (!this.#stopped) this.#options.failed(error as Error);
    }
  }

  #every(ms: number, tick: () => Promise<void>): void {
    const timer = setInterval(() => void tick(), ms);
    timer.unref();
    this.#timers.push(timer);
  }
}
