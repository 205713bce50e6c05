/**
 * The emit stream (config ingest; docs/protocol.md 5.3): a second way in for emits, which a back end can write to
 * while no node answers. The nodes read it in one consumer group, one node at a time (the one holding the reader's
 * lease), so that its entries are published in the order they were added; an entry is acknowledged once published.
 * A node that takes the lease over claims every entry left pending (by a reader that died) before it reads a new
 * one. The Redis stream is the real one (redis/ingest.ts); this file holds the interface and the in-process one.
 */

/** One entry as the back end added it: its id (`<ms>-<seq>`) and its fields. */
export interface StreamEntry {
  id: string;
  fields: Readonly<Record<string, string>>;
}

/** What waits in the stream: entries delivered and not acknowledged, entries not yet delivered, and the oldest's age. */
export interface StreamBacklog {
  pending: number;
  undelivered: number;
  /** How long ago the oldest of them was added, ms; undefined when none waits. */
  oldestMs: number | undefined;
}

export interface IngestStream {
  /** Create the consumer group if there is none, from the stream's start: what was added while no node ran is read too. */
  start(): Promise<void>;
  /** Take the reader's lease for `ms` if nobody holds it, or extend it if this consumer does: answers whether it holds it. */
  lead(ms: number): Promise<boolean>;
  /** Give the lease up (a node leaving): another node takes it at once rather than when it runs out. */
  resign(): Promise<void>;
  /** Entries never delivered, now this consumer's: up to `count`, waiting up to `blockMs` for the first; [] if none came. */
  read(count: number, blockMs: number): Promise<StreamEntry[]>;
  /** Entries delivered (to any consumer) and not acknowledged for longer than `idleMs`, oldest first, now this consumer's; up to `count`. */
  claim(idleMs: number, count: number): Promise<StreamEntry[]>;
  /** Done with: published, or dead-lettered. */
  ack(ids: readonly string[]): Promise<void>;
  /** Put the entry, with `reason`, on the dead-letter stream, and acknowledge it. */
  deadLetter(entry: StreamEntry, reason: string): Promise<void>;
  backlog(): Promise<StreamBacklog>;
  /** Drop the entries every consumer is done with (before the oldest one pending or undelivered). */
  trim(): Promise<void>;
  /** Stop reading (a read waiting for entries ends, with none). */
  close(): Promise<void>;
}

/** A dead-lettered entry as the in-process stream keeps it. */
export interface DeadLetter {
  entry: StreamEntry;
  reason: string;
}

interface Delivered {
  entry: StreamEntry;
  consumer: string;
  at: number;
}

/** The in-process stream: one per fleet in a process (tests), read by any number of consumers. */
export class MemoryStream {
  readonly #entries: StreamEntry[] = [];
  /** Entries delivered and not acknowledged, by id. */
  readonly #pending = new Map<string, Delivered>();
  readonly deadLetters: DeadLetter[] = [];
  #leader: { name: string; until: number } | undefined;
  #next = 0;
  #seq = 0;
  #wake: Array<() => void> = [];

  /** What a back end's XADD does: answers the entry's id. */
  add(fields: Record<string, string>): string {
    const id = `${Date.now()}-${this.#seq++}`;
    this.#entries.push({ id, fields });
    for (const wake of this.#wake.splice(0)) wake();
    return id;
  }

  consumer(name: string): IngestStream {
    const stream = this;
    let closed = false;
    return {
      start: async () => {},
      async lead(ms) {
        const now = Date.now();
        const held = stream.#leader;
        if (held !== undefined && held.name !== name && held.until > now) return false;
        stream.#leader = { name, until: now + ms };
        return true;
      },
      async resign() {
        if (stream.#leader?.name === name) stream.#leader = undefined;
      },
      async read(count, blockMs) {
        if (stream.#next >= stream.#entries.length && !closed) await stream.#waitFor(blockMs);
        const taken = stream.#entries.slice(stream.#next, stream.#next + count);
        stream.#next += taken.length;
        for (const entry of taken) stream.#pending.set(entry.id, { entry, consumer: name, at: Date.now() });
        return taken;
      },
      async claim(idleMs, count) {
        const now = Date.now();
        const idle = [...stream.#pending.values()].filter((delivered) => now - delivered.at >= idleMs).slice(0, count);
        for (const delivered of idle) Object.assign(delivered, { consumer: name, at: now });
        return idle.map((delivered) => delivered.entry);
      },
      async ack(ids) {
        for (const id of ids) stream.#pending.delete(id);
      },
      async deadLetter(entry, reason) {
        stream.deadLetters.push({ entry, reason });
        stream.#pending.delete(entry.id);
      },
      backlog: async () => stream.#backlog(),
      trim: async () => {},
      async close() {
        closed = true;
        for (const wake of stream.#wake.splice(0)) wake();
      },
    };
  }

  #backlog(): StreamBacklog {
    const waiting = [...[...this.#pending.values()].map((delivered) => delivered.entry), ...this.#entries.slice(this.#next)];
    const oldest = waiting.map((entry) => Number(entry.id.split('-')[0])).reduce((a, b) => Math.min(a, b), Infinity);
    return { pending: this.#pending.size, undelivered: this.#entries.length - this.#next, oldestMs: oldest === Infinity ? undefined : Date.now() - oldest };
  }

  #waitFor(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
