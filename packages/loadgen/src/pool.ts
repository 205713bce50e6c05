/**
 * A pool of clients held open in this process: started at a steady rate, then kept until closed, counting
 * the notifications they receive. Past one process's open files, `WorkerPools` runs several of these.
 */
import { EmitTallies } from './emit-tallies.ts';
import { Histogram } from './histogram.ts';
import { clockMs, sentAtOf } from './frames.ts';
import type { ClientKind, ClientObserver, ClientOptions, HistoryOutcome, LoadClient } from './load-client.ts';
import { newClient } from './ws-client.ts';
import { Reconnector, type ReconnectHost, type ReconnectPolicy } from './reconnect.ts';
import { planClient, type Roster } from './roster.ts';
import { PHASES, type Phase, type PoolSnapshot } from './snapshot.ts';
import { Timeline } from './timeline.ts';
import { sourceAddress } from './source-addresses.ts';

export interface PoolSpec {
  roster: Roster;
  /** Index of this pool's first client among all clients of the run (its recipientId, its person). */
  first: number;
  count: number;
  /** Clients started per second. */
  rate: number;
  /**
   * Clients started and not yet ready or refused (connecting, registering, waiting to try again) at most at once;
   * undefined: no cap. With a cap the fill slows to what the nodes take instead of piling up attempts that time out.
   */
  maxPending?: number | undefined;
  /** Clients per source address (127.0.0.2, .3, ... by client index); 0: the kernel's choice, 127.0.0.1. */
  perAddress: number;
  timeoutMs: number;
  /** Bring dropped clients back (--reconnect); undefined: a dropped client stays gone. */
  reconnect: ReconnectPolicy | undefined;
  /** Tally notifications per emit (paced broadcasts: each one's last told); see emit-tallies.ts. */
  tallyEmits: boolean;
  /** Clients resume an event's history when they come back, and drop repeats (notify --resume; load-client.ts). */
  resume?: boolean;
  /** --client: raw (default) or ws (ws-client.ts). */
  client?: ClientKind;
  /** --read-rate: messages a second each ws client reads at most (undefined: as fast as it can). */
  readRate?: number | undefined;
}


/** A group of held clients, in this process or in workers. */
export interface ClientGroup {
  /** Start every client at the spec's rate; resolves once each is ready or failed, or on abort. */
  open(signal?: AbortSignal): Promise<void>;
  snapshot(withRecipients?: boolean): Promise<PoolSnapshot>;
  /** Forget the notifications so far (after a warm-up). */
  resetDelivery(): Promise<void>;
  /** Drop every client at once (and stop bringing any back). Idempotent. */
  close(): Promise<void>;
}

const PACE_MS = 5;

/**
 * `step` called `count` times, `rate` a second (in bursts every PACE_MS), while `room()` says more may go, or fewer
 * once `signal` aborts. Time spent without room is not made up later: the rate resumes, it does not burst.
 */
export function paced(count: number, rate: number, signal: AbortSignal | undefined, step: (i: number) => void, room: () => number = () => Infinity): Promise<void> {
  let began = performance.now();
  let done = 0;
  return new Promise<void>((resolve) => {
    const pace = setInterval(() => {
      const now = performance.now();
      const due = signal?.aborted ? done : Math.min(count, Math.floor(((now - began) * rate) / 1000) + 1);
      const allowed = Math.min(due, done + Math.max(0, room()));
      while (done < allowed) step(done++);
      if (allowed < due) began = now - ((done - 1) * 1000) / rate;
      if (done === count || signal?.aborted) {
        clearInterval(pace);
        resolve();
      }
    }, PACE_MS);
  });
}

