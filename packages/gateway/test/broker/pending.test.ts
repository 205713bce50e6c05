/**
 * An emit the fleet takes only part of the way, on a real redis-server: as when one shard of a Redis Cluster fails over,
 * the emitting node can reach the route's history and some nodes but not another node's channel (here an ACL refuses
 * it that channel). It is published where it could be and answered 202, never refused: a retry would deliver it twice
 * where it went. In a history, it is there for the node it missed; a repeat under its Idempotency-Key is answered 202
 * again and appends nothing.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Position } from '@herald/protocol';
import { DeliveryPending, type DeliveryHandler, type Histories } from '../../src/broker/broker.ts';
import { RedisBroker } from '../../src/broker/redis/broker.ts';
import { GatewayError } from '../../src/errors.ts';
import { routeOf } from '../../src/events/routing.ts';
import { quietObserver as quiet } from '../support/brokers.ts';
import { apiToken, startNode } from '../support/gateway.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const HISTORY = { size: 100, ttlSeconds: 600, positionTtlSeconds: 600, maxReplay: 100 };
const HISTORIES: Histories = new Map([['order-updates', HISTORY]]);

let redis: RedisServer;
/** The node the emitting one cannot send to; what it is sent. */
let far: RedisBroker;
const farGot: Array<{ event: string; positions: ReadonlyMap<string, Position> | undefined }> = [];
const open: Array<{ close(): Promise<void> }> = [];

const brokerAs = (nodeId: string, url: string): RedisBroker => {
  const broker = new RedisBroker({ target: { url }, nodeId, observer: quiet, leaseMs: 60_000, connectedLeaseMs: 60_000, sweepIntervalMs: 60_000, routeBuckets: 64, histories: HISTORIES });
  open.push(broker);
  return broker;
};

before(async () => {
  redis = await startRedis();
  // Every key, but of the nodes' channels only its own.
  await redis.cli('ACL', 'SETUSER', 'near', 'on', '>near-secret', '~*', 'resetchannels', '&gw:node:{near}', '&gw:node:{near-http}', '+@all');
  far = brokerAs('far', redis.url);
  await far.start((event, _eventData, positions) => void farGot.push({ event, positions }));
});
after(async () => {
  await Promise.all(open.map((each) => each.close()));
  await redis.stop();
});

const nearUrl = (): string => `redis://near:near-secret@127.0.0.1:${redis.port}`;

test('published where it could be: DeliveryPending with the nodes reached, or, reaching none and in no history, UNAVAILABLE', async () => {
  const near = brokerAs('near', nearUrl());
  const nearGot: string[] = [];
  await near.start(((event) => void nearGot.push(event)) satisfies DeliveryHandler);
  const both = routeOf('announcements', { region: 'both' });
  await Promise.all([far.addRoute(both), near.addRoute(both)]);
  await assert.rejects(near.publish('announcements', { region: 'both' }), (error) => error instanceof DeliveryPending && error.nodes === 1);
  assert.deepEqual(nearGot, ['announcements'], 'this node delivered it');

  await far.addRoute(routeOf('announcements', { region: 'far' }));
  await assert.rejects(near.publish('announcements', { region: 'far' }), (error) => error instanceof GatewayError && error.code === 'UNAVAILABLE');

  const kept = routeOf('order-updates', { recipientId: 'far' });
  await far.addRoute(kept);
  await assert.rejects(near.publish('order-updates', { recipientId: 'far' }), (error) => error instanceof DeliveryPending && error.nodes === 0);
  assert.equal((await far.history(kept)).offset, 1, 'in the history of the route it missed');
  // The far node's next emit of that route reaches it with the next offset: the gap is the history's to fill.
  assert.equal(await far.publish('order-updates', { recipientId: 'far' }), 1);
  assert.equal(farGot.at(-1)?.positions?.get(kept.key)?.offset, 2);
});

test('over HTTP: 202 with pending, its repeat 202 and replayed, appended once', async () => {
  const near = brokerAs('near-http', nearUrl());
  const node = await startNode((raw) => {
    raw.events['order-updates'].history = HISTORY;
  }, { broker: near });
  open.push(node);
  const kept = routeOf('order-updates', { recipientId: 'far-http' });
  await far.addRoute(kept);
  const headers = { 'x-am-authorization': await apiToken(node), 'idempotency-key': 'k-202' };
  const body = { name: 'order-updates', eventData: { recipientId: 'far-http' } };
  const emit = () => fetch(`${node.http}/api/system-api/bench/emit-event-ws`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const pending = { success: true, statusCode: 202, data: { name: 'order-updates', nodes: 0, pending: true } };
  const first = await emit();
  assert.equal(first.status, 202);
  assert.deepEqual(await first.json(), pending);
  // The first's answer is kept a moment after it is sent (409 until then: a back end retries after a second).
  let repeat = await emit();
  while (repeat.status === 409) repeat = await emit();
  assert.equal(repeat.status, 202);
  assert.deepEqual(await repeat.json(), pending);
  assert.equal(repeat.headers.get('idempotent-replayed'), 'true');
  assert.equal((await far.history(kept)).offset, 1);
});
