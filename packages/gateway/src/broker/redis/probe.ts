/**
 * Knowing at once that Redis does not answer. A partition (a switch, a security group, a failover to another address)
 * breaks no TCP connection: packets are just not delivered, and a command waits for its answer for as long as TCP
 * retransmits, minutes. So the node asks: a PING on each command connection (one redis-server's, or each master's of
 * a Cluster) every quarter of `lostAfterMs`. One unanswered for `lostAfterMs`, or a connection attempt whose handshake
 * has had no answer for as long, and that connection is cut (`cut`): the commands waiting on it fail at once, its
 * owner sees it close (Redis lost: not-ready, emits 503), it connects again by itself, and nothing the old connection
 * held (channel messages that TCP would deliver after the heal) arrives late.
 *
 * Judged only after a tick that came on time, once this turn's I/O has been read: a node whose own event loop stalled
 * may hold Redis's answer unread in its socket, so a late tick tells only that the node, not Redis, was slow.
 */
import type { Redis } from 'ioredis';

export interface ProbeOptions {
  lostAfterMs: number;
  /** The connections to ask, read at every tick (a Cluster's masters change). */
  clients: () => Iterable<Redis>;
  /** Cut this connection: Redis did not answer it (`why` says what and for how long). */
  cut: (client: Redis, why: string) => void;
}

/** What the probe knows of one connection: when its unanswered PING left, when its unanswered handshake began. */
interface Asked {
  pingAt: number | undefined;
  connectingSince: number | undefined;
}

export class Probe {
  readonly #options: ProbeOptions;
  readonly #everyMs: number;
  readonly #asked = new WeakMap<Redis, Asked>();
  #timer: NodeJS.Timeout | undefined;
  #due = 0;

  constructor(options: ProbeOptions) {
    this.#options = options;
    this.#everyMs = Math.max(25, Math.floor(options.lostAfterMs / 4));
  }

  start(): void {
    this.#due = performance.now() + this.#everyMs;
    this.#timer = setInterval(() => this.#tick(), this.#everyMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #tick(): void {
    const now = performance.now();
    const late = now - this.#due > this.#everyMs;
    this.#due = now + this.#everyMs;
    // After the poll phase: an answer already in a socket has been read by then.
    if (!late) setImmediate(() => this.#judge());
  }

  #judge(): void {
    const now = performance.now();
    const { lostAfterMs } = this.#options;
    for (const client of this.#options.clients()) {
      let asked = this.#asked.get(client);
      if (asked === undefined) this.#asked.set(client, (asked = { pingAt: undefined, connectingSince: undefined }));
      if (client.status === 'connect') {
        // TCP is up and the handshake (CLIENT SETNAME, INFO) waits for Redis.
        asked.connectingSince ??= now;
        if (now - asked.connectingSince > lostAfterMs) this.#cut(client, asked, `Redis did not answer the connection's handshake within ${Math.round(now - asked.connectingSince)} ms`);
        continue;
      }
      asked.connectingSince = undefined;
      if (client.status !== 'ready') continue;
      if (asked.pingAt === undefined) this.#ping(client, asked, now);
      else if (now - asked.pingAt > lostAfterMs) this.#cut(client, asked, `no answer from Redis for ${Math.round(now - asked.pingAt)} ms`);
    }
  }

  #ping(client: Redis, asked: Asked, now: number): void {
    asked.pingAt = now;
    // A rejection is the connection closing, which its owner hears of itself.
    const answered = () => {
      if (asked.pingAt === now) asked.pingAt = undefined;
    };
    client.ping().then(answered, answered);
  }

  #cut(client: Redis, asked: Asked, why: string): void {
    asked.pingAt = undefined;
    asked.connectingSince = undefined;
    this.#options.cut(client, why);
  }
}
