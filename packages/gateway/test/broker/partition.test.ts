/**
 * A Redis broker cut off from Redis without its connections breaking (a TCP proxy that stops forwarding, as a network
 * partition does): it knows within redis.lostAfterMs, is not ready, fails its emits at once, and once the path heals
 * gets nothing late that was sent to it meanwhile, writes its routes back, and takes out of Redis the routes whose
 * removal failed while it was cut off.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { BrokerObserver } from '../../src/broker/broker.ts';
import { RedisBroker } from '../../src/broker/redis/broker.ts';
import { GatewayError } from '../../src/errors.ts';
import { routeOf } from '../../src/events/routing.ts';
import { quietObserver } from '../support/brokers.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

const LOST_AFTER_MS = 500;

let redis: RedisServer;
let proxy: TcpProxy;
before(async () => {
  redis = await startRedis();
  proxy = await startTcpProxy(redis.port);
});
after(async () => {
  await proxy.close();
  await redis.stop();
});

/** A broker whose losses and returns of Redis can be awaited. */
function reachability() {
  let lost = Promise.withResolvers<string>();
  let back = Promise.withResolvers<void>();
  const observer: BrokerObserver = {
    ...quietObserver,
    redisLost: (why) => lost.resolve(why),
    redisBack: () => back.resolve(),
  };
  return {
    observer,
    lost: () => lost.promise.finally(() => void (lost = Promise.withResolvers())),
    back: () => back.promise.finally(() => void (back = Promise.withResolvers())),
  };
}

const options = { leaseMs: 2000, connectedLeaseMs: 2000, sweepIntervalMs: 100, lostAfterMs: LOST_AFTER_MS, routeBuckets: 64 };

test('a node cut off from Redis knows within lostAfterMs, fails emits at once, gets nothing late after the heal, and cleans up', async (t) => {
  const keyPrefix = `partition-${process.pid}`;
  const cutOff = reachability();
  const received: Array<Record<string, unknown>> = [];
  const node = new RedisBroker({ ...options, keyPrefix, target: { url: `redis://127.0.0.1:${proxy.port}` }, nodeId: 'cut-off', observer: cutOff.observer });
  const emitter = new RedisBroker({ ...options, keyPrefix, target: { url: redis.url }, nodeId: 'emitter', observer: quietObserver });
  t.after(async () => {
    proxy.heal();
    await Promise.allSettled([node.close(), emitter.close()]);
  });
  await Promise.all([node.start((_event, eventData) => void received.push(eventData)), emitter.start(() => {})]);
  const kept = routeOf('announcements', { recipientId: '1' });
  const left = routeOf('announcements', { recipientId: '2' });
  await Promise.all([node.addRoute(kept), node.addRoute(left)]);
  assert.equal(await emitter.publish('announcements', { recipientId: '1', n: 0 }), 1);
  await until(() => received.length === 1);

  proxy.cut();
  const cutAt = performance.now();
  const why = await cutOff.lost();
  const knewAfterMs = performance.now() - cutAt;
  assert.match(why, /no answer from Redis/);
  // Asked every quarter of lostAfterMs, judged once this much has passed: about a quarter more, and slack for a loaded
  // machine (whose late ticks judge nothing).
  assert.ok(knewAfterMs >= LOST_AFTER_MS && knewAfterMs < LOST_AFTER_MS + 2500, `knew after ${Math.round(knewAfterMs)} ms`);
  assert.equal(node.ready(), false);

  const emitAt = performance.now();
  await assert.rejects(node.publish('announcements', { recipientId: '1' }), (error: unknown) => error instanceof GatewayError && error.code === 'UNAVAILABLE');
  assert.ok(performance.now() - emitAt < 1000, 'an emit on a node that knows Redis is lost is refused at once');
  // Sent while it is cut off: held in the path, and arrived only after the heal, on the connection the node dropped.
  assert.equal(await emitter.publish('announcements', { recipientId: '1', n: 1 }), 1);
  await node.removeRoute(left);

  proxy.heal();
  await cutOff.back();
  await node.whenReady();
  assert.equal(node.ready(), true);
  assert.equal(await emitter.publish('announcements', { recipientId: '1', n: 2 }), 1);
  await until(() => received.length === 2);
  assert.deepEqual(received.map(({ n }) => n), [0, 2], 'nothing sent while it was cut off arrives late');
  // Its removal failed while it was cut off; the resync took it out, so emits for it no longer reach the node.
  assert.equal(await emitter.publish('announcements', { recipientId: '2' }), 0);
});

test('a connection attempt that reaches no Redis is dropped after lostAfterMs and tried again', async (t) => {
  const cutOff = reachability();
  proxy.cut();
  const node = new RedisBroker({ ...options, keyPrefix: `attempt-${process.pid}`, target: { url: `redis://127.0.0.1:${proxy.port}` }, nodeId: 'late', observer: cutOff.observer });
  t.after(async () => {
    proxy.heal();
    await node.close();
  });
  const acceptedBefore = proxy.accepted;
  const started = node.start(() => {});
  // The proxy accepts each attempt and forwards nothing. The node's three connections (commands, channel, the emit's
  // reads) each wait lostAfterMs for their handshake, then try again: a second round of them.
  await until(() => proxy.accepted - acceptedBefore >= 6);
  assert.equal(node.ready(), false);
  proxy.heal();
  await started;
  assert.equal(node.ready(), true);
});

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    assert.ok(Date.now() < deadline, 'timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
