/**
 * The Broker contract, on three nodes of one fleet. Deliveries may arrive after publish settles, so tests wait
 * for them (never a fixed sleep). To show that an emit was not delivered, a sentinel emit is published to the
 * same node afterwards and awaited: deliveries to one node keep their order, so the earlier one had its chance.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Position } from '@herald/protocol';
import type { Broker, CanaryHandler, ControlHandler, DeliveryHandler, Histories } from '../../src/broker/broker.ts';
import { routeOf } from '../../src/events/routing.ts';
import { historyContract } from './broker-history.contract.ts';
import { onceContract } from './broker-once.contract.ts';

/** The events with history every fleet of the contract is made with (as node.ts passes config events.<name>.history). */
export const CONTRACT_HISTORIES: Histories = new Map([
  ['kept', { size: 5, ttlSeconds: 60, positionTtlSeconds: 3600, maxReplay: 5 }],
  ['kept-briefly', { size: 100, ttlSeconds: 1, positionTtlSeconds: 3600, maxReplay: 100 }],
]);

export interface Fleet {
  brokers: [Broker, Broker, Broker];
  /** Release what the fleet holds; some of its brokers may already be closed. */
  close(): Promise<void>;
}

interface Delivery {
  event: string;
  eventData: Record<string, unknown>;
  positions?: ReadonlyMap<string, Position>;
}

const SENTINEL = 'contract-sentinel';
const WAIT_MS = 2000;

/** A control message as the inbox lists it beside the emits, in the order both arrived. */
const CONTROL = '(control)';
/** A canary, likewise. */
const CANARY = '(canary)';

/** What one node received, and a way to wait for more. */
export class Inbox {
  readonly received: Delivery[] = [];
  readonly #waiters = new Set<() => void>();

  readonly handler: DeliveryHandler = (event, eventData, positions) =>
    this.#got(positions === undefined ? { event, eventData } : { event, eventData, positions });

  readonly control: ControlHandler = (message) => this.#got({ event: CONTROL, eventData: { message } });

  readonly canary: CanaryHandler = (canary) => this.#got({ event: CANARY, eventData: { canary } });

  #got(delivery: Delivery): void {
    this.received.push(delivery);
    for (const waiter of this.#waiters) waiter();
  }

  of(event: string): Delivery[] {
    return this.received.filter((delivery) => delivery.event === event);
  }

  /** The control messages received, in order. */
  controls(): string[] {
    return this.of(CONTROL).map((delivery) => delivery.eventData.message as string);
  }

  /** The canaries received, in order. */
  canaries(): string[] {
    return this.of(CANARY).map((delivery) => delivery.eventData.canary as string);
  }

  /** Resolves once `count` deliveries of `event` have arrived; fails after WAIT_MS. */
  until(event: string, count: number): Promise<Delivery[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const got = this.of(event);
        if (got.length < count) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve(got);
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`waited ${WAIT_MS} ms for ${count} ${event} deliveries, got ${this.of(event).length}`));
      }, WAIT_MS);
      this.#waiters.add(check);
      check();
    });
  }
}

