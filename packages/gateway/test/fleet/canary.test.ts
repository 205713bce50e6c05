/**
 * The delivery canary and Redis's loss on real processes: two node processes on one real redis-server. Node 1
 * connects as an ACL user of its own, so that its channel alone can be cut: revoking the user's channels makes Redis
 * drop its subscription and refuse its publishes, while its commands (heartbeats, reads) go on, so only the canary
 * can tell. Then Redis itself is killed and started again.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { nodeMetric, startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const INTERVAL_MS = 200;
const TIMEOUT_MS = 1000;
let redis: RedisServer;
let fleet: Fleet;

const readyz = async (node: FleetNode) => (await fetch(`${node.http}/readyz`)).status;
const lines = (node: FleetNode, pattern: RegExp) => node.log.filter((entry) => pattern.test(String(entry.msg)));
const createUser = () => redis.cli('ACL', 'SETUSER', 'n1', 'on', '>n1-secret', '~*', '&*', '+@all');

before(async () => {
  redis = await startRedis();
  await createUser();
  const url = new URL(redis.url);
  const asN1 = `redis://n1:n1-secret@${url.host}`;
  fleet = await startFleet(2, (index) => (index === 0 ? asN1 : redis.url), (raw) => {
    raw.canary = { intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS };
  });
});
after(async () => {
  await fleet?.stop();
  await redis?.stop();
});

test('canaries go round: each node times its own channel and its peer\'s', async () => {
  for (const node of fleet.nodes) {
    for (const target of ['self', 'peer']) {
      await until(async () => (await nodeMetric(node, `herald_canary_round_trip_seconds_count{target="${target}"}`)) >= 2, `${node.id}'s ${target} canaries`);
    }
  }
});

test('a node whose own channel stops delivering turns not-ready within the bound, says so once, and is ready again when it delivers', async () => {
  const [cut, other] = fleet.nodes as [FleetNode, FleetNode];
  const cutAt = performance.now();
  await redis.cli('ACL', 'SETUSER', 'n1', 'resetchannels');
  await until(async () => (await readyz(cut)) === 503, `${cut.id} to turn not-ready`, 10_000);
  const tookMs = performance.now() - cutAt;
  // The bound: the timeout, and at most one interval before a round notices (plus a busy machine's slack).
  assert.ok(tookMs >= TIMEOUT_MS - INTERVAL_MS && tookMs < TIMEOUT_MS + INTERVAL_MS + 3000, `not-ready after ${Math.round(tookMs)} ms`);
  assert.equal(await readyz(other), 200, "the other node's channel still delivers");
  await until(async () => lines(cut, /channel stopped delivering/).length === 1, 'the log line');
  await until(async () => (await nodeMetric(other, 'herald_canary_missed_total{target="peer"}')) >= 1, "the peer's missed canaries");
  // Several more rounds pass without a second line.
  const missed = await nodeMetric(cut, 'herald_canary_missed_total{target="self"}');
  await until(async () => (await nodeMetric(cut, 'herald_canary_missed_total{target="self"}')) >= missed + 3, 'more missed rounds');
  assert.equal(lines(cut, /channel stopped delivering/).length, 1);

  // Its subscriber, refused, keeps reconnecting and subscribing again until it is let in.
  await redis.cli('ACL', 'SETUSER', 'n1', 'allchannels');
  await until(async () => (await readyz(cut)) === 200, `${cut.id} to be ready again`);
  await until(async () => lines(cut, /channel delivers again/).length === 1, 'the log line');
  assert.equal(lines(cut, /channel stopped delivering/).length, 1);
});

test('Redis lost and back: one line each per node, not one per failed reconnect or write', async () => {
  const failures = await Promise.all(fleet.nodes.map((node) => nodeMetric(node, 'herald_broker_write_failures_total')));
  const before = fleet.nodes.map((node) => node.log.length);
  await redis.stop('SIGKILL');
  for (const [i, node] of fleet.nodes.entries()) {
    await until(async () => (await readyz(node)) === 503, `${node.id} to turn not-ready`);
    assert.equal((await fetch(`${node.http}/status.json`)).status, 503, 'the fleet cannot be read without Redis');
    // Heartbeats keep failing meanwhile, and ioredis keeps trying to reconnect.
    await until(async () => (await nodeMetric(node, 'herald_broker_write_failures_total')) >= failures[i]! + 3, `${node.id}'s failed writes`);
  }
  await redis.restart();
  await createUser();
  for (const [i, node] of fleet.nodes.entries()) {
    await until(async () => (await readyz(node)) === 200, `${node.id} to be ready again`);
    await until(async () => lines(node, /^Redis back$/).length === 1, `${node.id}'s Redis back`);
    const during = node.log.slice(before[i]);
    const lost = during.filter((entry) => /^Redis lost/.test(String(entry.msg)));
    assert.equal(lost.length, 1, JSON.stringify(during));
    assert.equal(lost[0]!.nodeId, node.id, 'the line names the node');
    // Nothing said twice (ioredis's every failed reconnect, every failed heartbeat), and no stack traces.
    const messages = during.map((entry) => String(entry.msg));
    assert.deepEqual(messages.filter((msg, at) => messages.indexOf(msg) !== at), [], JSON.stringify(during));
    assert.deepEqual(during.filter((entry) => /Redis write failed/.test(String(entry.msg)) || 'err' in entry), []);
  }
});
