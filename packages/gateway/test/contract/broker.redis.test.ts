/** The Broker contract on the Redis broker: against one redis-server, and against a 3-master Redis Cluster. */
import { randomBytes } from 'node:crypto';
import { after, before, describe } from 'node:test';
import { RedisBroker } from '../../src/broker/redis/broker.ts';
import type { RedisTarget } from '../../src/broker/redis/connection.ts';
import { quietObserver as quiet } from '../support/brokers.ts';
import { startRedis, startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis.ts';
import { brokerContract, CONTRACT_HISTORIES } from './broker.contract.ts';


/**
 * Three nodes of one fleet; a key prefix of their own keeps fleets of different tests apart. Two route buckets:
 * every test's routes share hashes, so each write must leave the other routes and nodes of its bucket alone.
 */
function fleetOn(target: () => RedisTarget) {
  return async () => {
    const keyPrefix = `t${randomBytes(4).toString('hex')}`;
    const make = (nodeId: string) =>
      new RedisBroker({ target: target(), nodeId, leaseMs: 10_000, connectedLeaseMs: 10_000, sweepIntervalMs: 5000, observer: quiet, keyPrefix, routeBuckets: 2, histories: CONTRACT_HISTORIES });
    const brokers = [make('node-a'), make('node-b'), make('node-c')] as const;
    return {
      brokers: [...brokers] as [RedisBroker, RedisBroker, RedisBroker],
      close: async () => void (await Promise.all(brokers.map((broker) => broker.close()))),
    };
  };
}

describe('one redis-server', () => {
  let redis: RedisServer;
  before(async () => {
    redis = await startRedis();
  });
  after(() => redis.stop());
  brokerContract('RedisBroker on one redis-server', fleetOn(() => ({ url: redis.url })));
});

describe('a 3-master Redis Cluster', () => {
  let cluster: RedisCluster;
  before(async () => {
    cluster = await startRedisCluster();
  });
  after(() => cluster.stop());
  brokerContract('RedisBroker on a Redis Cluster', fleetOn(() => ({ cluster: cluster.nodes })));
});
