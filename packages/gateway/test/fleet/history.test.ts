/**
 * Missed notifications recovered across a fleet of three node processes on one redis-server behind HAProxy, with
 * the client SDK: while emits flow at 1,000 a second to nine people (one keep-alive connection each, in turn), a node
 * is restarted with its successor first (server.reusePort), drained (SIGTERM), killed (kill -9); each person gets
 * every notification taken (200, or 202), exactly once and in order, the missed ones replayed when it comes back. Then
 * Redis restarts empty: the clients that were away resume with `recovered: false`, those that stayed are told
 * their history was lost, and none gets anything twice or out of order.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { apiToken } from '../support/gateway.ts';
import { nodeMetric, PEOPLE, startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';
import { connectListeners, Flow, type Listener } from '../support/owed.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/** Emits a second, over all nine people. */
const RATE = 1000;

let redis: RedisServer;
let fleet: Fleet;
let api: string;
let listeners: Listener[];
/** While set, every reconnect attempt waits for it: what happens meanwhile happens while the clients are away. */
let gate: PromiseWithResolvers<void> | undefined;

const flowThrough = (tag: string, through: FleetNode): Flow => new Flow(tag, through, { listeners, api, rate: RATE });

before(async () => {
  redis = await startRedis();
  fleet = await startFleet(3, redis.url, (raw) => {
    raw.server.reusePort = true;
    raw.events['order-updates'].history = { size: 5000, ttlSeconds: 600, maxReplay: 5000 };
  });
  api = await apiToken(fleet);
  listeners = await connectListeners(fleet, api, PEOPLE.length, { gate: () => gate?.promise });
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
  const flow = flowThrough(tag, through);
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
  const flow = flowThrough('redis', through);
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
