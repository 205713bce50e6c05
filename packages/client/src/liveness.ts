/**
 * The client's own check that the node still answers. Browsers and Node's WebSocket answer the node's pings by
 * themselves and never show them to the page, so a connection whose TCP path died silently looks open for minutes.
 * After `idleMs` without any frame the client sends a probe the node must answer (an empty UNREGISTER, a no-op every
 * node replies to); if nothing at all arrives within `timeoutMs` after it, the connection is taken as dead.
 */

export interface LivenessOptions {
  idleMs: number;
  timeoutMs: number;
  /** Send something the node answers. */
  probe: () => void;
  /** Nothing came back in time: end the connection. */
  dead: () => void;
  now?: () => number;
}

export class Liveness {
  readonly #options: LivenessOptions;
  readonly #now: () => number;
  #heardAt: number;
  #probedAt: number | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(options: LivenessOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    this.#heardAt = this.#now();
    this.#schedule(options.idleMs);
  }

  /** A frame arrived. Only a time is kept: a timer per frame would cost more than the frame at high rates. */
  heard(): void {
    this.#heardAt = this.#now();
    this.#probedAt = undefined;
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #check(): void {
    const { idleMs, timeoutMs, probe, dead } = this.#options;
    const now = this.#now();
    if (this.#probedAt !== undefined) {
      const waited = now - this.#probedAt;
      if (waited >= timeoutMs) {
        this.stop();
        return dead();
      }
      return this.#schedule(timeoutMs - waited);
    }
    const silent = now - this.#heardAt;
    if (silent < idleMs) return this.#schedule(idleMs - silent);
    this.#probedAt = now;
    this.#schedule(timeoutMs);
    probe();
  }

  #schedule(ms: number): void {
    this.#timer = setTimeout(() => this.#check(), ms);
  }
}
