/**
 * The emit stream on a node with a real redis-server: entries XADDed by a back end (before the node started, too) are
 * delivered in the stream's order, once per idempotencyKey (or entry id); entries that can never be published go to
 * the dead-letter stream with their reason; what a reader that died left pending is published by the node that takes
 * the reader's lease over.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { RedisStream } from '../../src/broker/redis/ingest.ts';
import { until } from '../support/fleet.ts';
import { TestSocket, apiToken, metric, onEvent, personToken, startNode, type TestNode } from '../support/gateway.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const STREAM = 'herald:emits';
let redis: RedisServer;
let backEnd: Redis;
let node: TestNode;
let token: string;

const add = (fields: Record<string, unknown>): Promise<string> =>
  backEnd.xadd(STREAM, '*', ...Object.entries(fields).flatMap(([field, value]) => [field, typeof value === 'string' ? value : JSON.stringify(value)])) as Promise<string>;

before(async () => {
  redis = await startRedis();
  backEnd = new Redis(redis.url);
  // A reader that took an entry and died holding the reader's lease: a node that starts takes the lease over once it
  // runs out, and claims that entry first.
  await add({ name: 'announcements', eventData: { n: 0 } });
  const ghost = new RedisStream({ target: { url: redis.url }, liveness: { lostAfterMs: 2000 }, stream: STREAM, group: 'herald', consumer: 'ghost', deadLetterStream: `${STREAM}:dead`, deadLetterMaxLen: 100, forgetConsumerMs: 3_600_000 }, 'ghost');
  await ghost.start();
  assert.equal(await ghost.lead(400), true);
  assert.equal((await ghost.read(10, 100)).length, 1);
  await ghost.close();
  node = await startNode((raw) => {
    raw.redis = { url: redis.url, leaseMs: 2000 };
    raw.apiUsers.viewer = { password: 'viewer-password', groups: ['viewers'] };
    raw.ingest = { apiUser: 'bench', blockMs: 100, claimIdleMs: 400 };
  });
  token = await apiToken(node);
});
after(async () => {
  await node.close();
  backEnd.disconnect();
  await redis.stop();
});

/** The eventData of the NOTIFICATIONs a client got, in order, once `count` came. */
async function notified(client: TestSocket, count: number): Promise<unknown[]> {
  const got: unknown[] = [];
  while (got.length < count) got.push((await client.next('NOTIFICATION')).response.eventData);
  return got;
}

test('what a dead reader left pending is claimed and published by the node that takes the lease over', async () => {
  await until(async () => (await metric(node, 'herald_ingest_entries_total', { result: 'published' })) >= 1, 'the first entry published');
  assert.equal(await metric(node, 'herald_ingest_entries_total', { result: 'claimed' }), 1);
});

test('entries are delivered in the stream\'s order, once per key', async () => {
  const nick = await TestSocket.connect(node, token, await personToken(node, 'NICK', 'WAHLBERG'));
  await nick.register(onEvent('order-updates', { recipientId: '2' }));
  const everyone = await TestSocket.connect(node, token);
  await everyone.register(onEvent('announcements'));
  for (let n = 1; n <= 20; n++) await add({ name: 'order-updates', eventData: { recipientId: '2', n }, ...(n === 7 ? { idempotencyKey: 'seven' } : {}) });
  await add({ name: 'order-updates', eventData: { recipientId: '2', n: 7 }, idempotencyKey: 'seven' });
  await add({ name: 'announcements', eventData: { n: 1 } });
  assert.deepEqual((await notified(nick, 20)).map((data) => (data as { n: number }).n), Array.from({ length: 20 }, (_, i) => i + 1));
  assert.deepEqual(await notified(everyone, 1), [{ n: 1 }]);
  await until(async () => (await metric(node, 'herald_ingest_entries_total', { result: 'replayed' })) === 1, 'the repeat acknowledged, not published');
  await Promise.all([nick.close(), everyone.close()]);
});

test('entries that can never be published go to the dead-letter stream with why, and leave nothing pending', async () => {
  const bad = [
    { fields: { eventData: {} }, why: /^BAD_REQUEST: the entry has no field name/ },
    { fields: { name: 'announcements', eventData: 'not json' }, why: /^BAD_REQUEST: the field eventData is not JSON/ },
    { fields: { name: 'announcements', eventData: [1] }, why: /^BAD_REQUEST: the field eventData is not a JSON object/ },
    { fields: { name: 'no-such-event', eventData: {} }, why: /^UNKNOWN_EVENT: / },
    { fields: { name: 'announcements', eventData: {}, apiUser: 'viewer' }, why: /^EVENT_FORBIDDEN: API user viewer may not emit announcements/ },
    { fields: { name: 'announcements', eventData: {}, apiUser: 'nobody' }, why: /^BAD_REQUEST: no API user nobody is configured/ },
    { fields: { name: 'announcements', eventData: {}, idempotencyKey: 'x'.repeat(300) }, why: /^BAD_REQUEST: the idempotency-key/ },
  ];
  const ids = [];
  for (const { fields } of bad) ids.push(await add(fields));
  await until(async () => (await backEnd.xlen(`${STREAM}:dead`)) === bad.length, 'every bad entry dead-lettered');
  const dead = (await backEnd.xrange(`${STREAM}:dead`, '-', '+')) as Array<[string, string[]]>;
  for (const [i, [, fields]] of dead.entries()) {
    assert.equal(fields[0], 'reason');
    assert.match(fields[1]!, bad[i]!.why);
    assert.deepEqual(fields.slice(2, 4), ['id', ids[i]]);
  }
  const [pending] = (await backEnd.xpending(STREAM, 'herald')) as [number];
  assert.equal(pending, 0);
});
