/**
 * Three gateway processes on one Redis behind HAProxy: emits cross nodes, broadcasts publish once per node,
 * Redis losing its data loses no subscriber, and nodes that drain or die lose no client.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
// By path, not as a package: @herald/client's own tests depend on this package, and pnpm warns of a cycle.
import { HeraldClient, type Notification } from '../../../client/src/index.ts';
import { keyspace } from '../../src/broker/redis/keys.ts';
import { apiToken, emit, personToken, type HttpTarget } from '../support/gateway.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { nodeMetric, PEOPLE, startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';

let redis: RedisServer;
let fleet: Fleet;
let api: string;

/** An emit as the application's back end makes it, through a node or the load balancer. */
async function emitTo(at: HttpTarget, name: string, eventData: object): Promise<{ status: number; nodes?: number }> {
  const { status, body } = await emit(at, api, name, eventData);
  return { status, nodes: body.data?.nodes };
}

/** A person's client: connected (to a node, or through the load balancer), registered for their orders. */
class Person {
  readonly recipientId: string;
  readonly client: HeraldClient;
  readonly #inbox: Notification[] = [];
  #wake: (() => void) | undefined;

  private constructor(recipientId: string, client: HeraldClient) {
    this.recipientId = recipientId;
    this.client = client;
    client.onNotification((notification) => {
      this.#inbox.push(notification);
      this.#wake?.();
    });
  }

  static async connect(url: string, index: number): Promise<Person> {
    const [u, p] = PEOPLE[index] as readonly [string, string];
    const client = await HeraldClient.connect({ url, apiToken: api, personToken: await personToken(fleet, u, p), minDelayMs: 100, maxDelayMs: 600 });
    const person = new Person(String(index + 1), client);
    const reply = await client.register([{ apiName: 'order-updates', condition: { conditionType: 'RESPONSE', criteria: { recipientId: person.recipientId } } }]);
    assert.equal(reply.validOnEvents.length, 1);
    return person;
  }

  async next(timeoutMs = 5000): Promise<Notification> {
    if (this.#inbox.length === 0) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`person ${this.recipientId}: nothing within ${timeoutMs} ms`)), timeoutMs);
        this.#wake = () => {
          clearTimeout(timer);
          this.#wake = undefined;
          resolve();
        };
      });
    }
    return this.#inbox.shift() as Notification;
  }
}

/** Every client a test opened, closed after the file whatever happened (a reconnecting client never ends). */
const opened: HeraldClient[] = [];

async function connectAll(url: (i: number) => string): Promise<Person[]> {
  const people = await Promise.all(PEOPLE.map((_, i) => Person.connect(url(i), i)));
  opened.push(...people.map((person) => person.client));
  return people;
}

/** The live node holding the most clients: the one whose loss tests the most. */
async function busiest(): Promise<FleetNode> {
  const live = fleet.nodes.filter((node) => node.child.exitCode === null && node.child.signalCode === null);
  const counts = await Promise.all(live.map((node) => nodeMetric(node, 'herald_connections')));
  const most = Math.max(...counts);
  assert.ok(most > 0, 'the load balancer gave the nodes clients');
  return live[counts.indexOf(most)] as FleetNode;
}

/** Emit to each person through `at` and check each got exactly their own notification. */
async function everyoneReached(people: Person[], at: { http: string }, tag: string): Promise<void> {
  for (const person of people) assert.equal((await emitTo(at, 'order-updates', { recipientId: person.recipientId, tag })).status, 200);
  for (const person of people) {
    const { eventData } = await person.next();
    assert.deepEqual(eventData, { recipientId: person.recipientId, tag });
  }
}

before(async () => {
  redis = await startRedis();
  fleet = await startFleet(3, redis.url);
  api = await apiToken(fleet);
});
after(async () => {
  await Promise.all(opened.map((client) => client.close()));
  await fleet.stop();
  await redis.stop();
});

const node = (i: number): FleetNode => fleet.nodes[i] as FleetNode;

test('a client on node A gets an emit made on node B', async () => {
  const nick = await Person.connect(node(0).ws, 1);
  assert.deepEqual(await emitTo(node(1), 'order-updates', { recipientId: '2', orderId: 1001 }), { status: 200, nodes: 1 });
  assert.deepEqual((await nick.next()).eventData, { recipientId: '2', orderId: 1001 });
  await nick.client.close();
});

test('a broadcast reaches clients on every node with one publish per node', async () => {
  const clients = await Promise.all(
    fleet.nodes.flatMap((node) => [0, 1].map(() => HeraldClient.connect({ url: node.ws, apiToken: api }))),
  );
  await Promise.all(clients.map((client) => client.register([{ apiName: 'announcements' }])));
  const received = clients.map((client) => new Promise<Notification>((resolve) => client.onNotification(resolve)));
  const before = await Promise.all([nodeMetric(node(0), 'herald_broker_publishes_total'), ...fleet.nodes.map((node) => nodeMetric(node, 'herald_deliveries_in_total'))]);
  assert.deepEqual(await emitTo(node(0), 'announcements', { title: 'maintenance' }), { status: 200, nodes: 3 });
  for (const notification of await Promise.all(received)) assert.deepEqual(notification.eventData, { title: 'maintenance' });
  assert.equal(await nodeMetric(node(0), 'herald_broker_publishes_total'), (before[0] as number) + 3);
  for (const [i, node] of fleet.nodes.entries()) {
    assert.equal(await nodeMetric(node, 'herald_deliveries_in_total'), (before[i + 1] as number) + 1, `${node.id} got it once`);
  }
  await Promise.all(clients.map((client) => client.close()));
});

