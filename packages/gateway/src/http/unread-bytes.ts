/**
 * The bytes a connection has read and not yet answered, for the emit's fast path (fast-path.ts): one buffer that
 * grows by doubling, so a body that arrives in many small reads costs each byte one copy (amortised), where joining
 * the reads anew at each one cost the square of their number. A read that finds nothing waiting is kept as it is,
 * without a copy: the usual case, a whole request in one read.
 */
const EMPTY = Buffer.alloc(0);
/** The least a grown buffer holds: small pieces do not each cost an allocation. */
const MIN_CAPACITY = 4096;

export class UnreadBytes {
  #buffer: Buffer = EMPTY;
  #start = 0;
  #end = 0;
  /** Whether #buffer is this object's to write into; a read kept as it is belongs to the socket's stream. */
  #owned = false;

  get length(): number {
    return this.#end - this.#start;
  }

  /** The bytes waiting, as a view: valid until the next append, consume or take. */
  view(): Buffer {
    return this.#buffer.subarray(this.#start, this.#end);
  }

  /**
   * Adds a read. `expected`: how many bytes the request being read needs in all (from the start of the bytes
   * waiting), when its head said so: the buffer then grows to no more than that while the request is short of it.
   */
  append(chunk: Buffer, expected?: number): void {
    if (this.length === 0) {
      this.#buffer = chunk;
      this.#start = 0;
      this.#end = chunk.length;
      this.#owned = false;
      return;
    }
    const needed = this.length + chunk.length;
    if (!this.#owned || this.#start + needed > this.#buffer.length) this.#grow(needed, expected);
    this.#end += chunk.copy(this.#buffer, this.#end);
  }

  /** Drops the first `count` bytes waiting (a request answered). */
  consume(count: number): void {
    this.#start += Math.min(count, this.length);
    if (this.length === 0) this.#clear();
  }

  /** Everything waiting, which is no longer this object's (a hand-over); undefined when nothing waits. */
  take(): Buffer | undefined {
    const bytes = this.length === 0 ? undefined : this.view();
    this.#clear();
    return bytes;
  }

  /** A new buffer with room for `needed` bytes and more, the bytes waiting moved to its start. */
  #grow(needed: number, expected: number | undefined): void {
    const doubled = Math.max(needed * 2, MIN_CAPACITY);
    const capacity = expected !== undefined && expected >= needed ? Math.min(doubled, expected) : doubled;
    const grown = Buffer.allocUnsafe(capacity);
    this.#end = this.#buffer.copy(grown, 0, this.#start, this.#end);
    this.#start = 0;
    this.#buffer = grown;
    this.#owned = true;
  }

  #clear(): void {
    this.#buffer = EMPTY;
    this.#start = 0;
    this.#end = 0;
    this.#owned = false;
  }
}
