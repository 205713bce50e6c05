/**
 * The SDK's typed subscriptions, its connect timeout and its liveness check, against a real node; the silent path is
 * a TCP relay in front of the node whose open connections can be frozen (nothing forwarded either way), as a dead
 * network path looks to both ends.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { createClient, HeraldClient, HeraldError, type Notification } from '../src/index.ts';
import { settingsOf } from '../src/options.ts';
import { apiToken, emit, next, personToken, startNode, type Node } from './support.ts';

interface Events {
  'order-updates': { recipientId: number; status: string };
  announcements: { title: string };
}

let node: Node;
let tokens: { apiToken: string; personToken: string };

before(async () => {
  node = await startNode();
  tokens = { apiToken: await apiToken(node), personToken: await personToken(node) };
});
after(() => node.gateway.close());

test('subscribe: each callback gets its own subscription\'s notifications, typed by event name; unsubscribe stops it', async () => {
  const client = createClient<Events>({ url: node.ws, ...tokens });
  await client.connect();
  const orders: Notification<Events>[] = [];
  const titles: string[] = [];
  const order = await client.subscribe('order-updates', { recipientId: 2 }, (n) => orders.push(n));
  const gotTitle = Promise.withResolvers<void>();
  const news = await client.subscribe('announcements', undefined, (n) => {
    titles.push(n.eventData.title);
    gotTitle.resolve();
  });
  const gotOrder = next(client, 'notification', (n) => n.apiName === 'order-updates');
  await emit(node, 'order-updates', { recipientId: 2, status: 'shipped' });
  await emit(node, 'announcements', { title: 'maintenance at 22:00' });
  await Promise.all([gotOrder, gotTitle.promise]);
  assert.deepEqual(orders.map((n) => [n.eventId, n.apiName, n.eventData]), [[order.eventId, 'order-updates', { recipientId: 2, status: 'shipped' }]]);
  assert.deepEqual(titles, ['maintenance at 22:00']);
  assert.equal(typeof order.offset, 'number', 'order-updates keeps a history: the subscription has its position');
  await news.unsubscribe();
  const sentinel = next(client, 'notification', (n) => n.apiName === 'order-updates');
  await emit(node, 'announcements', { title: 'after unsubscribe' });
  await emit(node, 'order-updates', { recipientId: 2, status: 'delivered' });
  await sentinel;
  assert.deepEqual(titles, ['maintenance at 22:00']);
  await client.close();
});

test('subscribe rejects with the node\'s errors when it refuses the entry', async () => {
  const client = await HeraldClient.connect({ url: node.ws, ...tokens });
  await assert.rejects(client.subscribe('order-updates', { recipientId: 3 }, () => {}), (error: HeraldError) => error.errors[0]?.code === 'CRITERIA_NOT_YOURS');
  await client.close();
});

test('connectTimeoutMs: an address that takes the TCP connection and never answers the upgrade fails the attempt as dropped (1006)', async () => {
  const held: Socket[] = [];
  const silent = createServer((socket) => void held.push(socket));
  const port = await listen(silent);
  const started = performance.now();
  const client = new HeraldClient({ url: `ws://127.0.0.1:${port}`, apiToken: 'x', connectTimeoutMs: 300 });
  await assert.rejects(client.connect(), (error: HeraldError) => error.closeCode === 1006 && /no CONNECTED within 300 ms/.test(error.message));
  assert.ok(performance.now() - started >= 290, 'not before the timeout');
  assert.equal(client.state, 'closed');
  for (const socket of held) socket.destroy();
  silent.close();
});

test('liveness: a connection that goes silent is dropped after the idle time and the probe\'s timeout, and the client reconnects', async () => {
  const relay = new Relay(node.gateway.ports!.clients);
  const port = await listen(relay.server);
  const client = await HeraldClient.connect({ url: `ws://127.0.0.1:${port}`, ...tokens, livenessIdleMs: 300, livenessTimeoutMs: 300, minDelayMs: 0, maxDelayMs: 50 });
  await client.register([{ apiName: 'order-updates', condition: { conditionType: 'RESPONSE', criteria: { recipientId: 2 } } }]);
  // While frames flow, nothing is dropped: the probes are answered (three idle periods pass here).
  const early = next(client, 'disconnected');
  const quiet = await Promise.race([early.then(() => 'dropped'), new Promise((resolve) => setTimeout(resolve, 1000, 'kept'))]);
  assert.equal(quiet, 'kept');
  const frozenAt = performance.now();
  relay.freeze();
  const dropped = await early;
  const waited = performance.now() - frozenAt;
  assert.equal(dropped.code, 1006);
  assert.match(dropped.reason, /no frame from the node within 300 ms of a probe/);
  assert.equal(dropped.willReconnect, true);
  assert.ok(waited >= 290 && waited < 5000, `dropped ${Math.round(waited)} ms after the path froze`);
  const back = await next(client, 'reconnected');
  assert.equal(back.registered.length, 1);
  const received = next(client, 'notification');
  await emit(node, 'order-updates', { recipientId: 2, status: 'after the drop' });
  assert.deepEqual((await received).eventData, { recipientId: 2, status: 'after the drop' });
  await client.close();
  relay.close();
});

test('options: timeouts within (0, 2^31 - 1] are taken, livenessIdleMs 0 turns the check off, anything else is refused', () => {
  const base = { url: 'ws://x', apiToken: 't' };
  const MAX = 2 ** 31 - 1;
  fc.assert(
    fc.property(fc.oneof(fc.integer({ min: -MAX, max: 2 * MAX }), fc.double(), fc.constant(Number.NaN)), (value) => {
      const valid = value > 0 && value <= MAX;
      if (valid) {
        assert.equal(settingsOf({ ...base, connectTimeoutMs: value }).timing.connectTimeoutMs, value);
        assert.equal(settingsOf({ ...base, livenessTimeoutMs: value }).timing.liveness?.timeoutMs, value);
      } else {
        assert.throws(() => settingsOf({ ...base, connectTimeoutMs: value }), RangeError);
        assert.throws(() => settingsOf({ ...base, livenessTimeoutMs: value }), RangeError);
      }
      if (value === 0) assert.equal(settingsOf({ ...base, livenessIdleMs: value }).timing.liveness, undefined);
      else if (valid) assert.deepEqual(settingsOf({ ...base, livenessIdleMs: value }).timing.liveness, { idleMs: value, timeoutMs: 10_000 });
      else assert.throws(() => settingsOf({ ...base, livenessIdleMs: value }), RangeError);
    }),
  );
  assert.deepEqual(settingsOf(base).timing, { connectTimeoutMs: 10_000, liveness: { idleMs: 30_000, timeoutMs: 10_000 } });
});

/** A TCP relay to a port; freeze() stops forwarding on the connections open now (new ones pass). */
class Relay {
  readonly server: Server;
  readonly #open = new Set<[Socket, Socket]>();
  readonly #frozen: Socket[] = [];

  constructor(port: number) {
    this.server = createServer((inbound) => {
      const outbound = tcpConnect(port, '127.0.0.1');
      const pair: [Socket, Socket] = [inbound, outbound];
      this.#open.add(pair);
      inbound.pipe(outbound).on('error', () => {});
      outbound.pipe(inbound).on('error', () => {});
      for (const socket of pair) socket.on('error', () => {}).on('close', () => this.#open.delete(pair));
    });
  }

  freeze(): void {
    for (const [inbound, outbound] of this.#open) {
      inbound.unpipe(outbound);
      outbound.unpipe(inbound);
      inbound.pause();
      outbound.pause();
      this.#frozen.push(inbound, outbound);
    }
    this.#open.clear();
  }

  close(): void {
    this.server.close();
    for (const socket of [...this.#frozen, ...[...this.#open].flat()]) socket.destroy();
  }
}

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return address.port;
}
