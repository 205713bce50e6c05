/**
 * How far behind, in time, this node's busy connections are: through everything between the node and the client's
 * reading (the node's stream, both kernels' buffers, the network, the client's own queue of frames), which the
 * delivery backlog's bytes cannot see once the kernel has taken them.
 *
 * A busy connection (written PROBE_AFTER_BYTES within BUSY_TICKS) gets a ping behind its data, with one byte of
 * payload that tells it from the liveness ping. Its client answers once it has read all that came before, so the
 * pong's delay is the connection's lag. A connection written a notification now and then is never probed; one
 * answered rests before the next probe, so that a fast reader costs two pings a second at most. A probe
 * unanswered for websocket.maxLagMs closes its connection.
 *
 * Each tick, every connection probed lately has one vote: the age of its probe in flight, else its last probe's lag.
 * The node's lag is the median vote, so that one slow reader among busy ones holds back nobody (it is closed instead).
 * Past emit.maxLagMs every emit is refused; from half of it, while the lag climbs, fewer are let in (emit-limit.ts).
 */
import { EmitLimit } from './emit-limit.ts';
import type { Session } from './session.ts';

export interface LagOptions {
  /** emit.maxLagMs: the node's lag past which every emit is refused (or waits). */
  emitBoundMs: number;
  /** websocket.maxLagMs: a probe unanswered this long closes its connection. */
  connectionBoundMs: number;
  /** A probe's lag in ms: answered, or found past websocket.maxLagMs. */
  observe(lagMs: number): void;
  /** Close a connection whose probe has waited past websocket.maxLagMs. */
  shed(session: Session, lagMs: number): void;
}

/** A connection's last answered probe. */
interface Answer {
  lagMs: number;
  /** The last tick it votes at. */
  until: number;
}

/** The probe's payload: the liveness ping has none. */
const PROBE = Buffer.from('l');
/**
 * Bytes written to a connection within BUSY_TICKS after which it is probed. Small, so that a probe waits behind little
 * more than it: the lag it measures is that of the data before it.
 */
export const PROBE_AFTER_BYTES = 4 * 1024;
const TICK_MS = 50;
/** A connection's bytes count toward a probe for a second. */
const BUSY_TICKS = 20;
/** A connection's last answer votes through its rest and this much after, until its next probe is likely in flight. */
const VOTE_TICKS = 8;
/**
 * Ticks an answered connection waits before it may be probed again: a connection well within the bound (a quarter of
 * emit.maxLagMs) the long rest, so that fast readers cost few probes; one further behind the short one.
 */
const LONG_REST_TICKS = 10;
const SHORT_REST_TICKS = 2;
/** The votes' histogram: STEPS buckets per doubling of the lag, from 1 ms to 2^OCTAVES ms. */
const STEPS = 8;
const OCTAVES = 17;

export class DeliveryLag {
  readonly #options: LagOptions;
  /** Probes in flight, in the order sent: session -> sent at (performance.now()). */
  readonly #inFlight = new Map<Session, number>();
  /** Each connection's last answered probe, while it votes. */
  readonly #answers = new Map<Session, Answer>();
  /** Connections answered and resting, by the tick they may be probed again at (modulo LONG_REST_TICKS). */
  readonly #resting: Set<Session>[] = Array.from({ length: LONG_REST_TICKS }, () => new Set());
  readonly #votes = new Uint32Array(STEPS * OCTAVES + 1);
  /** Ticks since the node started, while it ticks: the clock of the connections' busy windows. */
  #ticks = 0;
  /** The last tick in which a connection was written to: ticking stops a window after, with nothing in flight. */
  #lastWrite = 0;
  #wroteThisTick = false;
  #timer: NodeJS.Timeout | undefined;
  #waiters: (() => void)[] = [];
  /** The median vote at the last tick, in ms (0 without votes). */
  medianMs = 0;
  /** Probes in flight past emit.maxLagMs at the last tick. */
  lagging = 0;
  /** Whether the node's lag is past emit.maxLagMs: every emit is refused, or waits. */
  over = false;
  /** The emits let in while the lag climbs. */
  readonly #limit: EmitLimit;

  constructor(options: LagOptions) {
    this.#options = options;
    this.#limit = new EmitLimit(options.emitBoundMs, TICK_MS);
  }

  get emitBoundMs(): number {
    return this.#options.emitBoundMs;
  }

  /** Whether to refuse this emit: past emit.maxLagMs, or past the limit; else it is counted as let in. */
  refuses(): boolean {
    return this.over || !this.#limit.take();
  }