test('Redis FLUSHALL, then a Redis restart: every node writes its routes back and every person is reached', async () => {
  const people = await connectAll((i) => node(i % 3).ws);
  const resyncs = () => Promise.all(fleet.nodes.map((each) => nodeMetric(each, 'herald_broker_resyncs_total')));
  let seen = await resyncs();
  await redis.cli('flushall');
  await until(async () => (await resyncs()).every((count, i) => count > (seen[i] as number)), 'every node to resync');
  await everyoneReached(people, node(1), 'after flushall');

  seen = await resyncs();
  const leanReads = () => Promise.all(fleet.nodes.map((each) => nodeMetric(each, 'herald_redis_lean_reads')));
  await until(async () => (await leanReads()).every((lean) => lean === 1), "every node's emit reads on their own connection");
  await redis.stop('SIGKILL');
  const refused = await emitTo(node(0), 'order-updates', { recipientId: '1' });
  assert.equal(refused.status, 503);
  await until(async () => (await fetch(`${node(0).http}/readyz`)).status === 503, 'node A to report not ready');
  await until(async () => (await leanReads()).every((lean) => lean === 0), "every node's emit reads to go through ioredis");
  // A node's own channel is subscribed again apart from its commands: until it is, an emit for its clients is 202, not
  // 200. A canary round trip through it after the restart shows it is (one before could not have come back).
  const canaries = () => Promise.all(fleet.nodes.map((each) => nodeMetric(each, 'herald_canary_round_trip_seconds_count{target="self"}')));
  const canariesBefore = await canaries();
  await redis.restart();
  await until(async () => (await resyncs()).every((count, i) => count > (seen[i] as number)), 'every node to resync');
  await until(async () => (await canaries()).every((count, i) => count > (canariesBefore[i] as number)), "every node's own channel to deliver again");
  await until(async () => (await fetch(`${node(0).http}/readyz`)).status === 200, 'node A to be ready again');
  await until(async () => (await leanReads()).every((lean) => lean === 1), "every node's emit reads back on their own connection");
  await everyoneReached(people, node(2), 'after restart');
  await Promise.all(people.map((person) => person.client.close()));
});

test('SIGTERM drains a node: its clients see 1001, come back through the load balancer, none is lost', async () => {
  const people = await connectAll(() => fleet.ws);
  const draining = await busiest();
  const held = await nodeMetric(draining, 'herald_connections');
  const codes: number[] = [];
  for (const person of people) person.client.on('disconnected', ({ code }) => void codes.push(code));
  draining.child.kill('SIGTERM');
  assert.equal(await draining.exited, 0, 'the drained node exits cleanly');
  await until(async () => people.every((person) => person.client.state === 'open'), 'every client to be back');
  assert.equal(codes.filter((code) => code === 1001).length, held, 'each of its clients was told 1001');
  await everyoneReached(people, fleet, 'after drain');
  await Promise.all(people.map((person) => person.client.close()));
});

test('kill -9 of a node: its routes are swept, its clients come back registered, the next emit reaches all', async () => {
  const people = await connectAll(() => fleet.ws);
  const victim = await busiest();
  const held = await nodeMetric(victim, 'herald_connections');
  let dropped = 0;
  for (const person of people) person.client.on('disconnected', () => void dropped++);
  const keys = keyspace('gw');
  assert.equal(await redis.cli('exists', keys.nodeBuckets(victim.id)), '1', 'the victim holds routes');
  const killedAt = Date.now();
  victim.child.kill('SIGKILL');
  await victim.exited;
  await until(async () => dropped >= held, "the victim's clients to notice", 7000);
  await until(async () => people.every((person) => person.client.state === 'open'), 'every client to be back', 7000);
  const backAfter = Date.now() - killedAt;
  await until(async () => (await redis.cli('exists', keys.nodeBuckets(victim.id))) === '0', 'the dead node to be swept', 15_000);
  assert.equal(await redis.cli('zscore', keys.nodes, victim.id), '');
  // Swept: an emit for any of its former clients goes to the one node that holds them now, not to its channel.
  for (const person of people) {
    assert.equal((await emitTo(fleet, 'order-updates', { recipientId: person.recipientId, tag: 'routed' })).nodes, 1);
  }
  for (const person of people) assert.deepEqual((await person.next()).eventData, { recipientId: person.recipientId, tag: 'routed' });
  await everyoneReached(people, fleet, 'after kill');
  assert.ok(backAfter < 7000, `clients back after ${backAfter} ms`);
  await Promise.all(people.map((person) => person.client.close()));
});
