/** Emit over HTTP, delivery over WebSocket: exactly the right people, every tab, and nothing after leaving. */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import {
  TestSocket,
  apiToken,
  emit,
  metric,
  onEvent,
  personToken,
  sampleCount,
  startNode,
  type TestNode,
} from '../support/gateway.ts';

let node: TestNode;
let api: string;
let open: TestSocket[] = [];

before(async () => {
  node = await startNode((raw) => {
    raw.apiUsers.viewer = { password: 'viewer-password', groups: ['viewers'] };
    raw.events['viewers-news'] = { groups: { register: ['viewers'], emit: ['bench'] } };
  });
  api = await apiToken(node);
});
after(() => node.close());
beforeEach(async () => {
  await Promise.all(open.map((client) => client.close()));
  open = [];
});

/** A connected person with their order-updates registered. */
async function tab(first: string, last: string, recipientId: string): Promise<TestSocket> {
  const client = await TestSocket.connect(node, api, await personToken(node, first, last));
  open.push(client);
  const reply = await client.register(onEvent('order-updates', { recipientId }));
  assert.equal(reply.validOnEvents.length, 1, JSON.stringify(reply));
  return client;
}

describe('per-person notifications', () => {
  test('reach both tabs of the person, and nobody else', async () => {
    const nick = [await tab('NICK', 'WAHLBERG', '2'), await tab('NICK', 'WAHLBERG', '2')];
    const ed = [await tab('ED', 'CHASE', '3'), await tab('ED', 'CHASE', '3')];
    const sent = await emit(node, api, 'order-updates', { recipientId: '2', orderId: 1001, status: 'shipped' });
    assert.deepEqual(sent, { status: 200, body: { success: true, statusCode: 200, data: { name: 'order-updates', nodes: 1 } } });
    for (const client of nick) {
      const { response } = await client.next('NOTIFICATION');
      assert.equal(response.eventType, 'CUSTOM_WS_EVENTS');
      assert.deepEqual(response.eventData, { recipientId: '2', orderId: 1001, status: 'shipped' });
    }
    // Ed's tabs get their own notification next; had Nick's reached them, it would be first in line.
    await emit(node, api, 'order-updates', { recipientId: 3, orderId: 1002 });
    for (const client of ed) {
      const { response } = await client.next('NOTIFICATION');
      assert.equal(response.eventData && (response.eventData as { orderId: number }).orderId, 1002);
      assert.equal(client.frames.length, 0);
    }
    for (const client of nick) assert.equal(client.frames.length, 0);
  });

  test('a notification for nobody is accepted and delivered nowhere', async () => {
    const nick = await tab('NICK', 'WAHLBERG', '2');
    const sent = await emit(node, api, 'order-updates', { recipientId: '99' });
    assert.equal(sent.body.data.nodes, 0);
    await emit(node, api, 'order-updates', { recipientId: '2', n: 'sentinel' });
    assert.deepEqual((await nick.next('NOTIFICATION')).response.eventData, { recipientId: '2', n: 'sentinel' });
  });

  test('UNREGISTER and disconnect stop delivery', async () => {
    const stays = await tab('NICK', 'WAHLBERG', '2');
    const leaves = await tab('NICK', 'WAHLBERG', '2');
    const closes = await tab('NICK', 'WAHLBERG', '2');
    const eventId = (await leaves.register(onEvent('order-updates', { recipientId: '2' }))).validOnEvents[0]?.eventId;
    leaves.send({ objType: 'UNREGISTER', onEvents: [{ eventId }] });
    await leaves.next('UNREGISTER');
    await leaves.register(onEvent('announcements'));
    await closes.close();
    await emit(node, api, 'order-updates', { recipientId: '2', n: 1 });
    await emit(node, api, 'announcements', { n: 2 });
    assert.deepEqual((await stays.next('NOTIFICATION')).response.eventData, { recipientId: '2', n: 1 });
    // Frames on one socket keep their order: had the order update still reached `leaves`, it would come first.
    assert.deepEqual((await leaves.next('NOTIFICATION')).response.eventData, { n: 2 });
    assert.equal(leaves.frames.length, 0);
    assert.equal(node.gateway.hub.sessions.size, 2);
  });
});