export class Pool implements ClientGroup, ClientObserver, ReconnectHost {
  readonly #spec: PoolSpec;
  readonly #reconnector: Reconnector | undefined;
  /** Client index − first → the client now standing for it (a returning client takes the dropped one's place). */
  readonly #clients: LoadClient[] = [];
  readonly #phases = Object.fromEntries(PHASES.map((phase) => [phase, new Histogram()])) as Record<Phase, Histogram>;
  #delivery = new Histogram();
  #emits: EmitTallies | undefined;
  #failures: Record<string, number> = {};
  #connected = 0;
  #ready = 0;
  #failed = 0;
  #dropped = 0;
  #received = 0;
  #timed = 0;
  #firstStartAt = 0;
  #lastReadyAt = 0;
  #lastReceivedAt = 0;
  #back = 0;
  #subscribed = 0;
  #subscribeRefused = 0;
  #retryFailures: Record<string, number> = {};
  readonly #history: Record<string, number> = {};
  readonly #away = new Histogram();
  #firstDropAt = 0;
  #lastBackAt = 0;
  readonly #level = new Timeline();
  #settled: (() => void) | undefined;

  constructor(spec: PoolSpec) {
    this.#spec = spec;
    if (spec.tallyEmits) this.#emits = new EmitTallies();
    this.#reconnector = spec.reconnect && new Reconnector(spec.reconnect, this, (index) => this.#clientOptions(index));
  }

  /** One per source address, shared by its clients. */
  readonly #options = new Map<string | undefined, ClientOptions>();

  #clientOptions(index: number): ClientOptions {
    const localAddress = sourceAddress(index, this.#spec.perAddress);
    let options = this.#options.get(localAddress);
    if (!options) this.#options.set(localAddress, (options = { localAddress, timeoutMs: this.#spec.timeoutMs, resume: this.#spec.resume, kind: this.#spec.client, readRate: this.#spec.readRate }));
    return options;
  }

