/**
 * The emit's reads on their lean connection (broker/redis/reads.ts), against a real redis-server. The fallback
 * stands for ioredis and answers a marker, so each test can tell which way a read went.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import type { Commands } from '../../src/broker/redis/clients.ts';
import { readsFor, type Reads } from '../../src/broker/redis/reads.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const THROUGH_IOREDIS = 'through ioredis';
const LIVENESS = { lostAfterMs: 2000 };
const fallback = {
  hget: async () => THROUGH_IOREDIS,
  smembers: async () => [THROUGH_IOREDIS],
} as unknown as Commands;

let server: RedisServer;
let writer: Redis;
before(async () => {
  server = await startRedis();
  writer = new Redis(server.url);
  await writer.hset('bucket', { a: '1', b: 'ü,ö', empty: '' });
  await writer.sadd('shapes', 'recipientId', '', 'x,y');
});
after(async () => {
  writer.disconnect();
  await server.stop();
});

async function leanReads(url = server.url, told?: Told): Promise<Reads> {
  const reads = readsFor(url, fallback, LIVENESS, told?.listener);
  await reads.whenReady();
  return reads;
}

/** What a listener was told, in order, and a wait for the next time it is. */
class Told {
  readonly changes: Array<[boolean, string]> = [];
  #next: (() => void) | undefined;
  readonly listener = (lean: boolean, why: string): void => {
    this.changes.push([lean, why]);
    this.#next?.();
  };

