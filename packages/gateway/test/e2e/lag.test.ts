/**
 * The delivery-lag bounds (emit.maxLagMs, websocket.maxLagMs): a connection written enough is probed with a ping behind
 * its data, and the pong's delay is how far behind it is, whatever the kernel holds. Clients that stop reading (their
 * `ws` socket paused, so that it answers the probe once it reads again) make the node refuse emits while most of its
 * busy connections are behind, and take them again once they caught up; one slow reader alone is closed with 1013 and
 * holds back nobody. Real sockets on port 0.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TestSocket, apiToken, emit, metric, onEvent, sampleCount, startNode, type HttpReply, type RawConfig, type TestNode } from '../support/gateway.ts';
import { until } from '../support/fleet.ts';
import { PROBE_AFTER_BYTES } from '../../src/hub/lag.ts';

const EMIT_LAG_MS = 100;
/** One emit of it takes each subscriber past the bytes after which it is probed. */
const payload = 'x'.repeat(PROBE_AFTER_BYTES + 1024);

function lagBounds(connectionLagMs: number, whenBacklogged = 'refuse'): (raw: RawConfig) => void {
  return (raw) => {
    raw.websocket = { maxLagMs: connectionLagMs };
    raw.emit = { maxLagMs: EMIT_LAG_MS, whenBacklogged };
  };
}

async function subscribers(node: TestNode, api: string, count: number): Promise<TestSocket[]> {
  const clients = await Promise.all(Array.from({ length: count }, () => TestSocket.connect(node, api)));
  await Promise.all(clients.map((client) => client.register(onEvent('announcements'))));
  return clients;
}

describe('refuse', () => {
  let node: TestNode;
  let api: string;
  before(async () => {
    node = await startNode(lagBounds(60_000));
    api = await apiToken(node);
  });
  after(() => node.close());

  test('while most busy connections are behind, emits are 503 OVERLOADED (counted, lag); once they read again, taken', async () => {
    const [reader, ...slow] = await subscribers(node, api, 3);
    for (const client of slow) client.socket.pause();
    const { lag } = node.gateway.hub;
    assert.equal((await emit(node, api, 'announcements', { payload })).status, 200);
    await until(async () => lag.lagging === 2 && lag.over, 'the paused clients behind');
    const refused = await emit(node, api, 'announcements', { refused: true });
    assert.equal(refused.status, 503);
    assert.equal(refused.body.errors[0].code, 'OVERLOADED');
    assert.match(refused.body.errors[0].message, /behind/);
    assert.equal(await metric(node, 'herald_emits_refused_total', { reason: 'lag' }), 1);
    assert.equal(await metric(node, 'herald_lagging_connections'), 2);
    assert.equal(((await reader!.next('NOTIFICATION')).response.eventData as { payload: string }).payload, payload, 'the reader was served');

    for (const client of slow) client.socket.resume();
    await lag.settled();
    assert.equal((await emit(node, api, 'announcements', { after: true })).status, 200);
    assert.deepEqual((await reader!.next('NOTIFICATION')).response.eventData, { after: true });
    for (const client of slow) {
      assert.equal(((await client.next('NOTIFICATION')).response.eventData as { payload: string }).payload, payload);
      assert.deepEqual((await client.next('NOTIFICATION')).response.eventData, { after: true });
    }
    assert.equal(node.gateway.hub.sessions.size, 3, 'nobody was closed');
    assert.equal(await metric(node, 'herald_slow_clients_closed_total', { reason: 'lag' }), 0);
    assert.ok((await sampleCount(node, 'herald_delivery_lag_seconds')) >= 3, 'every probe answered was observed');
    await Promise.all([reader, ...slow].map((client) => client!.close()));
  });
});

describe('one slow reader', () => {
  let node: TestNode;
  let api: string;
  before(async () => {
    node = await startNode(lagBounds(1000));
    api = await apiToken(node);
  });
  after(() => node.close());

  test('is closed with 1013 once further behind than websocket.maxLagMs, counted; the others are served meanwhile', async () => {
    const [reader, slow] = await subscribers(node, api, 2);
    slow!.socket.pause();
    const { lag } = node.gateway.hub;
    assert.equal((await emit(node, api, 'announcements', { payload })).status, 200);
    await until(async () => lag.lagging === 1, 'the paused client behind');
    assert.equal(lag.over, false, 'one of two behind is not most');
    assert.equal((await emit(node, api, 'announcements', { meanwhile: true })).status, 200);
    await reader!.next('NOTIFICATION');
    assert.deepEqual((await reader!.next('NOTIFICATION')).response.eventData, { meanwhile: true });

    await until(async () => (await metric(node, 'herald_slow_clients_closed_total', { reason: 'lag' })) === 1, 'the slow client closed');
    slow!.socket.resume();
    const { code, reason } = await slow!.closed;
    assert.equal(code, 1013);
    assert.match(reason, /slow client: \d+ ms behind/);
    await until(async () => (await metric(node, 'herald_connections_closed_total', { code: '1013' })) === 1, 'the close counted');
    assert.equal(node.gateway.hub.sessions.size, 1);
    assert.equal(lag.lagging, 0);
    await reader!.close();
  });
});

describe('wait', () => {
  let node: TestNode;
  let api: string;
  before(async () => {
    node = await startNode(lagBounds(60_000, 'wait'));
    api = await apiToken(node);
  });
  after(() => node.close());

  test('while most busy connections are behind, an emit is published, and answered once they caught up', async () => {
    const [slow] = await subscribers(node, api, 1);
    slow!.socket.pause();
    const { lag } = node.gateway.hub;
    assert.equal((await emit(node, api, 'announcements', { payload })).status, 200);
    await until(async () => lag.over, 'the paused client behind');
    const emitted = await metric(node, 'herald_emits_total', { event: 'announcements' });
    let answered = false;
    const held: Promise<HttpReply> = emit(node, api, 'announcements', { held: true }).then((reply) => ((answered = true), reply));
    await until(async () => (await metric(node, 'herald_emits_total', { event: 'announcements' })) > emitted, 'the emit published');
    assert.equal(answered, false, 'answered while the node was behind');
    slow!.socket.resume();
    assert.equal((await held).status, 200);
    await slow!.next('NOTIFICATION');
    assert.deepEqual((await slow!.next('NOTIFICATION')).response.eventData, { held: true });
    assert.equal(await metric(node, 'herald_emits_refused_total', { reason: 'lag' }), 0);
    await slow!.close();
  });
});
