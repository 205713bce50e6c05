/**
 * The Broker contract for events with history (CONTRACT_HISTORIES), on the contract's fleet of three nodes (run
 * inside brokerContract): positions carried to every node holding a route, appends to routes nobody holds now, and
 * ranges read back whole or refused with their reason.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, it } from 'node:test';
import type { Broker } from '../../src/broker/broker.ts';
import { routeOf } from '../../src/events/routing.ts';
import type { Inbox } from './broker.contract.ts';

/** The contract's fleet, as each of its tests finds it (made before each test). */
export interface ContractFleet {
  brokers(): readonly [Broker, Broker, Broker];
  inbox(broker: Broker): Inbox;
}

export function historyContract(fleet: ContractFleet): void {
  let a: Broker;
  let b: Broker;
  let c: Broker;
  beforeEach(() => {
    [a, b, c] = fleet.brokers();
  });

  const inbox = (broker: Broker): Inbox => fleet.inbox(broker);
  const person = (recipientId: number) => routeOf('kept', { recipientId });

  it('carries each emit with its position in the route\'s history to every node holding the route', async () => {
    const route = person(7);
    await a.addRoute(route);
    await c.addRoute(route);
    const { epoch } = await a.history(route);
    for (const n of [1, 2, 3]) assert.equal(await b.publish('kept', { recipientId: 7, n }), 2);
    for (const node of [a, c]) {
      const got = await inbox(node).until('kept', 3);
      assert.deepEqual(got.map((delivery) => delivery.eventData.n), [1, 2, 3]);
      assert.deepEqual(got.map((delivery) => delivery.positions?.get(route.key)), [1, 2, 3].map((offset) => ({ offset, epoch })));
    }
    assert.deepEqual(await b.history(route), { epoch, offset: 3, entries: [], unrecovered: undefined });
  });

  it('keeps appending to a route after its last subscriber left, and reads the missed entries back in order', async () => {
    const route = person(8);
    await a.addRoute(route);
    await b.publish('kept', { recipientId: 8, n: 1 });
    await inbox(a).until('kept', 1);
    await a.removeRoute(route);
    assert.equal(await b.publish('kept', { recipientId: 8, n: 2 }), 0);
    assert.equal(await c.publish('kept', { recipientId: 8, n: 3 }), 0);
    const { epoch, offset } = await c.history(route);
    assert.equal(offset, 3);
    const read = await c.history(route, { since: { offset: 1, epoch }, upTo: 3, limit: 5 });
    assert.equal(read.unrecovered, undefined);
    assert.deepEqual(read.entries.map(({ offset, json }) => [offset, JSON.parse(json)]), [[2, { recipientId: 8, n: 2 }], [3, { recipientId: 8, n: 3 }]]);
    assert.deepEqual((await c.history(route, { since: { offset: 1, epoch }, upTo: 2, limit: 5 })).entries.map((entry) => entry.offset), [2]);
  });

  it('a route read before any emit gets an epoch that its first emit keeps', async () => {
    const route = person(9);
    const first = await a.history(route);
    assert.equal(first.offset, 0);
    assert.match(first.epoch, /^[A-Za-z0-9_-]{1,64}$/);
    await a.addRoute(route);
    await b.publish('kept', { recipientId: 9 });
    const [delivery] = await inbox(a).until('kept', 1);
    assert.deepEqual(delivery?.positions?.get(route.key), { offset: 1, epoch: first.epoch });
  });

  it('answers a range whole, or why not: another epoch, more than the limit, entries trimmed, nothing missed', async () => {
    const route = person(10);
    await a.addRoute(route);
    const { epoch } = await a.history(route);
    for (let n = 1; n <= 4; n++) await b.publish('kept', { recipientId: 10, n });
    const range = (offset: number, upTo: number, limit = 5, at = epoch) => a.history(route, { since: { offset, epoch: at }, upTo, limit });
    assert.equal((await range(0, 4, 5, 'another')).unrecovered, 'epoch_changed');
    assert.equal((await range(0, 4, 3)).unrecovered, 'capped');
    assert.deepEqual(await range(4, 4), { epoch, offset: 4, entries: [], unrecovered: undefined });
    // A client ahead of the position asked about has nothing to catch up on.
    assert.deepEqual((await range(6, 4)).entries, []);
    assert.deepEqual((await range(1, 9)).entries.map((entry) => entry.offset), [2, 3, 4], 'upTo past the last offset reads to the last');
    // size 5: the history keeps at least 5 (a Redis stream trims whole nodes of 100 entries), not 300.
    for (let n = 5; n <= 300; n++) await c.publish('kept', { recipientId: 10, n });
    assert.equal((await range(0, 300, 5)).unrecovered, 'capped');
    assert.equal((await a.history(route, { since: { offset: 0, epoch }, upTo: 300, limit: 300 })).unrecovered, 'too_old');
    assert.deepEqual((await range(295, 300)).entries.map((entry) => entry.offset), [296, 297, 298, 299, 300]);
  });

  it('never replays an entry older than ttlSeconds', async () => {
    const route = routeOf('kept-briefly', { recipientId: 11 });
    await a.addRoute(route);
    const { epoch } = await a.history(route);
    await b.publish('kept-briefly', { recipientId: 11 });
    assert.equal((await a.history(route, { since: { offset: 0, epoch }, upTo: 1, limit: 10 })).entries.length, 1);
    // Age is not an event that can be awaited: the entry must outlive ttlSeconds (1 s).
    await sleep(1200);
    const read = await a.history(route, { since: { offset: 0, epoch }, upTo: 1, limit: 10 });
    assert.equal(read.epoch, epoch, 'the position outlives its entries');
    assert.equal(read.unrecovered, 'too_old');
  });

  it('appends only to the shapes of routes held within ttlSeconds, one route per shape', async () => {
    assert.equal(await b.publish('kept', { recipientId: 12 }), 0);
    assert.equal((await a.history(person(12))).offset, 0, 'no shape was ever held: nothing appended');
    await a.addRoute(person(13));
    await c.addRoute(routeOf('kept', { recipientId: 12, shop: 's' }));
    await b.publish('kept', { recipientId: 12, shop: 's' });
    const [delivery] = await inbox(c).until('kept', 1);
    assert.deepEqual([...(delivery?.positions?.keys() ?? [])].sort(), [person(12).key, routeOf('kept', { recipientId: 12, shop: 's' }).key].sort());
    assert.equal((await a.history(person(12))).offset, 1);
    assert.equal(inbox(a).of('kept').length, 0);
  });

  it('emits of events without history carry no positions', async () => {
    await a.addRoute(routeOf('plain', { recipientId: 1 }));
    await b.publish('plain', { recipientId: 1 });
    const [delivery] = await inbox(a).until('plain', 1);
    assert.equal(delivery?.positions, undefined);
  });
}
