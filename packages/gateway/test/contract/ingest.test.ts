/** The emit stream's contract on the in-process stream, on one redis-server and on a 3-master Redis Cluster. */
import { randomBytes } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { MemoryStream } from '../../src/broker/ingest.ts';
import { hostPort, type RedisTarget } from '../../src/broker/redis/connection.ts';
import { RedisStream } from '../../src/broker/redis/ingest.ts';
import { startRedis, startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis.ts';
import { streamContract, type StreamFixture } from './ingest.contract.ts';

streamContract('in-process', async () => {
  const stream = new MemoryStream();
  return {
    consumers: [stream.consumer('a'), stream.consumer('b')],
    add: async (fields) => stream.add(fields),
    deadLetters: async () => stream.deadLetters.map(({ entry, reason }) => ({ reason, id: entry.id })),
    close: async () => {},
  };
});

/** Two consumers of a stream of its own on `target`, and a client to add to it as a back end would. */
function onRedis(target: () => RedisTarget): () => Promise<StreamFixture> {
  return async () => {
    const stream = `{ingest-${randomBytes(4).toString('hex')}}:emits`;
    const options = { target: target(), liveness: { lostAfterMs: 2000 }, stream, group: 'herald', deadLetterStream: `${stream}:dead`, deadLetterMaxLen: 1000, forgetConsumerMs: 3_600_000 };
    const consumers: [RedisStream, RedisStream] = [new RedisStream({ ...options, consumer: 'a' }, 'test-a'), new RedisStream({ ...options, consumer: 'b' }, 'test-b')];
    const { cluster, url } = target();
    const backEnd = cluster ? new Cluster(cluster.map(hostPort)) : new Redis(url!);
    return {
      consumers,
      add: async (fields) => (await backEnd.xadd(stream, '*', ...Object.entries(fields).flat()))!,
      deadLetters: async () =>
        ((await backEnd.xrange(`${stream}:dead`, '-', '+')) as Array<[string, string[]]>).map(([, fields]) => ({ reason: fields[1]!, id: fields[3]! })),
      close: async () => {
        await Promise.all(consumers.map((consumer) => consumer.close()));
        backEnd.disconnect();
      },
    };
  };
}

describe('one redis-server', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());
  streamContract('RedisStream on one redis-server', onRedis(() => ({ url: redis.url })));
});

describe('a 3-master Redis Cluster', () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster();
  });
  after(() => cluster.stop());
  streamContract('RedisStream on a Redis Cluster', onRedis(() => ({ cluster: cluster.nodes })));
});
