/**
 * Missed notifications recovered across a fleet of three node processes on one redis-server behind HAProxy, with
 * the client SDK: while emits flow at 1,000 a second to nine people (one keep-alive connection each, in turn), a node
 * is restarted with its successor first (server.reusePort), drained (SIGTERM), killed (kill -9); each person gets
 * every notification answered 200, exactly once and in order, the missed ones replayed when it comes back. Then
 * Redis restarts empty: the clients that were away resume with `recovered: false`, those that stayed are told
 * their history was lost, and none gets anything twice or out of order.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { HeraldClient, type Notification } from '../../../client/src/index.ts';
import { apiToken, personToken } from '../support/gateway.ts';
import { emitRequest, RawHttp } from '../support/raw-http.ts';
import { nodeMetric, PEOPLE, startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/** Emits a second, over all nine people. */
const RATE = 1000;

let redis: RedisServer;
let fleet: Fleet;
let api: string;
let listeners: Listener[];
/** While set, every reconnect attempt waits for it: what happens meanwhile happens while the clients are away. */
let gate: PromiseWithResolvers<void> | undefined;

interface Received {
  tag: string;
  seq: number;
  offset: number;
  epoch: string;
}

/** A person's client, registered for their order-updates, recording what arrives and how it came back. */
class Listener {
  readonly recipientId: string;
  readonly got: Received[] = [];
  readonly recovered: boolean[] = [];
  historyLost = 0;
  client!: HeraldClient;
  #wake: (() => void) | undefined;

  constructor(index: number) {
    this.recipientId = String(index + 1);
  }

  async connect(tokens: { apiToken: string; personToken: string }): Promise<void> {
    const getTokens = async () => {
      await gate?.promise;
      return tokens;
    };
    this.client = await HeraldClient.connect({ url: fleet.ws, getTokens, minDelayMs: 100, maxDelayMs: 600 });
    this.client.onNotification((n: Notification) => {
      const { tag, seq } = n.eventData as { tag: string; seq: number };
      this.got.push({ tag, seq, offset: n.offset!, epoch: n.epoch! });
      this.#wake?.();
    });
    this.client.on('reconnected', ({ recovered }) => void this.recovered.push(...Object.values(recovered)));
    this.client.on('historyLost', () => void this.historyLost++);
    const criteria = { recipientId: this.recipientId };
    const { validOnEvents } = await this.client.register([{ apiName: 'order-updates', condition: { conditionType: 'RESPONSE', criteria } }]);
    assert.equal(typeof validOnEvents[0]?.offset, 'number');
  }

  seqs(tag: string): number[] {
    return this.got.filter((received) => received.tag === tag).map((received) => received.seq);
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
 * Emits at RATE a second through one node, to each person in turn on a keep-alive connection of their own: one at
 * a time per person, so each person's emits are appended in the order sent. Each answer is kept by its status.
 */
class Flow {
  readonly tag: string;
  /** Per person, the seqs answered 200, and those answered otherwise (or cut off), in the order sent. */
  readonly answered = new Map<string, number[]>();
  readonly refused = new Map<string, number[]>();
  #stopped = false;
  #seq = 0;
  readonly #loops: Promise<void>[];

  constructor(tag: string, through: FleetNode) {
    this.tag = tag;
    const started = performance.now();
    const everyMs = (1000 * listeners.length) / RATE;
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
        http.write(emitRequest(api, body));
        // An answer that never comes (a node that stopped) must not hold the flow: the connection is dropped instead.
        const timer = setTimeout(() => http.socket.destroy(), 5000);
        const { status } = await http.next().finally(() => clearTimeout(timer));
        (status === 200 ? answered : refused).push(seq);
      } catch {
        refused.push(seq);
        http = connect();
      }
    }
    http.socket.destroy();
  }

  /** Stop, and once the last answers are in, wait until each person has the last of theirs answered 200. */
  async stop(): Promise<void> {
    await this.halt();
    await Promise.all(listeners.map((listener) => {
      const last = this.answered.get(listener.recipientId)?.at(-1);
      return last === undefined ? undefined : listener.until(this.tag, last);
    }));
  }

