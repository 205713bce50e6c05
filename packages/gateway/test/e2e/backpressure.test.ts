/**
 * Backpressure on emits (emit.maxBacklogBytes, emit.whenBacklogged): clients that stop reading fill the node's
 * delivery backlog; past the bound an emit is refused (503 OVERLOADED, Retry-After), on the fast path and through
 * fastify alike, or waits, and once the clients read again emits are taken again. Real sockets on port 0.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MemoryBus } from '../../src/broker/memory.ts';
import { TestSocket, apiToken, emit, metric, onEvent, startNode, type HttpReply, type TestNode } from '../support/gateway.ts';
import { rawSubscriber, type RawClient } from '../support/raw-ws.ts';

/** Per client, so that a client that does not read is not shed before the slow ones together pass the bound. */
const MAX_BUFFERED = 4 * 1024 * 1024;
const MAX_BACKLOG = 2 * MAX_BUFFERED;
const SLOW_CLIENTS = 4;
const payload = 'x'.repeat(16 * 1024);

/** The lag bounds (lag.test.ts) past any test's length: clients that stop reading would pass them first. */
function backlogged(raw: Record<string, any>, whenBacklogged: string, emitFastPath = true): void {
  raw.server.emitFastPath = emitFastPath;
  raw.websocket = { maxBufferedBytes: MAX_BUFFERED, maxLagMs: 600_000 };
  raw.emit = { maxBacklogBytes: MAX_BACKLOG, whenBacklogged, maxLagMs: 300_000 };
}

async function backlogBytes(node: TestNode): Promise<number> {
  return (await metric(node, 'herald_delivery_backlog_bytes', { part: 'sockets' })) + (await metric(node, 'herald_delivery_backlog_bytes', { part: 'fan_out' }));
}

/** Clients of `announcements` that stop reading: the kernel's buffers fill, then the node's. */
async function slowClients(node: TestNode, api: string): Promise<RawClient[]> {
  const clients = await Promise.all(Array.from({ length: SLOW_CLIENTS }, () => rawSubscriber(node, api, onEvent('announcements'))));
  for (const client of clients) client.socket.pause();
  return clients;
}

for (const fastPath of [true, false]) {
  describe(`refuse, ${fastPath ? 'on the fast path' : 'through fastify'}`, () => {
    let node: TestNode;
    let api: string;
    before(async () => {
      node = await startNode((raw) => backlogged(raw, 'refuse', fastPath));
      api = await apiToken(node);
    });
    after(() => node.close());

    test('past the bound an emit is 503 OVERLOADED with Retry-After, counted; a reading client is served; drained, emits are taken again', async () => {
      const reader = await TestSocket.connect(node, api);
      await reader.register(onEvent('announcements'));
      const slow = await slowClients(node, api);
      let accepted = 0;
      let refused: HttpReply | undefined;
      let headers: Headers | undefined;
      while (refused === undefined) {
        assert.ok(accepted < 5000, 'the backlog never passed its bound');
        const response = await fetch(`${node.http}/api/system-api/bench/emit-event-ws`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-am-authorization': api },
          body: JSON.stringify({ name: 'announcements', eventData: { n: accepted, payload } }),
        });
        const reply: HttpReply = { status: response.status, body: await response.json() };
        if (reply.status === 200) accepted++;
        else [refused, headers] = [reply, response.headers];
      }
      assert.equal(refused.status, 503);
      assert.equal(headers?.get('retry-after'), '1');
      assert.equal(refused.body.errors[0].code, 'OVERLOADED');
      assert.equal(refused.body.statusCode, 503);
      assert.equal(await metric(node, 'herald_emits_refused_total', { reason: 'backlog' }), 1);
      assert.ok((await backlogBytes(node)) > MAX_BACKLOG, 'the gauge shows the backlog past its bound');
      // The reader was told of every emit taken, while the slow clients held the backlog.
      for (let n = 0; n < accepted; n++) assert.equal(((await reader.next('NOTIFICATION')).response.eventData as { n: number }).n, n);
      assert.equal(node.gateway.hub.sessions.size, SLOW_CLIENTS + 1, 'nobody was shed');
      // Still past the bound: still refused, and nothing of it reaches the reader.
      assert.equal((await emit(node, api, 'announcements', { refused: true })).status, 503);

      for (const client of slow) client.socket.resume();
      await node.gateway.hub.backlog.settled();
      const reply = await emit(node, api, 'announcements', { after: true });
      assert.equal(reply.status, 200);
      assert.deepEqual((await reader.next('NOTIFICATION')).response.eventData, { after: true });
      for (const client of slow) client.socket.destroy();
      await reader.close();
    });
  });
}

