/**
 * What a fleet owes its clients, and what they got, for the fault tests of events with history: a person's SDK client
 * (Listener) and emits to the people through one node at a steady rate (Flow), each answer kept by its status.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { HeraldClient, type Notification, type OnEventInput } from '../../../client/src/index.ts';
import { PEOPLE, type Fleet, type FleetNode } from './fleet.ts';
import { personToken } from './gateway.ts';
import { emitRequest, RawHttp } from './raw-http.ts';

export interface Received {
  event: string;
  tag: string;
  seq: number;
  offset: number | undefined;
  epoch: string | undefined;
}

export interface ListenerOptions {
  /** The load balancer's WebSocket URL. */
  url: string;
  /** While it answers a promise, every reconnect attempt waits for it: what happens meanwhile happens while the clients are away. */
  gate?: () => Promise<void> | undefined;
  /** Also registered, without criteria (no history: nothing is owed, but nothing may come twice). */
  broadcasts?: string;
}

/** A person's client, registered for their order-updates, recording what arrives and how it came back. */
export class Listener {
  readonly recipientId: string;
  readonly got: Received[] = [];
  /** Per reconnect of a subscription of an event with history, whether it was recovered. */
  readonly recovered: boolean[] = [];
  /** Close codes of the open connection, in order, and when each came (performance.now()). */
  readonly closes: number[] = [];
  readonly closedAt: number[] = [];
  historyLost = 0;
  client!: HeraldClient;
  readonly #options: ListenerOptions;
  #wake: (() => void) | undefined;

  constructor(index: number, options: ListenerOptions) {
    this.recipientId = String(index + 1);
    this.#options = options;
  }

  async connect(tokens: { apiToken: string; personToken: string }): Promise<void> {
    const getTokens = async () => {
      await this.#options.gate?.();
      return tokens;
    };
    this.client = await HeraldClient.connect({ url: this.#options.url, getTokens, minDelayMs: 100, maxDelayMs: 600 });
    this.client.onNotification((n: Notification) => {
      const { tag, seq } = n.eventData as { tag: string; seq: number };
      this.got.push({ event: n.apiName, tag, seq, offset: n.offset, epoch: n.epoch });
      this.#wake?.();
    });
    this.client.on('reconnected', ({ recovered }) => void this.recovered.push(...Object.values(recovered)));
    this.client.on('historyLost', () => void this.historyLost++);
    this.client.on('disconnected', ({ code, willReconnect }) => {
      if (!willReconnect) return;
      this.closes.push(code);
      this.closedAt.push(performance.now());
    });
    const criteria = { recipientId: this.recipientId };
    const { broadcasts } = this.#options;
    const entries: OnEventInput[] = [{ apiName: 'order-updates', condition: { conditionType: 'RESPONSE', criteria } }];
    if (broadcasts !== undefined) entries.push({ apiName: broadcasts });
    const { validOnEvents } = await this.client.register(entries);
    assert.equal(typeof validOnEvents[0]?.offset, 'number');
  }

  seqs(tag: string, event = 'order-updates'): number[] {
    return this.got.filter((received) => received.tag === tag && received.event === event).map((received) => received.seq);
  }

  /** Once the notification `seq` of `tag` has arrived. */
  async until(tag: string, seq: number): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (!this.got.some((received) => received.tag === tag && received.seq === seq)) {
      assert.ok(Date.now() < deadline, `person ${this.recipientId}: no ${tag} ${seq}; got ${JSON.stringify(this.seqs(tag))}`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 200);
      });
    }
  }
}

/**
 * `count` listeners connected through the fleet's load balancer, listener i as person i mod 9 (so several share a person
 * past nine), each with its person's token.
 */
export async function connectListeners(fleet: Fleet, apiToken: string, count: number, options: Omit<ListenerOptions, 'url'> = {}): Promise<Listener[]> {
  const listeners = Array.from({ length: count }, (_, i) => new Listener(i % PEOPLE.length, { url: fleet.ws, ...options }));
  await Promise.all(listeners.map(async (listener, i) => {
    const [u, p] = PEOPLE[i % PEOPLE.length]!;
    await listener.connect({ apiToken, personToken: await personToken(fleet, u, p) });
  }));
  return listeners;
}

export interface FlowOptions {
  listeners: readonly Listener[];
  /** The API user's token. */
  api: string;
  /** Emits a second, over all the listeners. */
  rate: number;
}

/**
 * Emits at `rate` a second through one node, to each person in turn on a keep-alive connection of their own: one at
 * a time per person, so each person's emits are appended in the order sent. Each answer is kept by its status.
 */
export class Flow {
  readonly tag: string;
  /** Per person, the seqs taken (200, or 202: taken part of the way), and those refused (or cut off), in the order sent. */
  readonly answered = new Map<string, number[]>();
  readonly refused = new Map<string, number[]>();
  readonly #options: FlowOptions;
  #stopped = false;
  #seq = 0;
  readonly #loops: Promise<void>[];

  constructor(tag: string, through: FleetNode, options: FlowOptions) {
    this.tag = tag;
    this.#options = options;
    const { listeners, rate } = options;
    const started = performance.now();
    const everyMs = (1000 * listeners.length) / rate;
    this.#loops = listeners.map((listener, i) => this.#loop(listener.recipientId, through.port, started + (i * everyMs) / listeners.length, everyMs));
  }

  async #loop(recipientId: string, port: number, firstAt: number, everyMs: number): Promise<void> {
    const answered: number[] = [];
    const refused: number[] = [];
    this.answered.set(recipientId, answered);
    this.refused.set(recipientId, refused);
    const connect = (): RawHttp => {
      const connection = new RawHttp(port);
      connection.socket.on('error', () => {}); // seen as a rejected next()
      return connection;
    };
    let http = connect();
    for (let k = 0; !this.#stopped; k++) {
      const wait = firstAt + k * everyMs - performance.now();
      if (wait > 0) await sleep(wait);
      const seq = ++this.#seq;
      const body = JSON.stringify({ name: 'order-updates', eventData: { recipientId, tag: this.tag, seq } });
      try {
        http.write(emitRequest(this.#options.api, body));
        // An answer that never comes (a node that stopped) must not hold the flow: the connection is dropped instead.
        const timer = setTimeout(() => http.socket.destroy(), 5000);
        const { status } = await http.next().finally(() => clearTimeout(timer));
        (status === 200 || status === 202 ? answered : refused).push(seq);
      } catch {
        refused.push(seq);
        http = connect();
      }
    }
    http.socket.destroy();
  }

  /** Stop, and once the last answers are in, wait until each person has the last of theirs taken. */
  async stop(): Promise<void> {
    await this.halt();
    await Promise.all(this.#options.listeners.map((listener) => {
      const last = this.answered.get(listener.recipientId)?.at(-1);
      return last === undefined ? undefined : listener.until(this.tag, last);
    }));
  }

  /** Stop emitting (also when a test fails half-way: no emit may outlive its test). */
  async halt(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  /** Every person got exactly what was taken (200 or 202), once each, in the order sent. */
  everyOneOnce(): void {
    for (const listener of this.#options.listeners) assert.deepEqual(listener.seqs(this.tag), this.answered.get(listener.recipientId), `person ${listener.recipientId}`);
  }
}
