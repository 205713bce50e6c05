/**
 * What only the Redis broker does: hash-tag spread, sweeping dead nodes, surviving Redis losing its data, and
 * one route bucket count per fleet.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import type { BrokerObserver, DeliveryHandler } from '../../src/broker/broker.ts';
import { RedisBroker, type RedisBrokerOptions } from '../../src/broker/redis/broker.ts';
import { connect } from '../../src/broker/redis/connection.ts';
import { bucketOf, keyspace } from '../../src/broker/redis/keys.ts';
import { ConfigError, GatewayError } from '../../src/errors.ts';
import { routeOf } from '../../src/events/routing.ts';
import { until } from '../support/fleet.ts';
import { TestSocket, apiToken, onEvent, startNode } from '../support/gateway.ts';
import { commandCalls, sentSince, startRedis, startRedisCluster, type RedisServer } from '../support/redis.ts';

/** An observer whose events can be awaited. */
function watcher() {
  const waiting: Array<{ kind: string; resolve: () => void }> = [];
  const fire = (kind: string) => {
    for (const entry of waiting.filter((w) => w.kind === kind)) {
      waiting.splice(waiting.indexOf(entry), 1);
      entry.resolve();
    }
  };
  const observer: BrokerObserver = {
    resynced: () => fire('resynced'),
    swept: () => fire('swept'),
    sweepDeferred: () => fire('sweepDeferred'),
    spared: () => fire('spared'),
    writeFailed: () => fire('writeFailed'),
    leanReads() {},
    undeliverable: () => fire('undeliverable'),
    historyAppended() {},
    historyAppendFailed() {},
    redisLost() {},
    redisBack() {},
  };
  const next = (kind: 'resynced' | 'swept' | 'sweepDeferred' | 'spared' | 'writeFailed' | 'undeliverable') => new Promise<void>((resolve) => waiting.push({ kind, resolve }));
  return { observer, next };
}