  /** Stop emitting (also when a test fails half-way: no emit may outlive its test). */
  async halt(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  /** Every person got exactly what was answered 200, once each, in the order sent. */
  everyOneOnce(): void {
    for (const listener of listeners) assert.deepEqual(listener.seqs(this.tag), this.answered.get(listener.recipientId), `person ${listener.recipientId}`);
  }
}

before(async () => {
  redis = await startRedis();
  fleet = await startFleet(3, redis.url, (raw) => {
    raw.server.reusePort = true;
    raw.events['order-updates'].history = { size: 5000, ttlSeconds: 600, maxReplay: 5000 };
  });
  api = await apiToken(fleet);
  listeners = PEOPLE.map((_, i) => new Listener(i));
  await Promise.all(listeners.map(async (listener, i) => {
    const [u, p] = PEOPLE[i]!;
    await listener.connect({ apiToken: api, personToken: await personToken(fleet, u, p) });
  }));
});
after(async () => {
  gate?.resolve();
  await Promise.all(listeners.map((listener) => listener.client?.close()));
  await fleet.stop();
  await redis.stop();
});

const live = (): FleetNode[] => fleet.nodes.filter((node) => node.child.exitCode === null && node.child.signalCode === null);

/** The live node holding the most clients, and where it is in the fleet. */
async function busiest(): Promise<[FleetNode, number]> {
  const counts = await Promise.all(fleet.nodes.map((node) => nodeMetric(node, 'herald_connections').catch(() => -1)));
  const at = counts.indexOf(Math.max(...counts));
  assert.ok(counts[at]! > 0, 'the load balancer gave the nodes clients');
  return [fleet.nodes[at]!, at];
}

/** Notifications replayed by the nodes but `left` (its count goes with it): proof that clients came back from a gap. */
const replayed = async (left: FleetNode): Promise<number> =>
  (await Promise.all(fleet.nodes.filter((node) => node !== left).map((node) => nodeMetric(node, 'herald_history_replayed_total')))).reduce((a, b) => a + b, 0);

/** Until every client is open again, after at least `drops` reconnects, then half a second more of the flow. */
async function everyoneBack(drops: number, reconnectsBefore: number): Promise<void> {
  const reconnects = () => listeners.reduce((sum, listener) => sum + listener.recovered.length, 0);
  await until(async () => reconnects() >= reconnectsBefore + drops && listeners.every((listener) => listener.client.state === 'open'), 'every client to be back', 15_000);
  await sleep(500);
}

/**
 * Run `happen` to node `at` while the flow goes through another; every person then got every notification once, in
 * order. `happen` answers how many clients it dropped.
 */
async function throughout(tag: string, at: number, happen: () => Promise<number>): Promise<void> {
  const [left, through] = [fleet.nodes[at]!, fleet.nodes[(at + 1) % fleet.nodes.length]!];
  const before = [await replayed(left), listeners.reduce((sum, listener) => sum + listener.recovered.length, 0)] as const;
  const flow = new Flow(tag, through);
  try {
    await sleep(300);
    const dropped = await happen();
    await everyoneBack(dropped, before[1]);
    await flow.stop();
  } finally {
    await flow.halt();
  }
  flow.everyOneOnce();
  const resumed = listeners.flatMap((listener) => listener.recovered.slice(-1));
  assert.ok(resumed.every((recovered) => recovered), 'every resume was recovered');
  assert.ok((await replayed(left)) > before[0], 'some notifications were missed and replayed');
}

test('a restart with the new process first (server.reusePort): nothing missed while its clients move', async () => {
  const [old, at] = await busiest();
  const held = await nodeMetric(old, 'herald_connections');
  await throughout('reuse-port', at, async () => {
    await fleet.restart(at, { successorFirst: true });
    old.child.kill('SIGTERM');
    return held;
  });
  // It exits once its server has closed: the load balancer's idle keep-alive connections end within their timeout.
  assert.equal(await old.exited, 0);
});

test('SIGTERM drain: its clients come back elsewhere and get what was emitted meanwhile', async () => {
  const [draining, at] = await busiest();
  const held = await nodeMetric(draining, 'herald_connections');
  await throughout('drain', at, async () => {
    draining.child.kill('SIGTERM');
    assert.equal(await draining.exited, 0);
    return held;
  });
  await fleet.restart(at);
});

test('kill -9 of one of three nodes at 1,000 emits a second: every notification of its clients delivered once, in order', async () => {
  const [victim, at] = await busiest();
  const held = await nodeMetric(victim, 'herald_connections');
  await throughout('kill', at, async () => {
    victim.child.kill('SIGKILL');
    await victim.exited;
    return held;
  });
  await fleet.restart(at);
});

test('Redis restarts empty while some clients are away: they resume with recovered false; nothing twice, nothing out of order', async () => {
  const [victim, at] = await busiest();
  const away = await nodeMetric(victim, 'herald_connections');
  const through = fleet.nodes[(at + 1) % 3]!;
  const flow = new Flow('redis', through);
  let resyncedAt: Map<string, number>;
  try {
    await sleep(300);
    gate = Promise.withResolvers();
    victim.child.kill('SIGKILL');
    await victim.exited;
    const resyncs = () => Promise.all(live().map((node) => nodeMetric(node, 'herald_broker_resyncs_total')));
    const seen = await resyncs();
    await redis.stop('SIGKILL');
    await redis.restart();
    await until(async () => (await resyncs()).every((count, i) => count > seen[i]!), 'every live node to write its state back', 15_000);
    // From here every emit answered 200 reaches its person: the registry and the sticky shapes are back.
    resyncedAt = new Map([...flow.answered].map(([recipientId, seqs]) => [recipientId, seqs.length]));
    await sleep(500);
    const reconnects = listeners.reduce((sum, listener) => sum + listener.recovered.length, 0);
    gate.resolve();
    gate = undefined;
    await everyoneBack(away, reconnects);
    await flow.stop();
  } finally {
    await flow.halt();
  }
  const resumed = listeners.filter((listener) => listener.recovered.length > 0 && listener.got.at(-1)?.tag === 'redis');
  for (const listener of listeners) {
    const got = listener.seqs('redis');
    const sent = [...flow.answered.get(listener.recipientId)!, ...flow.refused.get(listener.recipientId)!].sort((a, b) => a - b);
    assert.deepEqual(got, [...new Set(got)].sort((a, b) => a - b), `person ${listener.recipientId}: once each, in order`);
    assert.ok(got.every((seq) => sent.includes(seq)), `person ${listener.recipientId}: only what was emitted`);
    const afterResync = flow.answered.get(listener.recipientId)!.slice(resyncedAt.get(listener.recipientId));
    const whileAway = listener.recovered.at(-1) === false;
    // A client away across the restart missed what came before its return, and was told so; one that stayed got it all.
    if (!whileAway) assert.deepEqual(got.filter((seq) => seq >= (afterResync[0] ?? Infinity)), afterResync, `person ${listener.recipientId}`);
  }
  const told = listeners.filter((listener) => listener.recovered.at(-1) === false);
  assert.equal(told.length, away, 'each client away across the restart resumed with recovered: false');
  assert.ok(listeners.filter((listener) => !told.includes(listener)).every((listener) => listener.historyLost === 1), 'those that stayed were told once that their history was lost');
  assert.ok(resumed.length > 0);
});
