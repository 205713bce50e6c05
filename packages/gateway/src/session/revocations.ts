/**
 * The revocations this node knows, as the authenticator asks them on every token it checks: one map lookup, no
 * round trip to Redis. They come from Redis at start (the broker stores them), from each revoke's broadcast as it
 * happens, and from a read of the recent ones every `pollMs` (a broadcast this node missed, say while Redis was
 * out of its reach, is caught by the next read). A revocation is forgotten once every token it concerns has expired.
 */
import type { RevocationList } from '../auth/authenticator.ts';
import type { Broker } from '../broker/broker.ts';
import { subjectOf, type Subject } from './subjects.ts';

/**
 * How far back each read looks, besides the time since the last one: the revoking node's clock may differ from this
 * one's. Revocations are few, so reading a minute more costs next to nothing.
 */
const CLOCK_MARGIN_MS = 60_000;

export interface RevocationsOptions {
  broker: Broker;
  /** How long a revocation matters: the longest life of a token (auth.refreshTtlSeconds, or tokenTtlSeconds). */
  keepMs: number;
  /** Read the recent revocations this often; none without it (an in-process broker tells every node itself). */
  pollMs: number | undefined;
  /** A revocation this node learned of: the caller closes what it concerns. */
  learned(subject: Subject, revokedAt: number): void;
  /** A read that failed (Redis out of reach): the next one reads back further. */
  failed(error: unknown): void;
  /** How many revocations it holds, after each change. */
  counted(size: number): void;
}

export class Revocations implements RevocationList {
  readonly #apiUsers = new Map<string, number>();
  readonly #persons = new Map<string, number>();
  readonly #options: RevocationsOptions;
  /** When the last read that succeeded began, ms. */
  #readSince = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: RevocationsOptions) {
    this.#options = options;
  }

  apiUserRevokedAt(name: string): number | undefined {
    return this.#apiUsers.size === 0 ? undefined : this.#apiUsers.get(name);
  }

  personRevokedAt(key: string): number | undefined {
    return this.#persons.size === 0 ? undefined : this.#persons.get(key);
  }

  get size(): number {
    return this.#apiUsers.size + this.#persons.size;
  }

  /** Load every stored revocation (rejects if the broker cannot answer), then read the recent ones every pollMs. */
  async start(): Promise<void> {
    await this.#read(0);
    const { pollMs } = this.#options;
    if (pollMs === undefined) return;
    this.#timer = setInterval(() => void this.#read(this.#readSince - CLOCK_MARGIN_MS).catch(this.#options.failed), pollMs);
    this.#timer.unref();
  }

  close(): void {
    clearInterval(this.#timer);
  }

  /**
   * Record a revocation; answers whether it is news (a later one than known for its subject), and tells `learned`
   * when it is. A subject string that names nothing is ignored.
   */
  apply(subjectText: string, revokedAt: number): boolean {
    const subject = subjectOf(subjectText);
    if (subject === undefined || !Number.isFinite(revokedAt)) return false;
    const [map, key] = subject.kind === 'person' ? [this.#persons, subject.key] : [this.#apiUsers, subject.name];
    if ((map.get(key) ?? -Infinity) >= revokedAt) return false;
    map.set(key, revokedAt);
    this.#options.counted(this.size);
    this.#options.learned(subject, revokedAt);
    return true;
  }

  async #read(since: number): Promise<void> {
    const startedAt = Date.now();
    for (const [subject, revokedAt] of await this.#options.broker.revocations(Math.max(0, since))) this.apply(subject, revokedAt);
    this.#readSince = startedAt;
    this.#forgetBefore(startedAt - this.#options.keepMs);
  }

  #forgetBefore(oldest: number): void {
    for (const map of [this.#apiUsers, this.#persons]) {
      for (const [key, revokedAt] of map) if (revokedAt < oldest) map.delete(key);
    }
    this.#options.counted(this.size);
  }
}