type Options = Partial<RedisBrokerOptions> & Pick<RedisBrokerOptions, 'target' | 'nodeId' | 'observer'>;
/** Every broker made, closed again at the end: one left open by a failed test would keep the file from ending. */
const brokers: RedisBroker[] = [];
const closeBrokers = () => Promise.allSettled(brokers.splice(0).map((made) => made.close()));
/** Prefix `gw` and 4096 buckets, as a node with the default config has (one test below starts such a node). */
const broker = (options: Options) => {
  const made = new RedisBroker({ leaseMs: 1500, connectedLeaseMs: 1500, sweepIntervalMs: 100, keyPrefix: 'gw', routeBuckets: 4096, ...options });
  brokers.push(made);
  return made;
};

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
  after(async () => {
    await closeBrokers();
    await redis.stop();
  });

  /** A node holding one person's route (its events watched, its deliveries in an inbox) and a node to emit from, both started. */
  async function holderAndEmitter(holderId: string, emitterId: string, recipientId: string) {
    const a = watcher();
    const holder = broker({ target: { url: redis.url }, nodeId: holderId, observer: a.observer });
    const emitter = broker({ target: { url: redis.url }, nodeId: emitterId, observer: watcher().observer });
    const received = inbox();
    await holder.start(received.handler);
    await emitter.start(() => {});
    await holder.addRoute(routeOf('order-updates', { recipientId }));
    return { a, holder, emitter, received };
  }

  test('a dead node (lease expired) is swept by a survivor: only its id leaves the buckets it shared', async () => {
    // One bucket: the dead node's routes share it with a route of the survivor and with other nodes.
    const keys = keyspace('swept');
    const [shared, alone, middle] = ['shared', 'alone', 'middle'].map((recipientId) => routeOf('order-updates', { recipientId }));
    const { observer, next } = watcher();
    const survivor = broker({ target: { url: redis.url }, nodeId: 'survivor', observer, keyPrefix: 'swept', routeBuckets: 1 });
    await survivor.start(() => {});
    await survivor.addRoute(shared!);
    const bucket = keys.routeBucket(0);
    assert.equal(await redis.cli('hget', bucket, shared!.key), 'survivor');
    await redis.cli('hset', bucket, shared!.key, 'survivor,dead-node', alone!.key, 'dead-node', middle!.key, 'node-x,dead-node,node-y');
    await redis.cli('setbit', keys.nodeBuckets('dead-node'), '0', '1');
    await redis.cli('sadd', keys.shapeNodes('order-updates', 'recipientId'), 'dead-node');
    const swept = next('swept');
    await redis.cli('zadd', keys.nodes, String(Date.now() - 60_000), 'dead-node');
    await swept;
    assert.equal(await redis.cli('hget', bucket, shared!.key), 'survivor');
    assert.equal(await redis.cli('hexists', bucket, alone!.key), '0');
    assert.equal(await redis.cli('hget', bucket, middle!.key), 'node-x,node-y');
    assert.equal(await redis.cli('exists', keys.nodeBuckets('dead-node')), '0');
    assert.equal(await redis.cli('zscore', keys.nodes, 'dead-node'), '');
    assert.equal(await redis.cli('smembers', keys.shapeNodes('order-updates', 'recipientId')), 'survivor');
    assert.equal(await survivor.publish('order-updates', { recipientId: 'alone' }), 0);
    assert.equal(await survivor.publish('order-updates', { recipientId: 'shared' }), 1);
    await survivor.close();
  });

  test('a heartbeat that fails (its shard failing over) keeps the node ready while its lease holds, not after', async () => {
    await redis.cli('ACL', 'SETUSER', 'beater', 'on', '>beater-secret', '~*', '&*', '+@all');
    const { observer, next } = watcher();
    const node = broker({ target: { url: `redis://beater:beater-secret@127.0.0.1:${redis.port}` }, nodeId: 'beater', observer, keyPrefix: 'beats' });
    await node.start(() => {});
    assert.equal(node.ready(), true);
    // The heartbeat's ZADD refused, everything else answered.
    await redis.cli('ACL', 'SETUSER', 'beater', '-zadd');
    const failedAt = Date.now();
    await next('writeFailed');
    assert.equal(node.ready(), true, 'a failed heartbeat');
    await until(async () => !node.ready(), 'the lease to lapse');
    assert.ok(Date.now() - failedAt >= 1000, 'not ready only once the lease (1.5 s) lapsed');
    await redis.cli('ACL', 'SETUSER', 'beater', '+zadd');
    await until(async () => node.ready(), 'the next heartbeat');
  });

  test("a survivor whose own heartbeat ran late sweeps no one until it has beaten again: a starved machine's lapsed leases prove nothing", async () => {
    const keys = keyspace('starved');
    const { observer, next } = watcher();
    const survivor = broker({ target: { url: redis.url }, nodeId: 'survivor', observer, keyPrefix: 'starved', routeBuckets: 1 });
    await survivor.start(() => {});
    const order: string[] = [];
    const deferred = next('sweepDeferred').then(() => order.push('deferred'));
    const swept = next('swept').then(() => order.push('swept'));
    // The event loop held past two heartbeats (500 ms each with this lease), as on a machine with no CPU to spare;
    // meanwhile another node's lease lapses. Once the loop runs, the survivor's first sweep is its timer's, late.
    const heldUntil = Date.now() + 1300;
    execFileSync('redis-cli', ['-p', String(redis.port), 'zadd', keys.nodes, String(Date.now() - 60_000), 'slow-node']);
    while (Date.now() < heldUntil);
    await Promise.all([deferred, swept]);
    assert.deepEqual(order, ['deferred', 'swept'], 'swept only after a heartbeat of its own');
    await survivor.close();
  });

  test('a lapsed node whose connection Redis still holds is spared: swept once that connection closes, or past connectedLeaseMs', async (t) => {
    const keys = keyspace('stalled');
    const { observer, next } = watcher();
    const survivor = broker({ target: { url: redis.url }, nodeId: 'survivor', observer, keyPrefix: 'stalled', routeBuckets: 1, connectedLeaseMs: 60_000 });
    await survivor.start(() => {});
    const route = routeOf('order-updates', { recipientId: 'away' })!;
    /** A node as Redis sees it while its process is stalled: its connection open under its name, its heartbeat `late`. */
    const stalledNode = async (nodeId: string, late: number) => {
      const connection = new Redis(redis.url, { connectionName: keys.clientName(nodeId) });
      t.after(() => connection.disconnect());
      await connection.ping();
      await redis.cli('hset', keys.routeBucket(0), route.key, nodeId);
      await redis.cli('setbit', keys.nodeBuckets(nodeId), '0', '1');
      await redis.cli('zadd', keys.nodes, String(Date.now() - late), nodeId);
      return connection;
    };
    const stalled = await stalledNode('stalled node', 5000);
    assert.match(await redis.cli('client', 'list'), / name=stalled:node:stalled%20node /);
    const sweptAtOnce = next('swept').then(() => 'swept');
    assert.equal(await Promise.race([next('spared').then(() => 'spared'), sweptAtOnce]), 'spared');
    await next('spared');
    assert.equal(await redis.cli('hget', keys.routeBucket(0), route.key), 'stalled node', 'its route stays while it is connected');
    const swept = next('swept');
    await stalled.quit();
    await swept;
    assert.equal(await redis.cli('hexists', keys.routeBucket(0), route.key), '0');
    // A stuck process, or a connection whose end Redis has not seen (a host gone): swept past connectedLeaseMs anyway.
    const stuck = await stalledNode('stuck', 61_000);
    await next('swept');
    assert.equal(await redis.cli('hexists', keys.routeBucket(0), route.key), '0');
    await stuck.quit();
    await survivor.close();
  });

  test('a node whose routeBuckets differs from the fleet\'s refuses to start, naming the setting', async () => {
    const node = (nodeId: string, routeBuckets: number) =>
      broker({ target: { url: redis.url }, nodeId, observer: watcher().observer, keyPrefix: 'mismatch', routeBuckets });
    const first = node('first', 64);
    await first.start(() => {});
    const other = node('other', 128);
    await assert.rejects(other.start(() => {}), (error: unknown) => {
      assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
      assert.match(error.message, /redis\.routeBuckets: this node has 128, but the fleet on this Redis uses 64/);
      return true;
    });
    const same = node('same', 64);
    await same.start(() => {});
    await Promise.all([first.close(), other.close(), same.close()]);
  });

  test('a route held by two nodes keeps the other when one leaves, in the same bucket field', async () => {
    const keys = keyspace('gw');
    const route = routeOf('order-updates', { recipientId: 'both' });
    const [one, two] = ['one', 'two'].map((nodeId) => broker({ target: { url: redis.url }, nodeId, observer: watcher().observer }));
    await Promise.all([one!.start(() => {}), two!.start(() => {})]);
    await one!.addRoute(route);
    await two!.addRoute(route);
    const bucket = keys.routeBucket(bucketOf(route.key, 4096));
    assert.equal(await redis.cli('hget', bucket, route.key), 'one,two');
    await one!.removeRoute(route);
    assert.equal(await redis.cli('hget', bucket, route.key), 'two');
    await two!.close();
    assert.equal(await redis.cli('hexists', bucket, route.key), '0');
    await one!.close();
  });

  test('after FLUSHALL every node writes its routes back, and emits reach it again', async () => {
    const { a, holder, emitter, received } = await holderAndEmitter('holder', 'emitter', '7');
    const resynced = a.next('resynced');
    await redis.cli('flushall');
    assert.equal(await emitter.publish('order-updates', { recipientId: '7' }), 0, 'flushed: nobody holds the route');
    await resynced;
    assert.equal(await emitter.publish('order-updates', { recipientId: '7', n: 1 }), 1);
    assert.deepEqual(await received.next(), { recipientId: '7', n: 1 });
    await Promise.all([holder.close(), emitter.close()]);
  });

  test("a message on a node's channel that is not an emit is dropped and reported; the next emit is delivered", async () => {
    const { a, holder, emitter, received } = await holderAndEmitter('receiver', 'emitter-0', '6');
    const channel = keyspace('gw').channel('receiver');
    for (const garbage of ['no event line', 'order-updates\n{not json', 'order-updates\n[1,2]', `order-updates\n${'['.repeat(100_000)}`]) {
      const reported = a.next('undeliverable');
      await redis.cli('spublish', channel, garbage);
      await reported;
    }
    assert.equal(await emitter.publish('order-updates', { recipientId: '6', n: 1 }), 1);
    assert.deepEqual(await received.next(), { recipientId: '6', n: 1 });
    await Promise.all([holder.close(), emitter.close()]);
  });

  test('Redis down: not ready, emits fail with UNAVAILABLE; Redis back empty: ready, routes written back', async () => {
    const { a, holder, emitter, received } = await holderAndEmitter('holder-2', 'emitter-2', '8');
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
    let before = await commandCalls(redis);
    const clients = await Promise.all(Array.from({ length: 50 }, () => TestSocket.connect(node, token)));
    await Promise.all(clients.map((client) => client.register(onEvent('announcements', { region: 'EU' }))));
    const added = await sentSince(redis, before);
    // One route: one script on its bucket, the node's bit for that bucket, the shape's node set and the event's shape set.
    assert.equal(added.get('evalsha'), 1);
    assert.equal(added.get('setbit'), 1);
    assert.equal(added.get('sadd'), 2);
    before = await commandCalls(redis);
    await Promise.all(clients.map((client) => client.close()));
    await node.close();
    // The last one to leave removes it, once (a remove script, or the node's strip of the bucket as it drains).
    assert.equal((await sentSince(redis, before)).get('evalsha'), 1);
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

  test('a route that comes and goes beside the node\'s others costs its two scripts, no SETBIT; the bit stays', async () => {
    const prefix = `churn${randomBytes(3).toString('hex')}`;
    const keys = keyspace(prefix);
    const node = broker({ target: { url: redis.url }, nodeId: 'churner', observer: watcher().observer, keyPrefix: prefix, routeBuckets: 64 });
    await node.start(() => {});
    const kept = routeOf('order-updates', { recipientId: 'kept' });
    await node.addRoute(kept);
    let n = 0;
    let churned = routeOf('order-updates', { recipientId: `c${n}` });
    while (bucketOf(churned.key, 64) === bucketOf(kept.key, 64)) churned = routeOf('order-updates', { recipientId: `c${++n}` });
    await node.addRoute(churned);
    await node.removeRoute(churned);
    const before = await commandCalls(redis);
    for (let i = 0; i < 5; i++) {
      await node.addRoute(churned);
      await node.removeRoute(churned);
    }
    const sent = await sentSince(redis, before);
    assert.equal(sent.get('evalsha'), 10);
    assert.equal(sent.get('setbit'), undefined);
    // Still marked, so that a sweep strips that bucket too if the route was there when the node died.
    assert.equal(await redis.cli('getbit', keys.nodeBuckets('churner'), String(bucketOf(churned.key, 64))), '1');
    await node.removeRoute(kept);
    assert.equal(await redis.cli('exists', keys.nodeBuckets('churner')), '0', 'with its last route the bitmap goes');
    await node.close();
  });

  test('a route that comes back before its removal is written costs no command and stays routable', async () => {
    const prefix = `back${randomBytes(3).toString('hex')}`;
    const node = broker({ target: { url: redis.url }, nodeId: 'returning', observer: watcher().observer, keyPrefix: prefix });
    const got = inbox();
    await node.start(got.handler);
    const route = routeOf('order-updates', { recipientId: 'back' });
    await node.addRoute(route);
    const before = await commandCalls(redis);
    const removed = node.removeRoute(route);
    await node.addRoute(route);
    await removed;
    assert.equal((await sentSince(redis, before)).get('evalsha'), undefined);
    assert.equal(await node.publish('order-updates', { recipientId: 'back' }), 1);
    assert.deepEqual(await got.next(), { recipientId: 'back' });
    await node.close();
  });

  test('removals close together leave in one batch, and each is written once its promise settles', async () => {
    const prefix = `batch${randomBytes(3).toString('hex')}`;
    const node = broker({ target: { url: redis.url }, nodeId: 'batcher', observer: watcher().observer, keyPrefix: prefix });
    await node.start(() => {});
    const routes = Array.from({ length: 30 }, (_, i) => routeOf('order-updates', { recipientId: `b${i}` }));
    await Promise.all(routes.map((route) => node.addRoute(route)));
    const before = await commandCalls(redis);
    const removals = routes.map((route) => node.removeRoute(route));
    assert.equal(new Set(removals).size, 1, 'one promise for the batch');
    await removals[0];
    assert.equal((await sentSince(redis, before)).get('evalsha'), 30);
    assert.equal(await node.publish('order-updates', { recipientId: 'b7' }), 0);
    await node.close();
  });

  test('adds close together leave in one batch after the first, and each is routable once its promise settles', async () => {
    const prefix = `adds${randomBytes(3).toString('hex')}`;
    // Leases no loaded machine lets lapse in this test: a sweep of the adder would be another test's subject.
    const leases = { leaseMs: 60_000, connectedLeaseMs: 60_000 };
    const node = broker({ ...leases, target: { url: redis.url }, nodeId: 'adder', observer: watcher().observer, keyPrefix: prefix });
    await node.start(() => {});
    const emitter = broker({ ...leases, target: { url: redis.url }, nodeId: 'adds-emitter', observer: watcher().observer, keyPrefix: prefix });
    await emitter.start(() => {});
    const routes = Array.from({ length: 30 }, (_, i) => routeOf('order-updates', { recipientId: `a${i}` }));
    const loopStart = performance.now();
    const adds = routes.map((route) => node.addRoute(route));
    const loopMs = performance.now() - loopStart;
    // One batch a millisecond: the loop's adds after the first share one, or (a collection paused the loop) one per
    // millisecond it took; never one each.
    assert.ok(new Set(adds.slice(1)).size <= 1 + Math.ceil(loopMs), `${new Set(adds.slice(1)).size} batches in ${loopMs.toFixed(1)} ms`);
    assert.notEqual(adds[0], adds[1], 'the first leaves at once');
    await Promise.all(adds);
    const reached = await Promise.all(routes.map((_, i) => emitter.publish('order-updates', { recipientId: `a${i}` })));
    assert.deepEqual(reached, routes.map(() => 1));
    await Promise.all([node.close(), emitter.close()]);
  });

  test('the emits of one turn read their event\'s shapes once between them, and each its own route', async () => {
    const prefix = `turn${randomBytes(3).toString('hex')}`;
    const node = broker({ target: { url: redis.url }, nodeId: 'one-turn', observer: watcher().observer, keyPrefix: prefix });
    await node.start(() => {});
    const ids = Array.from({ length: 20 }, (_, i) => `t${i}`);
    await Promise.all(ids.map((id) => node.addRoute(routeOf('order-updates', { recipientId: id }))));
    const before = await commandCalls(redis);
    const reached = await Promise.all(ids.map((id) => node.publish('order-updates', { recipientId: id })));
    assert.deepEqual(reached, ids.map(() => 1));
    const sent = await sentSince(redis, before);
    assert.equal(sent.get('smembers'), 1);
    assert.equal(sent.get('hget'), 20);
    await node.close();
  });

  test('a node whose routes all left keeps no bucket key and no bitmap', async () => {
    const prefix = `left${randomBytes(3).toString('hex')}`;
    const node = broker({ target: { url: redis.url }, nodeId: 'emptied', observer: watcher().observer, keyPrefix: prefix });
    await node.start(() => {});
    const routes = Array.from({ length: 20 }, (_, i) => routeOf('order-updates', { recipientId: String(i) }));
    for (const route of routes) await node.addRoute(route);
    for (const route of routes) await node.removeRoute(route);
    const keys = keyspace(prefix);
    assert.deepEqual((await redis.cli('keys', `${prefix}:*`)).split('\n').sort(), [keys.routeBuckets, keys.nodes].sort());
    await node.close();
  });

  test('a drained node leaves nothing behind but the fleet\'s bucket count', async () => {
    const prefix = `drain${randomBytes(3).toString('hex')}`;
    const node = broker({ target: { url: redis.url }, nodeId: 'drained', observer: watcher().observer, keyPrefix: prefix });
    await node.start(() => {});
    for (let i = 0; i < 20; i++) await node.addRoute(routeOf('order-updates', { recipientId: String(i) }));
    await node.addRoute(routeOf('announcements', undefined));
    const keysOf = async () => (await redis.cli('keys', `${prefix}:*`)).split('\n').filter((key) => key !== '');
    assert.ok((await keysOf()).length > 20);
    await node.close();
    // But the fleet's bucket count, which outlives its nodes.
    assert.deepEqual(await keysOf(), [keyspace(prefix).routeBuckets]);
  });
});

