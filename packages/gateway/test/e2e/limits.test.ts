/** The bounds that protect a node from one client: unsent data, and peers that stop answering pings. */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { TestSocket, apiToken, emit, metric, onEvent, startNode, type TestNode } from '../support/gateway.ts';
import { rawSubscriber } from '../support/raw-ws.ts';

let node: TestNode;
let api: string;

before(async () => {
  node = await startNode((raw) => {
    raw.websocket = { maxBufferedBytes: 64 * 1024 };
  });
  api = await apiToken(node);
});
after(() => node.close());

test('a client that stops reading is closed with 1013 once its unsent data passes the bound, and counted', async () => {
  const slow = await rawSubscriber(node, api, onEvent('announcements'));
  const reader = await TestSocket.connect(node, api);
  await reader.register(onEvent('announcements'));
  // The raw socket no longer reads: the kernel buffers fill, then the node's send buffer grows.
  slow.socket.pause();
  const payload = 'x'.repeat(60 * 1024);
  let sent = 0;
  while ((await metric(node, 'herald_notifications_dropped_total', { reason: 'slow_client' })) === 0) {
    assert.ok(++sent < 2000, 'the slow client was never shed');
    await emit(node, api, 'announcements', { payload });
    await reader.next('NOTIFICATION');
  }
  assert.equal(node.gateway.hub.sessions.size, 1, 'the hub let go of the slow client at once');
  // Once it reads again, it finds the close frame: 1013 (0x03f5) and the reason, behind the data it did not read.
  slow.socket.resume();
  await slow.readUntil(Buffer.concat([Buffer.from([0x03, 0xf5]), Buffer.from('slow client')]));
  slow.socket.destroy();
  // The reader kept up and is still served.
  await emit(node, api, 'announcements', { after: true });
  assert.deepEqual((await reader.next('NOTIFICATION')).response.eventData, { after: true });
  await reader.close();
});

test('a client that does not answer pings is closed; one that answers stays', async () => {
  // A node of its own: the raw client of the test above never answers pings either.
  const pinging = await startNode((raw) => {
    raw.websocket = { pingIntervalMs: 150 };
  });
  const silent = TestSocket.open(pinging, api, undefined, { autoPong: false });
  const lively = await TestSocket.connect(pinging, api);
  await silent.next('CONNECTED');
  const [pings] = await Promise.all([pingTimes(lively, 4), silent.closed]);
  assert.equal(pings.length, 4);
  assert.equal(lively.socket.readyState, lively.socket.OPEN);
  assert.equal(await metric(pinging, 'herald_ping_timeouts_total'), 1);
  await lively.close();
  await pinging.close();
});

test('pings are spread over the interval, each client pinged once an interval', async () => {
  // Ten ticks of 100 ms: ten clients are pinged one a tick, not ten in one burst (which, at 10,000 clients, held
  // every other write of the node back).
  const pinging = await startNode((raw) => {
    raw.websocket = { pingIntervalMs: 1000 };
  });
  const clients = await Promise.all(Array.from({ length: 10 }, () => TestSocket.connect(pinging, api)));
  try {
    const times = await Promise.all(clients.map((client) => pingTimes(client, 2)));
    const firsts = times.map(([first]) => first!);
    assert.ok(Math.max(...firsts) - Math.min(...firsts) >= 500, `first pings within ${Math.max(...firsts) - Math.min(...firsts)} ms`);
    for (const [first, second] of times) {
      const gap = second! - first!;
      assert.ok(gap >= 800 && gap <= 2000, `pinged again after ${gap} ms, not about an interval`);
    }
  } finally {
    await Promise.all(clients.map((client) => client.close()));
    await pinging.close();
  }
});

/** When each of the client's next `wanted` pings arrived. */
async function pingTimes(client: TestSocket, wanted: number): Promise<number[]> {
  const times: number[] = [];
  while (times.length < wanted) {
    await once(client.socket, 'ping');
    times.push(performance.now());
  }
  return times;
}
