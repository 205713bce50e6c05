/**
 * The Broker contract for emits' idempotency keys (Broker.claim, settle, publish's `once`), on the contract's fleet of
 * three nodes (run inside brokerContract): a key is claimed by exactly one of the nodes that try it at once, holds its
 * first emit's answer for the window, is freed by a publisher that gives up or dies, and an event with history appends
 * to a route once per key, however often the emit is published.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, it } from 'node:test';
import type { Broker, Once } from '../../src/broker/broker.ts';
import { routeOf } from '../../src/events/routing.ts';
import type { ContractFleet } from './broker-history.contract.ts';

export function onceContract(fleet: ContractFleet): void {
  let a: Broker;
  let b: Broker;
  let c: Broker;
  beforeEach(() => {
    [a, b, c] = fleet.brokers();
  });

  const newKey = (windowMs = 60_000): Once => ({ id: randomBytes(16).toString('base64url'), windowMs });

  it('a key is claimed by exactly one of the nodes that claim it at once; the others find it pending, with its digest', async () => {
    const once = newKey();
    const claims = await Promise.all([a, b, c].map((node) => node.claim(once, 'digest-1', 10_000)));
    assert.deepEqual(claims.filter((claim) => claim.state === 'new').length, 1);
    assert.deepEqual(claims.filter((claim) => claim.state !== 'new'), [{ state: 'pending', digest: 'digest-1' }, { state: 'pending', digest: 'digest-1' }]);
  });

  it('a settled key answers its first answer on every node for its window, then is free again', async () => {
    const once = newKey(300);
    assert.deepEqual(await a.claim(once, 'digest-1', 10_000), { state: 'new' });
    await a.settle(once, 'digest-1', '{"nodes":2}');
    const done = { state: 'done', digest: 'digest-1', answer: '{"nodes":2}' };
    assert.deepEqual(await b.claim(once, 'digest-1', 10_000), done);
    assert.deepEqual(await c.claim(once, 'digest-2', 10_000), done, 'another body finds the first one\'s digest');
    await sleep(400);
    assert.deepEqual(await c.claim(once, 'digest-2', 10_000), { state: 'new' });
  });

  it('a claim given up (settled without an answer) or left by its publisher (pendingMs passed) frees the key', async () => {
    const once = newKey();
    assert.deepEqual(await a.claim(once, 'digest-1', 10_000), { state: 'new' });
    await a.settle(once, 'digest-1', undefined);
    assert.deepEqual(await b.claim(once, 'digest-1', 200), { state: 'new' });
    assert.equal((await c.claim(once, 'digest-1', 200)).state, 'pending');
    await sleep(300);
    assert.deepEqual(await c.claim(once, 'digest-1', 10_000), { state: 'new' });
  });

  it('an event with history appends once per key: the emit published again carries its first position', async () => {
    const route = routeOf('kept', { recipientId: 31 });
    await a.addRoute(route);
    const once = newKey();
    const { epoch } = await a.history(route);
    assert.equal(await b.publish('kept', { recipientId: 31, n: 1 }, once), 1);
    assert.equal(await c.publish('kept', { recipientId: 31, n: 1 }, once), 1);
    assert.equal(await b.publish('kept', { recipientId: 31, n: 2 }), 1);
    const got = await fleet.inbox(a).until('kept', 3);
    assert.deepEqual(got.map((delivery) => delivery.positions?.get(route.key)), [1, 1, 2].map((offset) => ({ offset, epoch })));
    const read = await c.history(route, { since: { offset: 0, epoch }, upTo: 2, limit: 5 });
    assert.deepEqual(read.entries.map(({ offset, json }) => [offset, JSON.parse(json).n]), [[1, 1], [2, 2]], 'appended once');
  });
}
