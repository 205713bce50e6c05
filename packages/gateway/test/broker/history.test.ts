/**
 * Route histories on a real redis-server, beyond the Broker contract: a lost position is a new epoch (FLUSHALL, or
 * the position's key alone), a script Redis forgot is sent again, the commands an emit costs with and without a
 * history, and sticky shapes leaving once nobody held them.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { DeliveryHandler, Histories } from '../../src/broker/broker.ts';
import { RedisBroker } from '../../src/broker/redis/broker.ts';
import { keyspace } from '../../src/broker/redis/keys.ts';
import { routeOf } from '../../src/events/routing.ts';
import { quietObserver as quiet } from '../support/brokers.ts';
import { until } from '../support/fleet.ts';
import { commandCalls, sentSince, startRedis, type RedisServer } from '../support/redis.ts';

const HISTORIES: Histories = new Map([['kept', { size: 10, ttlSeconds: 1, positionTtlSeconds: 60, maxReplay: 10 }]]);

let redis: RedisServer;
let prefixes = 0;
const open: RedisBroker[] = [];

before(async () => {
  redis = await startRedis();
});
after(async () => {
  await Promise.all(open.map((broker) => broker.close()));
  await redis.stop();
});

/**
 * A started node on a fleet of its own (a key prefix), with the lean reads up; `deliveries` gets what it is sent.
 * `leaseMs` sets its heartbeat (a third of it), and its sweep.
 */
async function node(deliveries: DeliveryHandler = () => {}, leaseMs = 1500): Promise<{ broker: RedisBroker; prefix: string }> {
  const prefix = `h${++prefixes}`;
  const broker = new RedisBroker({ target: { url: redis.url }, nodeId: 'a', observer: quiet, leaseMs, connectedLeaseMs: leaseMs, sweepIntervalMs: leaseMs, keyPrefix: prefix, routeBuckets: 16, histories: HISTORIES });
  open.push(broker);
  await broker.start(deliveries);
  await until(async () => (await redis.cli('client', 'list')).split('\n').length >= 3, 'the lean connection');
  return { broker, prefix };
}

async function sentBy(work: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = await commandCalls(redis);
  await work();
  return Object.fromEntries(await sentSince(redis, before));
}

test('a lost position is a new epoch: after FLUSHALL, and when the position\'s key alone is gone (its old stream goes too)', async () => {
  const { broker, prefix } = await node();
  const route = routeOf('kept', { recipientId: 1 });
  await broker.addRoute(route);
  const first = await broker.history(route);
  await broker.publish('kept', { recipientId: 1 });
  await redis.cli('flushall');
  // The shapes its last emit read are appended to at once (the sticky set comes back at the next heartbeat).
  await broker.publish('kept', { recipientId: 1 });
  const second = await broker.history(route);
  assert.notEqual(second.epoch, first.epoch);
  assert.equal(second.offset, 1);
  assert.equal((await broker.history(route, { since: { offset: 1, epoch: first.epoch }, upTo: 1, limit: 10 })).unrecovered, 'epoch_changed');
  // Its next emit read the sticky shapes the flush emptied: until a heartbeat writes them back, emits append nothing.
  await until(async () => (await redis.cli('zcard', keyspace(prefix).historyShapes('kept'))) === '1', 'the heartbeat to write the shape back');

  await broker.publish('kept', { recipientId: 1 });
  await redis.cli('del', keyspace(prefix).historyPosition(route.key));
  await broker.publish('kept', { recipientId: 1 });
  const third = await broker.history(route);
  assert.deepEqual([third.offset, third.epoch === second.epoch], [1, false]);
  assert.equal(await redis.cli('xlen', keyspace(prefix).history(route.key)), '1', 'the old stream went with its position');
});

test('a script Redis no longer holds (SCRIPT FLUSH, as after a restart) is sent again, and the emit still reaches the node', async () => {
  const got: number[] = [];
  const { broker } = await node((_event, _eventData, positions) => void got.push(...[...(positions?.values() ?? [])].map((p) => p.offset)));
  const route = routeOf('kept', { recipientId: 2 });
  await broker.addRoute(route);
  await broker.publish('kept', { recipientId: 2 });
  await redis.cli('script', 'flush');
  assert.equal(await broker.publish('kept', { recipientId: 2 }), 1);
  assert.deepEqual(got, [1, 2]);
});

test('an emit without history costs what it did; one with history one script per route (the commands it runs beside)', async () => {
  // Only this node on the server while the commands are counted (the others' heartbeats would count), and a lease of a
  // minute: no heartbeat or sweep of its own meanwhile.
  await Promise.all(open.splice(0).map((each) => each.close()));
  const { broker } = await node(() => {}, 60_000);
  await broker.addRoute(routeOf('plain', { recipientId: 3 }));
  await broker.addRoute(routeOf('kept', { recipientId: 3 }));
  await broker.publish('plain', { recipientId: 3 });
  await broker.publish('kept', { recipientId: 3 });
  assert.deepEqual(await sentBy(() => broker.publish('plain', { recipientId: 3 })), { smembers: 1, hget: 1 });
  // The script's own commands count too: HINCRBY, HGET of the epoch, XADD, two PEXPIREs; the other HGET is the registry's.
  assert.deepEqual(await sentBy(() => broker.publish('kept', { recipientId: 3 })), { zrange: 1, evalsha: 1, hincrby: 1, hget: 2, xadd: 1, pexpire: 2 });
});

test('a sticky shape nobody holds any more leaves once ttlSeconds and a lease have passed, at a heartbeat', async () => {
  const { broker, prefix } = await node();
  const route = routeOf('kept', { recipientId: 4, shop: 's' });
  await broker.addRoute(route);
  await broker.removeRoute(route);
  const sticky = keyspace(prefix).historyShapes('kept');
  assert.equal(await redis.cli('zscore', sticky, 'recipientId,shop') !== '', true, 'kept after its last route left');
  await broker.publish('kept', { recipientId: 4, shop: 's' });
  assert.equal((await broker.history(route)).offset, 1, 'appended while nobody holds it');
  await until(async () => (await redis.cli('zscore', sticky, 'recipientId,shop')) === '', 'the shape to leave', 10_000);
});