export function brokerContract(name: string, makeFleet: () => Promise<Fleet>): void {
  describe(`Broker contract: ${name}`, () => {
    let fleet: Fleet;
    let a: Broker;
    let b: Broker;
    let c: Broker;
    let inboxes: Map<Broker, Inbox>;

    beforeEach(async () => {
      fleet = await makeFleet();
      [a, b, c] = fleet.brokers;
      inboxes = new Map(fleet.brokers.map((broker) => [broker, new Inbox()]));
      for (const [broker, inbox] of inboxes) {
        await broker.start(inbox.handler, inbox.control, inbox.canary);
        await broker.addRoute(routeOf(SENTINEL, { node: broker.nodeId }));
      }
    });
    afterEach(async () => {
      await fleet.close();
    });

    const inbox = (broker: Broker): Inbox => inboxes.get(broker) as Inbox;

    /** Publish a sentinel to `node` and await it: whatever was published to `node` before has arrived by then. */
    async function settle(node: Broker): Promise<void> {
      const sent = inbox(node).of(SENTINEL).length + 1;
      assert.equal(await node.publish(SENTINEL, { node: node.nodeId }), 1);
      await inbox(node).until(SENTINEL, sent);
    }

    it('delivers an emit from one node to the node holding its route', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      const eventData = { recipientId: 7, status: 'shipped', lines: [{ sku: 'x', n: 2 }] };
      assert.equal(await b.publish('orders', eventData), 1);
      const [delivery] = await inbox(a).until('orders', 1);
      assert.deepEqual(delivery, { event: 'orders', eventData });
    });

    it('does not deliver to nodes without the route', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      assert.equal(await b.publish('orders', { recipientId: 7 }), 1);
      await inbox(a).until('orders', 1);
      await settle(b);
      await settle(c);
      assert.deepEqual(inbox(b).of('orders'), []);
      assert.deepEqual(inbox(c).of('orders'), []);
    });

    it('publishes an emit whose values nobody holds to no node', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      assert.equal(await b.publish('orders', { recipientId: 99 }), 0);
      assert.equal(await b.publish('orders', { other: 7 }), 0);
      assert.equal(await b.publish('unrouted', { recipientId: 7 }), 0);
      await settle(a);
      assert.deepEqual(inbox(a).of('orders'), []);
    });

    it('publishes once to each node holding the route', async () => {
      const route = routeOf('orders', { recipientId: 7 });
      await a.addRoute(route);
      await c.addRoute(route);
      assert.equal(await b.publish('orders', { recipientId: 7 }), 2);
      await inbox(a).until('orders', 1);
      await inbox(c).until('orders', 1);
      await Promise.all([settle(a), settle(b), settle(c)]);
      assert.equal(inbox(a).of('orders').length, 1);
      assert.equal(inbox(c).of('orders').length, 1);
      assert.equal(inbox(b).of('orders').length, 0);
    });

    it('a shape that appears between two emits is found by the second, and one that left is not used', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      assert.equal(await b.publish('orders', { recipientId: 7, shop: 's1' }), 1);
      const byShop = routeOf('orders', { shop: 's1' });
      await c.addRoute(byShop);
      assert.equal(await b.publish('orders', { recipientId: 7, shop: 's1' }), 2);
      await c.removeRoute(byShop);
      await a.removeRoute(routeOf('orders', { recipientId: 7 }));
      assert.equal(await b.publish('orders', { recipientId: 7, shop: 's1' }), 0);
      await inbox(a).until('orders', 2);
      await inbox(c).until('orders', 1);
    });

    it('a broadcast route gets every emit of its event', async () => {
      await a.addRoute(routeOf('news', undefined));
      assert.equal(await b.publish('news', { headline: 'one' }), 1);
      assert.equal(await c.publish('news', {}), 1);
      assert.equal(await a.publish('news', { recipientId: 3 }), 1);
      const got = await inbox(a).until('news', 3);
      assert.deepEqual(
        got.map((delivery) => delivery.eventData),
        [{ headline: 'one' }, {}, { recipientId: 3 }],
      );
      assert.equal(await b.publish('other-news', {}), 0);
    });

    it('an emit matching several routes on one node is published to it once', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      await a.addRoute(routeOf('orders', undefined));
      await a.addRoute(routeOf('orders', { recipientId: 7, country: 'India' }));
      assert.equal(await b.publish('orders', { recipientId: 7, country: 'India' }), 1);
      await inbox(a).until('orders', 1);
      await settle(a);
      assert.equal(inbox(a).of('orders').length, 1);
    });

    it('removeRoute stops delivery to that node only', async () => {
      const route = routeOf('orders', { recipientId: 7 });
      await a.addRoute(route);
      await c.addRoute(route);
      await a.removeRoute(route);
      assert.equal(await b.publish('orders', { recipientId: 7 }), 1);
      await inbox(c).until('orders', 1);
      await c.removeRoute(route);
      assert.equal(await b.publish('orders', { recipientId: 7 }), 0);
      await Promise.all([settle(a), settle(c)]);
      assert.equal(inbox(a).of('orders').length, 0);
      assert.equal(inbox(c).of('orders').length, 1);
    });

    it('close() of one node leaves the route to the other nodes holding it', async () => {
      const route = routeOf('orders', { recipientId: 7 });
      await a.addRoute(route);
      await c.addRoute(route);
      await a.close();
      assert.equal(await b.publish('orders', { recipientId: 7 }), 1);
      await inbox(c).until('orders', 1);
      await c.removeRoute(route);
      assert.equal(await b.publish('orders', { recipientId: 7 }), 0);
    });

    it('a multi-field route matches only when every field matches', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7, country: 'India' }));
      assert.equal(await b.publish('orders', { recipientId: 7 }), 0);
      assert.equal(await b.publish('orders', { recipientId: 7, country: 'Peru' }), 0);
      assert.equal(await b.publish('orders', { recipientId: 8, country: 'India' }), 0);
      assert.equal(await b.publish('orders', { recipientId: { nested: 7 }, country: 'India' }), 0);
      assert.equal(await b.publish('orders', { country: 'India', recipientId: 7, extra: true }), 1);
      const [delivery] = await inbox(a).until('orders', 1);
      await settle(a);
      assert.equal(inbox(a).of('orders').length, 1);
      assert.deepEqual(delivery?.eventData, { country: 'India', recipientId: 7, extra: true });
    });

    it('matches criteria on the string form of scalars: 2 and "2" meet', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 2 }));
      await c.addRoute(routeOf('orders', { recipientId: '3', paid: true }));
      assert.equal(await b.publish('orders', { recipientId: '2' }), 1);
      assert.equal(await b.publish('orders', { recipientId: 3, paid: 'true' }), 1);
      await inbox(a).until('orders', 1);
      await inbox(c).until('orders', 1);
    });

    it('close() forgets the node\'s routes', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      await a.addRoute(routeOf('news', undefined));
      await a.close();
      assert.equal(await b.publish('orders', { recipientId: 7 }), 0);
      assert.equal(await b.publish('news', {}), 0);
      assert.equal(await b.publish(SENTINEL, { node: a.nodeId }), 0);
    });

    it('broadcast reaches every live node, this one included, and answers their ids', async () => {
      const told = await b.broadcast('{"hello":"fleet"}');
      assert.deepEqual([...told].sort(), [a.nodeId, b.nodeId, c.nodeId].sort());
      for (const node of [a, b, c]) assert.deepEqual((await inbox(node).until(CONTROL, 1)).map((d) => d.eventData.message), ['{"hello":"fleet"}']);
    });

    it('sendTo reaches that node only, and a node itself', async () => {
      await b.sendTo(c.nodeId, 'to c');
      await b.sendTo(b.nodeId, 'to b');
      await inbox(c).until(CONTROL, 1);
      await inbox(b).until(CONTROL, 1);
      await Promise.all([settle(a), settle(b), settle(c)]);
      assert.deepEqual(inbox(a).controls(), []);
      assert.deepEqual(inbox(b).controls(), ['to b']);
      assert.deepEqual(inbox(c).controls(), ['to c']);
    });

    it('a control message is never taken for an emit, and one node\'s messages keep their order with its emits', async () => {
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      const lookalike = `orders\n${JSON.stringify({ recipientId: 7 })}`;
      await b.sendTo(a.nodeId, lookalike);
      assert.equal(await b.publish('orders', { recipientId: 7, n: 1 }), 1);
      await b.sendTo(a.nodeId, '');
      await inbox(a).until(CONTROL, 2);
      const order = inbox(a).received.filter((d) => d.event !== SENTINEL).map((d) => (d.event === CONTROL ? `control:${String(d.eventData.message)}` : d.event));
      assert.deepEqual(order, [`control:${lookalike}`, 'orders', 'control:']);
    });

    it('a closed node is no longer among the nodes a broadcast reaches', async () => {
      await a.close();
      const told = await b.broadcast('after a left');
      assert.deepEqual([...told].sort(), [b.nodeId, c.nodeId].sort());
    });

    it('liveNodes answers every live node, this one included, and no closed one', async () => {
      assert.deepEqual([...(await b.liveNodes())].sort(), [a.nodeId, b.nodeId, c.nodeId].sort());
      await c.close();
      assert.deepEqual([...(await b.liveNodes())].sort(), [a.nodeId, b.nodeId].sort());
    });

    it('a canary reaches the node it is sent to, this one included, and is never taken for an emit or a control message', async () => {
      const lookalike = `orders\n${JSON.stringify({ recipientId: 7 })}`;
      await a.addRoute(routeOf('orders', { recipientId: 7 }));
      await a.sendCanary(a.nodeId, 'ping,a,1');
      await b.sendCanary(a.nodeId, lookalike);
      await b.sendCanary(c.nodeId, 'ping,b,1');
      await inbox(a).until(CANARY, 2);
      await inbox(c).until(CANARY, 1);
      await Promise.all([settle(a), settle(b), settle(c)]);
      assert.deepEqual(inbox(a).canaries(), ['ping,a,1', lookalike]);
      assert.deepEqual(inbox(c).canaries(), ['ping,b,1']);
      assert.deepEqual(inbox(b).canaries(), []);
      for (const node of [a, b, c]) assert.deepEqual([inbox(node).of('orders'), inbox(node).controls()], [[], []]);
    });

    it('status records: each live node\'s last one is read by every node; a closed node\'s is gone', async () => {
      await a.putStatus('{"n":"a","v":1}');
      await a.putStatus('{"n":"a","v":2}');
      await b.putStatus('{"n":"b"}');
      assert.deepEqual(new Map(await c.fleetStatus()), new Map([[a.nodeId, '{"n":"a","v":2}'], [b.nodeId, '{"n":"b"}']]));
      await a.close();
      assert.deepEqual(new Map(await c.fleetStatus()), new Map([[b.nodeId, '{"n":"b"}']]));
    });

    it('revocations: stored for every node, a later one wins, and old ones are forgotten at the next write', async () => {
      const now = Date.now();
      const day = 86_400_000;
      await a.revoke('person:customers:NICK', now - 5000, day);
      await a.revoke('apiUser:bench', now - 100_000, day);
      await b.revoke('person:customers:NICK', now, day);
      await b.revoke('person:customers:NICK', now - 1000, day);
      const sorted = (list: ReadonlyArray<readonly [string, number]>) => [...list].sort(([x], [y]) => x.localeCompare(y));
      assert.deepEqual(sorted(await c.revocations(0)), [['apiUser:bench', now - 100_000], ['person:customers:NICK', now]]);
      assert.deepEqual(await c.revocations(now - 50_000), [['person:customers:NICK', now]]);
      // A write forgets what is older than its keepMs: the API user's revocation, 100 s old, against 60 s.
      await c.revoke('person:customers:ED', now, 60_000);
      assert.deepEqual(sorted(await a.revocations(0)), [['person:customers:ED', now], ['person:customers:NICK', now]]);
    });

    describe('events with history', () => historyContract({ brokers: () => [a, b, c], inbox }));
    describe('idempotency keys', () => onceContract({ brokers: () => [a, b, c], inbox }));
  });
}