  /** `bytes` were written to `session`: probe it once it is busy. */
  wrote(session: Session, bytes: number): void {
    this.#wroteThisTick = true;
    this.#timer ??= setInterval(this.#tick, TICK_MS).unref();
    if (session.unprobedBytes < 0) return;
    if (this.#ticks - session.unprobedSince > BUSY_TICKS) {
      session.unprobedBytes = 0;
      session.unprobedSince = this.#ticks;
    }
    if ((session.unprobedBytes += bytes) < PROBE_AFTER_BYTES) return;
    session.unprobedBytes = -1;
    this.#inFlight.set(session, performance.now());
    session.socket.ping(PROBE);
  }

  /** A pong: a probe's answer if it carries the probe's payload and one is in flight (any other is ignored). */
  answered(session: Session, payload: Buffer): void {
    if (!PROBE.equals(payload)) return;
    const sentAt = this.#inFlight.get(session);
    if (sentAt === undefined) return;
    this.#inFlight.delete(session);
    const lagMs = performance.now() - sentAt;
    this.#options.observe(lagMs);
    const rest = lagMs > this.#options.emitBoundMs / 4 ? SHORT_REST_TICKS : LONG_REST_TICKS;
    this.#answers.set(session, { lagMs, until: this.#ticks + rest + VOTE_TICKS });
    this.#resting[(this.#ticks + rest) % LONG_REST_TICKS]!.add(session);
  }

  /** A closed connection: it no longer votes. */
  forget(session: Session): void {
    this.#inFlight.delete(session);
    this.#answers.delete(session);
  }

  /** Resolves once the node's lag is within emit.maxLagMs (at once if it is). */
  settled(): Promise<void> {
    if (!this.over) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Stop ticking (the node is closing). */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  readonly #tick = (): void => {
    if (this.#wroteThisTick) this.#lastWrite = this.#ticks;
    this.#wroteThisTick = false;
    this.#ticks++;
    const rested = this.#resting[this.#ticks % LONG_REST_TICKS]!;
    for (const session of rested) {
      session.unprobedBytes = 0;
      session.unprobedSince = this.#ticks;
    }
    rested.clear();
    const votes = this.#count();
    this.#judge(votes);
    this.#limit.tick({ tick: this.#ticks, medianMs: this.medianMs, over: this.over, votes });
    // Nothing written for a while and no limit to grow: nothing to tick for.
    if (this.#inFlight.size === 0 && this.#answers.size === 0 && this.#ticks - this.#lastWrite > BUSY_TICKS && !this.#limit.limiting) this.stop();
  };

  /** Each busy connection's vote into the histogram (probes past websocket.maxLagMs shed); answers how many. */
  #count(): number {
    const now = performance.now();
    const { emitBoundMs, connectionBoundMs } = this.#options;
    this.#votes.fill(0);
    let votes = 0;
    this.lagging = 0;
    for (const [session, sentAt] of this.#inFlight) {
      const ageMs = now - sentAt;
      if (ageMs > connectionBoundMs) {
        this.#inFlight.delete(session);
        this.#options.observe(ageMs);
        this.#options.shed(session, ageMs);
        continue;
      }
      if (ageMs > emitBoundMs) this.lagging++;
      this.#votes[bucketOf(ageMs)]!++;
      votes++;
    }
    for (const [session, answer] of this.#answers) {
      if (this.#ticks > answer.until) this.#answers.delete(session);
      else if (!this.#inFlight.has(session)) {
        this.#votes[bucketOf(answer.lagMs)]!++;
        votes++;
      }
    }
    return votes;
  }

  #judge(votes: number): void {
    let bucket = 0;
    for (let counted = this.#votes[0]!; counted * 2 < votes; counted += this.#votes[bucket]!) bucket++;
    this.medianMs = votes === 0 ? 0 : 2 ** (bucket / STEPS);
    this.over = this.medianMs > this.#options.emitBoundMs;
    if (!this.over && this.#waiters.length > 0) {
      for (const resolve of this.#waiters) resolve();
      this.#waiters = [];
    }
  }
}

/** The histogram bucket of a lag: the first whose bound (2^(i/STEPS) ms) is at least it. */
function bucketOf(lagMs: number): number {
  if (lagMs <= 1) return 0;
  return Math.min(STEPS * OCTAVES, Math.ceil(Math.log2(lagMs) * STEPS));
}