test('on a Redis Cluster, route keys spread over every master, and every master knows the node by name', async (t) => {
  const cluster = await startRedisCluster();
  t.after(async () => {
    await closeBrokers();
    await cluster.stop();
  });
  const node = broker({ target: { cluster: cluster.nodes }, nodeId: 'spreader', observer: watcher().observer });
  await node.start(() => {});
  await Promise.all(Array.from({ length: 300 }, (_, i) => node.addRoute(routeOf('order-updates', { recipientId: String(i) }))));
  const perMaster = await Promise.all(cluster.servers.map(async (server) => Number(await server.cli('dbsize'))));
  // 300 routes in ~290 of 4096 bucket hashes, over 3 masters: each holds a fair share (well above zero, well below all).
  for (const keys of perMaster) assert.ok(keys > 60 && keys < 200, `keys per master: ${perMaster}`);
  // What a sweeper reads to tell a stalled node from a dead one: CLIENT LIST of every master.
  const reader = connect({ cluster: cluster.nodes }, 'gw:node:reader', { lostAfterMs: 2000 });
  await reader.whenReady();
  assert.ok((await reader.clientNames()).has(keyspace('gw').clientName('spreader')));
  await reader.close();
  for (const server of cluster.servers) assert.match(await server.cli('client', 'list'), / name=gw:node:spreader /);
  await node.close();
});

