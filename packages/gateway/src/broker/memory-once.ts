/**
 * The in-process broker's idempotency keys (Broker.claim, settle): each held until its window runs out, or while
 * pending until its claim does, then forgotten (looked at once a second at most, as memory-history.ts does).
 */
import type { Claimed, Once } from './broker.ts';

interface Held {
  digest: string;
  /** The first emit's answer; undefined while it is pending. */
  answer: string | undefined;
  until: number;
}

export class MemoryOnce {
  readonly #keys = new Map<string, Held>();
  #sweptAt = 0;

  claim({ id }: Once, digest: string, pendingMs: number): Claimed {
    const now = Date.now();
    this.#sweep(now);
    const held = this.#keys.get(id);
    if (held !== undefined && held.until > now) {
      return held.answer === undefined ? { state: 'pending', digest: held.digest } : { state: 'done', digest: held.digest, answer: held.answer };
    }
    this.#keys.set(id, { digest, answer: undefined, until: now + pendingMs });
    return { state: 'new' };
  }

  settle({ id, windowMs }: Once, digest: string, answer: string | undefined): void {
    if (answer !== undefined) this.#keys.set(id, { digest, answer, until: Date.now() + windowMs });
    else if (this.#keys.get(id)?.answer === undefined) this.#keys.delete(id);
  }

  #sweep(now: number): void {
    if (now - this.#sweptAt < 1000) return;
    this.#sweptAt = now;
    for (const [id, held] of this.#keys) if (held.until <= now) this.#keys.delete(id);
  }
}