  async until(count: number): Promise<void> {
    while (this.changes.length < count) await new Promise<void>((resolve) => (this.#next = resolve));
  }
}

test('reads of one turn leave in one batch and are answered in order, as Redis answers them', async (t) => {
  const reads = await leanReads();
  t.after(() => reads.close());
  assert.equal(reads.unsentBatch(), undefined, 'nothing unsent yet');
  const fields = Array.from({ length: 300 }, (_, i) => ['a', 'b', 'missing', 'empty'][i % 4]!);
  const hgets = fields.map((field) => reads.hget('bucket', field));
  const batch = reads.unsentBatch();
  assert.notEqual(batch, undefined);
  const sets = [reads.smembers('shapes'), reads.smembers('no such set')];
  assert.equal(reads.unsentBatch(), batch, 'the same turn, the same batch');
  const expected = { a: '1', b: 'ü,ö', missing: null, empty: '' } as Record<string, string | null>;
  assert.deepEqual(await Promise.all(hgets), fields.map((field) => expected[field]));
  const [shapes, none] = await Promise.all(sets);
  assert.deepEqual(shapes!.sort(), ['', 'recipientId', 'x,y']);
  assert.deepEqual(none, []);
  reads.hget('bucket', 'a').catch(() => {});
  assert.notEqual(reads.unsentBatch(), batch, 'a later turn, a later batch');
});

test('replies split over many reads of the socket are put together', async (t) => {
  await writer.hset('big', 'field', 'v'.repeat(300_000));
  await writer.sadd('many', ...Array.from({ length: 5000 }, (_, i) => `member-${i}`));
  const reads = await leanReads();
  t.after(() => reads.close());
  const [big, many, small] = await Promise.all([reads.hget('big', 'field'), reads.smembers('many'), reads.hget('bucket', 'a')]);
  assert.equal(big, 'v'.repeat(300_000));
  assert.equal(many.length, 5000);
  assert.ok(many.includes('member-4999'));
  assert.equal(small, '1');
});

test('a password, a user and a database in the URL are sent before the first read', async (t) => {
  const guarded = await startRedis(['--requirepass', 's3cret']);
  const admin = new Redis(`redis://:s3cret@127.0.0.1:${guarded.port}/3`);
  t.after(async () => {
    admin.disconnect();
    await guarded.stop();
  });
  await admin.hset('bucket', 'a', 'in db 3');
  await admin.acl('SETUSER', 'alice', 'on', '>p@ss', '~*', '+@all');
  const withPassword = await leanReads(`redis://:s3cret@127.0.0.1:${guarded.port}/3`);
  const asAlice = await leanReads(`redis://alice:p%40ss@127.0.0.1:${guarded.port}/3`);
  t.after(() => [withPassword, asAlice].forEach((reads) => reads.close()));
  assert.equal(await withPassword.hget('bucket', 'a'), 'in db 3');
  assert.equal(await asAlice.hget('bucket', 'a'), 'in db 3');

  const told = new Told();
  const refused = readsFor(`redis://:wrong@127.0.0.1:${guarded.port}`, fallback, LIVENESS, told.listener);
  t.after(() => refused.close());
  // Once Redis has refused its AUTH (ACL LOG records it), the lean connection would take reads if it took a
  // refusal for a success; a read now tells the two apart.
  for (let i = 0; i < 10_000 && ((await admin.acl('LOG')) as unknown[]).length === 0; i++);
  assert.notEqual(((await admin.acl('LOG')) as unknown[]).length, 0, 'Redis saw the wrong password');
  assert.equal(await refused.hget('bucket', 'a'), THROUGH_IOREDIS, 'refused: reads stay with ioredis');
  await told.until(1);
  assert.equal(told.changes[0]![0], false);
  assert.match(told.changes[0]![1], /^Redis refused the handshake: WRONGPASS/);
  // It keeps trying, and says so once: ACL LOG counts the refusals of one client address in one entry.
  const refusals = async (): Promise<number> => Number((((await admin.acl('LOG')) as unknown[][])[0] ?? [])[1] ?? 0);
  for (let i = 0; i < 10_000 && (await refusals()) < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok((await refusals()) >= 3, 'tried again');
  assert.equal(told.changes.length, 1, 'told once, not once per try');
});

test('while Redis is gone reads go through ioredis, and the lean connection comes back with it', async (t) => {
  const own = await startRedis();
  const told = new Told();
  const reads = await leanReads(own.url, told);
  t.after(async () => {
    reads.close();
    await own.stop();
  });
  const ownWriter = new Redis(own.url);
  await ownWriter.hset('bucket', 'a', 'before');
  ownWriter.disconnect();
  assert.equal(await reads.hget('bucket', 'a'), 'before');

  await own.stop('SIGKILL');
  // A read sent before the close is seen fails with it; the next go to ioredis.
  let answer: string | null = null;
  for (let i = 0; i < 1000 && answer !== THROUGH_IOREDIS; i++) {
    answer = await reads.hget('bucket', 'a').catch((error: Error) => {
      assert.match(error.message, /connection to Redis closed/);
      return null;
    });
  }
  assert.equal(answer, THROUGH_IOREDIS);

  await own.restart();
  await reads.whenReady();
  assert.equal(await reads.hget('bucket', 'a'), null, 'read from the restarted (empty) server');
  while (told.changes.length < 3 || told.changes.at(-1)![0] !== true) await told.until(told.changes.length + 1);
  // Off once, then on: a reconnect attempt that fails meanwhile may tell a new reason, still off.
  const turns = told.changes.filter(([lean], i) => i === 0 || lean !== told.changes[i - 1]![0]);
  assert.deepEqual(turns.map(([lean]) => lean), [true, false, true]);
  assert.match(told.changes[1]![1], /closed|ECONNRESET|ECONNREFUSED/);
});

test('a URL that ioredis reads its own way (options in the query, a socket path) is read through ioredis', async () => {
  for (const url of [`${server.url}/?db=2`, '/tmp/redis.sock', `${server.url.slice('redis://'.length)}`]) {
    const reads = readsFor(url, fallback, LIVENESS);
    assert.equal(await reads.hget('bucket', 'a'), THROUGH_IOREDIS, url);
    assert.equal(reads.unsentBatch(), undefined);
    reads.close();
  }
});
