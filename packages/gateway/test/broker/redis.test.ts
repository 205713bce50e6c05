/** What only the Redis broker does: hash-tag spread, sweeping dead nodes, and surviving Redis losing its data. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { BrokerObserver, DeliveryHandler } from '../../src/broker/broker.ts';
import { RedisBroker, type RedisBrokerOptions } from '../../src/broker/redis/broker.ts';
import { keyspace } from '../../src/broker/redis/keys.ts';
import { GatewayError } from '../../src/errors.ts';
import { routeOf } from '../../src/events/routing.ts';
import { TestSocket, apiToken, onEvent, startNode } from '../support/gateway.ts';
import { startRedis, startRedisCluster, type RedisServer } from '../support/redis.ts';

/** An observer whose events can be awaited. */
function watcher() {
  const waiting: Array<{ kind: string; resolve: () => void }> = [];
  const fire = (kind: string) => {
    for (const entry of waiting.filter((w) => w.kind === kind)) {
      waiting.splice(waiting.indexOf(entry), 1);
      entry.resolve();
    }
  };
  const observer: BrokerObserver = { resynced: () => fire('resynced'), swept: () => fire('swept'), writeFailed: () => fire('writeFailed') };
  const next = (kind: 'resynced' | 'swept' | 'writeFailed') => new Promise<void>((resolve) => waiting.push({ kind, resolve }));
  return { observer, next };
}

type Options = Partial<RedisBrokerOptions> & Pick<RedisBrokerOptions, 'target' | 'nodeId' | 'observer'>;
const broker = (options: Options) => new RedisBroker({ leaseMs: 1500, sweepIntervalMs: 100, keyPrefix: 'gw', ...options });

/** Resolves with the next delivery to a handler. */
function inbox(): { handler: DeliveryHandler; next: () => Promise<Record<string, unknown>> } {
  const queue: Array<Record<string, unknown>> = [];
  let wake: (() => void) | undefined;
  return {
    handler: (_event, eventData) => {
      queue.push(eventData);
      wake?.();
    },
    next: async () => {
      while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      return queue.shift() as Record<string, unknown>;
    },
  };
}