  async open(signal?: AbortSignal): Promise<void> {
    const { count, rate } = this.#spec;
    const { maxPending = Infinity } = this.#spec;
    await paced(count, rate, signal, () => this.#startNext(), () => maxPending - (this.#clients.length - this.#ready - this.#failed));
    // Retried first connects (--reconnect) may go on until the run ends: an abort stops the wait for them.
    if (this.#ready + this.#failed < this.#clients.length && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        this.#settled = resolve;
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
    }
  }

  /** Clients started so far. */
  get size(): number {
    return this.#clients.length;
  }

  #startNext(): void {
    const index = this.#spec.first + this.#clients.length;
    const client = newClient(index, planClient(this.#spec.roster, index), this, this.#clientOptions(index));
    this.#clients.push(client);
    if (this.#firstStartAt === 0) this.#firstStartAt = clockMs();
    client.start();
  }

  #settle(): void {
    if (this.#settled && this.#ready + this.#failed === this.#clients.length) {
      this.#settled();
      this.#settled = undefined;
    }
  }

  ready(client: LoadClient): void {
    this.#connected++;
    this.#ready++;
    this.#phases.tcp.record(client.tcpAt - client.startAt);
    this.#phases.connected.record(client.connectedAt - client.tcpAt);
    if (client.registerSentAt > 0) this.#phases.register.record(client.readyAt - client.registerSentAt);
    this.#phases.total.record(client.readyAt - client.startAt);
    this.#lastReadyAt = clockMs();
    this.#level.record(this.#lastReadyAt, 'joined');
    this.#settle();
  }

  /** With --reconnect a first connect that failed is tried again (reconnect.ts): it counts once ready or refused for good. */
  failed(client: LoadClient, reason: string): void {
    if (this.#reconnector) this.#reconnector.failed(client, reason);
    else this.firstConnectFailed(client, reason);
  }

  firstConnectFailed(client: LoadClient, reason: string): void {
    if (client.connectedAt > 0) this.#connected++;
    this.#failed++;
    this.#failures[reason] = (this.#failures[reason] ?? 0) + 1;
    this.#settle();
  }

  closed(client: LoadClient, code: number): void {
    const now = clockMs();
    this.#dropped++;
    if (this.#firstDropAt === 0) this.#firstDropAt = now;
    this.#level.record(now, 'dropped');
    this.#reconnector?.dropped(client, now, code);
  }

  joined(client: LoadClient): void {
    this.#clients[client.index - this.#spec.first] = client;
    this.ready(client);
  }

  back(client: LoadClient, awayMs: number): void {
    this.#clients[client.index - this.#spec.first] = client;
    this.#back++;
    this.#away.record(awayMs);
    this.#lastBackAt = clockMs();
    this.#level.record(this.#lastBackAt, 'back');
  }

  history(_client: LoadClient, what: HistoryOutcome): void {
    this.#history[what] = (this.#history[what] ?? 0) + 1;
  }

  retryFailed(reason: string): void {
    this.#retryFailures[reason] = (this.#retryFailures[reason] ?? 0) + 1;
  }

  subscribed(_client: LoadClient, accepted: boolean): void {
    if (accepted) this.#subscribed++;
    else this.#subscribeRefused++;
  }

  /**
   * Each ready client sends another REGISTER, `frame` (the same for all: a subscription without criteria, the
   * audience of a broadcast), `rate` a second; resolves once all are sent. The answers are counted as they come
   * (`subscribed`, `subscribeRefused`); a client that is not ready at its turn is passed over.
   */
  subscribeAll(frame: string, rate: number, signal?: AbortSignal): Promise<number> {
    const clients = [...this.#clients];
    let sent = 0;
    return paced(clients.length, rate, signal, (i) => {
      if (clients[i]!.subscribe(frame)) sent++;
    }).then(() => sent);
  }

  notification(_client: LoadClient, frame: Buffer): void {
    const now = clockMs();
    this.#received++;
    this.#lastReceivedAt = now;
    const sentAt = sentAtOf(frame);
    if (sentAt === sentAt) {
      this.#timed++;
      this.#delivery.record(now - sentAt);
      this.#emits?.record(sentAt, now - sentAt);
    }
  }

  async snapshot(withRecipients = false): Promise<PoolSnapshot> {
    const snapshot: PoolSnapshot = {
      started: this.#clients.length,
      connected: this.#connected,
      ready: this.#ready,
      failed: this.#failed,
      failures: { ...this.#failures },
      dropped: this.#dropped,
      firstStartAt: this.#firstStartAt,
      lastReadyAt: this.#lastReadyAt,
      phases: Object.fromEntries(PHASES.map((phase) => [phase, this.#phases[phase].toData()])) as PoolSnapshot['phases'],
      received: this.#received,
      timed: this.#timed,
      delivery: this.#delivery.toData(),
      emits: this.#emits?.toData() ?? [],
      lastReceivedAt: this.#lastReceivedAt,
      back: this.#back,
      subscribed: this.#subscribed,
      subscribeRefused: this.#subscribeRefused,
      retryFailures: { ...this.#retryFailures },
      history: { ...this.#history },
      away: this.#away.toData(),
      firstDropAt: this.#firstDropAt,
      lastBackAt: this.#lastBackAt,
      level: this.#level.toData(),
    };
    if (withRecipients) snapshot.recipients = this.#recipients();
    return snapshot;
  }

  #recipients(): Record<string, number> {
    const recipients: Record<string, number> = {};
    for (const client of this.#clients) {
      const key = client.plan.recipient;
      if (client.state === 'ready' && key !== undefined) recipients[key] = (recipients[key] ?? 0) + 1;
    }
    return recipients;
  }

  async resetDelivery(): Promise<void> {
    this.#delivery = new Histogram();
    if (this.#emits) this.#emits = new EmitTallies();
    this.#received = 0;
    this.#timed = 0;
    this.#lastReceivedAt = 0;
  }

  async close(): Promise<void> {
    this.#reconnector?.close();
    for (const client of this.#clients) client.terminate();
  }
}