describe('broadcasts', () => {
  test('reach every subscriber, with or without a person token; select and getEventData shape the data', async () => {
    const full = await TestSocket.connect(node, api, await personToken(node, 'NICK', 'WAHLBERG'));
    const anonymous = await TestSocket.connect(node, api);
    const selected = await TestSocket.connect(node, api);
    const bare = await TestSocket.connect(node, api);
    open.push(full, anonymous, selected, bare);
    const ids = [
      (await full.register(onEvent('announcements'))).validOnEvents[0]?.eventId,
      (await anonymous.register(onEvent('announcements'))).validOnEvents[0]?.eventId,
      (await selected.register(onEvent('announcements', undefined, { select: 'title' }))).validOnEvents[0]?.eventId,
      (await bare.register(onEvent('announcements', undefined, { getEventData: false }))).validOnEvents[0]?.eventId,
    ];
    assert.equal(ids[0], ids[1], 'the same registration shares an eventId');
    assert.equal(new Set(ids).size, 3);
    const eventData = { title: 'maintenance at 22:00', body: 'an hour' };
    assert.equal((await emit(node, api, 'announcements', eventData)).body.data.nodes, 1);
    assert.deepEqual((await full.next('NOTIFICATION')).response, { eventId: ids[0], eventType: 'CUSTOM_WS_EVENTS', eventData });
    assert.deepEqual((await anonymous.next('NOTIFICATION')).response.eventData, eventData);
    assert.deepEqual((await selected.next('NOTIFICATION')).response.eventData, { title: 'maintenance at 22:00' });
    assert.deepEqual((await bare.next('NOTIFICATION')).response, { eventId: ids[3], eventType: 'CUSTOM_WS_EVENTS' });
  });

  test('criteria on a broadcast event filter it; all fields must match', async () => {
    const eu = await TestSocket.connect(node, api);
    open.push(eu);
    await eu.register(onEvent('announcements', { region: 'EU', tier: 1 }));
    await emit(node, api, 'announcements', { region: 'EU', tier: 2, n: 'wrong tier' });
    await emit(node, api, 'announcements', { region: 'US', tier: 1, n: 'wrong region' });
    await emit(node, api, 'announcements', { region: 'EU', tier: '1', n: 'match' });
    assert.equal(((await eu.next('NOTIFICATION')).response.eventData as { n: string }).n, 'match');
    assert.equal(eu.frames.length, 0);
  });
});

describe('emit refusals', () => {
  test('no token 401, wrong group 403, unknown event 404, wrong body 400 naming the field', async () => {
    const viewer = await apiToken(node, 'viewer', 'viewer-password');
    const url = `${node.http}/api/system-api/bench/emit-event-ws`;
    const cases: Array<[Promise<{ status: number; body: any }>, number, string, RegExp?]> = [
      [fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then(async (r) => ({ status: r.status, body: await r.json() })), 401, 'TOKEN_MISSING'],
      [emit(node, 'garbage', 'announcements', {}), 401, 'TOKEN_INVALID'],
      [emit(node, viewer, 'viewers-news', {}), 403, 'EVENT_FORBIDDEN'],
      [emit(node, api, 'no-such-event', {}), 404, 'UNKNOWN_EVENT'],
      [emit(node, api, 'announcements', 'not an object'), 400, 'BAD_REQUEST', /eventData/],
      [emit(node, api, '', {}), 400, 'BAD_REQUEST', /name/],
    ];
    for (const [reply, status, code, message] of cases) {
      const { status: got, body } = await reply;
      assert.equal(got, status, code);
      assert.deepEqual([body.success, body.statusCode, body.errors[0].code], [false, status, code]);
      if (message) assert.match(body.errors[0].message, message);
    }
  });
});

describe('metrics', () => {
  test('count connections, subscriptions, emits and notifications out', async () => {
    const emitted = { route: '/api/system-api/bench/emit-event-ws', status: '200' };
    const base = {
      out: await metric(node, 'herald_notifications_out_total'),
      emits: await metric(node, 'herald_emits_total', { event: 'order-updates' }),
      fanOuts: await sampleCount(node, 'herald_fanout_duration_seconds'),
      answered: await metric(node, 'herald_http_responses_total', emitted),
    };
    const nick = await tab('NICK', 'WAHLBERG', '2');
    await tab('NICK', 'WAHLBERG', '2');
    assert.equal(await metric(node, 'herald_connections'), 2);
    assert.equal(await metric(node, 'herald_subscriptions'), 2);
    assert.equal(await metric(node, 'herald_routes'), 1);
    await emit(node, api, 'order-updates', { recipientId: '2' });
    await nick.next('NOTIFICATION');
    assert.equal(await metric(node, 'herald_notifications_out_total'), base.out + 2);
    assert.equal(await metric(node, 'herald_emits_total', { event: 'order-updates' }), base.emits + 1);
    // One fan-out timed (two recipients, one emit); the emit's answer counted on the fast path (Node's fetch).
    assert.equal(await sampleCount(node, 'herald_fanout_duration_seconds'), base.fanOuts + 1);
    assert.equal(await metric(node, 'herald_http_responses_total', emitted), base.answered + 1);
    const text = await (await fetch(`${node.http}/metrics`)).text();
    assert.match(text, /^herald_connections 2$/m);
    assert.match(text, /^herald_ready 1$/m);
    // prom-client's defaults under their stock names, for stock dashboards.
    assert.match(text, /^nodejs_eventloop_lag_p99_seconds /m);
    assert.match(text, /^process_cpu_seconds_total /m);
    assert.doesNotMatch(text, /^herald_(nodejs|process)_(?!max_resident)/m);
    // Open files counted without listing them; no gauge that lists every handle on each scrape.
    const openFds = await metric(node, 'process_open_fds');
    assert.ok(openFds >= 2, `process_open_fds counts at least the two sockets: ${openFds}`);
    assert.doesNotMatch(text, /^nodejs_active_(handles|resources)/m);
  });
});