describe('on one redis-server', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());

  test('a dead node (lease expired) is swept by a survivor: its routes, shapes and lease entry', async () => {
    const keys = keyspace('gw');
    const route = routeOf('order-updates', { recipientId: 'dead-1' });
    await redis.cli('zadd', keys.nodes, String(Date.now() - 60_000), 'dead-node');
    await redis.cli('sadd', keys.nodeRoutes('dead-node'), route.key);
    await redis.cli('sadd', keys.route(route.key), 'dead-node');
    await redis.cli('sadd', keys.shapes('order-updates'), 'recipientId');
    await redis.cli('sadd', keys.shapeNodes('order-updates', 'recipientId'), 'dead-node');
    const { observer, next } = watcher();
    const survivor = broker({ target: { url: redis.url }, nodeId: 'survivor', observer });
    const swept = next('swept');
    await survivor.start(() => {});
    await swept;
    assert.equal(await redis.cli('exists', keys.route(route.key), keys.nodeRoutes('dead-node'), keys.shapes('order-updates')), '0');
    assert.equal(await redis.cli('zscore', keys.nodes, 'dead-node'), '');
    assert.equal(await survivor.publish('order-updates', { recipientId: 'dead-1' }), 0);
    await survivor.close();
  });

  test('after FLUSHALL every node writes its routes back, and emits reach it again', async () => {
    const a = watcher();
    const holder = broker({ target: { url: redis.url }, nodeId: 'holder', observer: a.observer });
    const emitter = broker({ target: { url: redis.url }, nodeId: 'emitter', observer: watcher().observer });
    const received = inbox();
    await holder.start(received.handler);
    await emitter.start(() => {});
    await holder.addRoute(routeOf('order-updates', { recipientId: '7' }));
    const resynced = a.next('resynced');
    await redis.cli('flushall');
    assert.equal(await emitter.publish('order-updates', { recipientId: '7' }), 0, 'flushed: nobody holds the route');
    await resynced;
    assert.equal(await emitter.publish('order-updates', { recipientId: '7', n: 1 }), 1);
    assert.deepEqual(await received.next(), { recipientId: '7', n: 1 });
    await Promise.all([holder.close(), emitter.close()]);
  });

  test('Redis down: not ready, emits fail with UNAVAILABLE; Redis back empty: ready, routes written back', async () => {
    const a = watcher();
    const holder = broker({ target: { url: redis.url }, nodeId: 'holder-2', observer: a.observer });
    const emitter = broker({ target: { url: redis.url }, nodeId: 'emitter-2', observer: watcher().observer });
    const received = inbox();
    await holder.start(received.handler);
    await emitter.start(() => {});
    await holder.addRoute(routeOf('order-updates', { recipientId: '8' }));
    await redis.stop('SIGKILL');
    await assert.rejects(emitter.publish('order-updates', { recipientId: '8' }), (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.statusCode, 503);
      return true;
    });
    // A route added while Redis is away is written when it is back; meanwhile the node is not ready.
    await holder.addRoute(routeOf('order-updates', { recipientId: '9' }));
    assert.equal(holder.ready(), false);
    const resynced = a.next('resynced');
    await redis.restart();
    await resynced;
    await emitter.whenReady();
    assert.equal(holder.ready(), true);
    for (const recipientId of ['8', '9']) {
      assert.equal(await emitter.publish('order-updates', { recipientId }), 1);
      assert.deepEqual(await received.next(), { recipientId });
    }
    await Promise.all([holder.close(), emitter.close()]);
  });

  test('a node writes a route when it first appears and when it last leaves, not once per client', async () => {
    const node = await startNode((raw) => {
      raw.redis = { url: redis.url };
    });
    const token = await apiToken(node);
    const writes = async () => {
      const stats = await redis.cli('info', 'commandstats');
      return ['sadd', 'srem'].map((command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0));
    };
    const before = await writes();
    const clients = await Promise.all(Array.from({ length: 50 }, () => TestSocket.connect(node, token)));
    await Promise.all(clients.map((client) => client.register(onEvent('announcements', { region: 'EU' }))));
    const [sadds] = await writes();
    // One route: its node set, the node's route set, the shape's node set and the event's shape set.
    assert.equal((sadds as number) - (before[0] as number), 4);
    await Promise.all(clients.map((client) => client.close()));
    await node.close();
    const [, srems] = await writes();
    const removed = (srems as number) - (before[1] as number);
    assert.ok(removed >= 3 && removed <= 4, `the last one to leave removes it, once: ${removed} SREMs`);
  });

  test('a node restarted under the same id clears the routes its previous life left', async () => {
    const first = broker({ target: { url: redis.url }, nodeId: 'reborn', observer: watcher().observer, leaseMs: 60_000 });
    await first.start(() => {});
    await first.addRoute(routeOf('order-updates', { recipientId: 'old' }));
    // As if killed: no close() yet, its lease still valid, when the same id starts again.
    const again = broker({ target: { url: redis.url }, nodeId: 'reborn', observer: watcher().observer, leaseMs: 60_000 });
    await again.start(() => {});
    const emitter = broker({ target: { url: redis.url }, nodeId: 'emitter-3', observer: watcher().observer });
    await emitter.start(() => {});
    assert.equal(await emitter.publish('order-updates', { recipientId: 'old' }), 0);
    await Promise.all([again.close(), emitter.close()]);
    await first.close();
  });

  test('a drained node leaves nothing behind', async () => {
    const prefix = `drain${randomBytes(3).toString('hex')}`;
    const node = broker({ target: { url: redis.url }, nodeId: 'drained', observer: watcher().observer, keyPrefix: prefix });
    await node.start(() => {});
    for (let i = 0; i < 20; i++) await node.addRoute(routeOf('order-updates', { recipientId: String(i) }));
    await node.addRoute(routeOf('announcements', undefined));
    assert.ok(Number(await redis.cli('eval', `return #redis.call('keys', '${prefix}:*')`, '0')) > 20);
    await node.close();
    assert.equal(await redis.cli('eval', `return #redis.call('keys', '${prefix}:*')`, '0'), '0');
  });
});

test('on a Redis Cluster, route keys spread over every master', async () => {
  const cluster = await startRedisCluster();
  const node = broker({ target: { cluster: cluster.nodes }, nodeId: 'spreader', observer: watcher().observer });
  await node.start(() => {});
  await Promise.all(Array.from({ length: 300 }, (_, i) => node.addRoute(routeOf('order-updates', { recipientId: String(i) }))));
  const perMaster = await Promise.all(cluster.servers.map(async (server) => Number(await server.cli('dbsize'))));
  // 300 route sets over 3 masters: each holds a fair share (well above zero, well below all).
  for (const keys of perMaster) assert.ok(keys > 60 && keys < 200, `keys per master: ${perMaster}`);
  await node.close();
  await cluster.stop();
});