test('on a Redis Cluster, a master that loses its data (a shard back empty) gets every node\'s routes again, though the heartbeat\'s key is elsewhere, and emits looking routes up there are refused until then', async (t) => {
  const cluster = await startRedisCluster();
  t.after(async () => {
    await closeBrokers();
    await cluster.stop();
  });
  const [a, b] = ['emptied-a', 'emptied-b'].map((nodeId) => {
    const watched = watcher();
    return { watched, node: broker({ target: { cluster: cluster.nodes }, nodeId, observer: watched.observer }) };
  });
  for (const { node } of [a!, b!]) {
    await node.start(() => {});
    await Promise.all(Array.from({ length: 60 }, (_, i) => node.addRoute(routeOf('order-updates', { recipientId: `${node.nodeId}-${i}` }))));
  }
  const heartbeats = await cluster.masterOf(keyspace('gw').nodes);
  const emptied = cluster.servers.find((server) => server !== heartbeats)!;
  const keysOn = async () => (await emptied.cli('keys', '*')).split('\n').sort();
  const before = await keysOn();
  assert.ok(before.length > 20, `keys on the master to empty: ${before.length}`);
  // A route of b's whose bucket is on the master to empty.
  const onEmptied = await findAsync(Array.from({ length: 60 }, (_, i) => `emptied-b-${i}`), async (recipientId) =>
    (await cluster.masterOf(keyspace('gw').routeBucket(bucketOf(routeOf('order-updates', { recipientId }).key, 4096)))) === emptied);
  assert.equal(await a!.node.publish('order-updates', { recipientId: onEmptied }), 1, 'its shapes read once');
  const bBack = b!.watched.next('resynced');
  await emptied.cli('flushall');
  await a!.watched.next('resynced');
  // For a heartbeat interval after its write-back, an emit is refused rather than looked up where routes may be missing.
  await assert.rejects(a!.node.publish('order-updates', { recipientId: onEmptied }), /came back empty/);
  await bBack;
  assert.deepEqual(await keysOn(), before, 'every key back');
  await until(async () => a!.node.publish('order-updates', { recipientId: onEmptied }).then(() => true, () => false), 'emits taken again');
  assert.equal(await a!.node.publish('order-updates', { recipientId: onEmptied }), 1);
});

/** The first of `items` for which `check` holds. */
async function findAsync<T>(items: readonly T[], check: (item: T) => Promise<boolean>): Promise<T> {
  for (const item of items) if (await check(item)) return item;
  throw new Error('none found');
}