describe('wait', () => {
  let node: TestNode;
  let api: string;
  before(async () => {
    node = await startNode((raw) => {
      backlogged(raw, 'wait');
      // A fan-out of many turns: one write a turn.
      raw.websocket.fanOutChunk = 1;
    });
    api = await apiToken(node);
  });
  after(() => node.close());

  test("an emit is answered only once its fan-out is handed to the sockets", async () => {
    const client = await TestSocket.connect(node, api);
    // 50 subscriptions (each its own select) of one client: 50 writes, one a turn of the event loop.
    const entries = Array.from({ length: 50 }, (_, i) => onEvent('announcements', undefined, { select: [`f${i}`] }));
    await client.register(...entries);
    const before = await metric(node, 'herald_notifications_out_total');
    assert.equal((await emit(node, api, 'announcements', { f0: 1 })).status, 200);
    assert.equal((await metric(node, 'herald_notifications_out_total')) - before, 50, 'answered before its fan-out was written');
    await client.close();
  });

  test('past the bound an emit is taken, and answered once the backlog is within its bound again; never refused', async () => {
    const slow = await slowClients(node, api);
    const { backlog } = node.gateway.hub;
    let held: Promise<HttpReply> | undefined;
    // One emit at a time, each answered, until one is not: its fan-out took the backlog past the bound.
    for (let sent = 0; held === undefined; sent++) {
      assert.ok(sent < 5000, 'the backlog never passed its bound');
      let answered = false;
      const reply = emit(node, api, 'announcements', { payload }).then((each) => ((answered = true), each));
      while (!answered && !backlog.over) await new Promise(setImmediate);
      if (answered) assert.equal((await reply).status, 200);
      else held = reply;
    }
    assert.ok((await backlogBytes(node)) > MAX_BACKLOG);
    let answered = false;
    void held.then(() => (answered = true));
    // The slow clients read nothing: turns of the event loop go by, and the emit stays unanswered.
    for (let turn = 0; turn < 100; turn++) await new Promise(setImmediate);
    assert.equal(answered, false, 'answered while the backlog was past its bound');
    // Another emit now is taken too (it fans out past the bound: counted), and waits as well.
    const next = emit(node, api, 'announcements', { payload });
    for (const client of slow) client.socket.resume();
    assert.deepEqual([(await held).status, (await next).status], [200, 200]);
    assert.equal(await metric(node, 'herald_emits_refused_total', { reason: 'backlog' }), 0);
    assert.equal(await metric(node, 'herald_deliveries_over_backlog_total'), 1);
    for (const client of slow) client.socket.destroy();
  });
});

describe('a fleet: each node refuses on its own backlog only', () => {
  let a: TestNode;
  let b: TestNode;
  let api: string;
  before(async () => {
    // Two nodes on one in-process bus: an emit on A for B's clients reaches B as a Redis fleet's would.
    const bus = new MemoryBus();
    a = await startNode((raw) => backlogged(raw, 'refuse'), { broker: bus.broker('a') });
    b = await startNode((raw) => backlogged(raw, 'refuse'), { broker: bus.broker('b') });
    api = await apiToken(a);
  });
  after(async () => {
    await a.close();
    await b.close();
  });

  test("an emit on A past B's bound is taken by A, and B fans it out and counts it; on B it is refused", async () => {
    const client = await TestSocket.connect(b, api);
    await client.register(onEvent('announcements'));
    const held = b.gateway.hub.backlog;
    // B's backlog held past its bound by fan-out bytes counted and never written.
    held.fanOutBytes += held.bound + 1;
    try {
      assert.equal((await emit(a, api, 'announcements', { via: 'a' })).status, 200);
      assert.deepEqual((await client.next('NOTIFICATION')).response.eventData, { via: 'a' });
      assert.equal(await metric(b, 'herald_deliveries_over_backlog_total'), 1);
      assert.equal(await metric(a, 'herald_deliveries_over_backlog_total'), 0);
      const refused = await emit(b, api, 'announcements', { via: 'b' });
      assert.equal(refused.status, 503);
      assert.equal(refused.body.errors[0].code, 'OVERLOADED');
    } finally {
      held.fanOutBytes -= held.bound + 1;
    }
    await client.close();
  });
});
