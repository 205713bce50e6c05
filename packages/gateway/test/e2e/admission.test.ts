/** Admission control: a bounded number of clients in the handshake, a bounded queue, and 503 past it. */
import assert from 'node:assert/strict';
import { get, type ClientRequest } from 'node:http';
import type { Socket } from 'node:net';
import { once } from 'node:events';
import { test } from 'node:test';
import { until } from '../support/fleet.ts';
import { TestSocket, apiToken, metric, onEvent, startNode, type TestNode } from '../support/gateway.ts';

/** A WebSocket upgrade request, sent as a client's would be, without a client behind it. */
function upgradeRequest(node: TestNode, token: string): ClientRequest {
  return get(`${node.http}/?x-am-authorization=${token}`, {
    headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
  });
}

/** The HTTP status a WebSocket upgrade request gets when it is refused, with its Retry-After. */
async function refusedUpgrade(node: TestNode): Promise<{ status: number | undefined; retryAfter: string | undefined; body: string }> {
  const request = upgradeRequest(node, 'whatever');
  const [response] = await once(request, 'response');
  let body = '';
  for await (const chunk of response) body += chunk;
  return { status: response.statusCode, retryAfter: response.headers['retry-after'], body };
}

test('3,000 clients arriving at once all get in and register, never more than 256 in the handshake', async () => {
  const node = await startNode();
  const token = await apiToken(node);
  const clients = Array.from({ length: 3000 }, () => TestSocket.open(node, token));
  const replies = await Promise.all(
    clients.map(async (client) => {
      await client.next('CONNECTED', 30_000);
      return client.register(onEvent('announcements'));
    }),
  );
  assert.equal(replies.filter((reply) => reply.validOnEvents.length === 1).length, 3000);
  const peak = await metric(node, 'herald_handshakes_in_flight_peak');
  assert.ok(peak > 1 && peak <= 256, `peak in the handshake: ${peak}`);
  assert.equal(await metric(node, 'herald_admission_rejected_total'), 0);
  await Promise.all(clients.map((client) => client.close()));
  await node.close();
});

test('past the queue: 503 with Retry-After; a slot frees when the first REGISTER is answered', async () => {
  const node = await startNode((raw) => {
    raw.admission = { maxHandshakes: 1, maxQueue: 1, holdMs: 30_000 };
  });
  const token = await apiToken(node);
  const first = await TestSocket.connect(node, token);
  const second = TestSocket.open(node, token); // waits in the queue
  // Nothing tells a client that it is queued: poll the node's gauge.
  await until(async () => (await metric(node, 'herald_handshakes_queued')) === 1, 'the second client to be queued');
  const third = await refusedUpgrade(node);
  assert.equal(third.status, 503);
  assert.equal(third.retryAfter, '2');
  assert.equal(JSON.parse(third.body).errors[0].code, 'UNAVAILABLE');
  assert.equal(second.frames.length, 0, 'still waiting');
  await first.register(onEvent('announcements'));
  await second.next('CONNECTED');
  assert.equal(await metric(node, 'herald_admission_rejected_total'), 1);
  await Promise.all([first.close(), second.close()]);
  await node.close();
});

test('clients that reset their connection while refused or queued disturb nothing: the node keeps serving', async () => {
  const node = await startNode((raw) => {
    raw.admission = { maxHandshakes: 1, maxQueue: 20, holdMs: 30_000 };
  });
  try {
    const token = await apiToken(node);
    const first = await TestSocket.connect(node, token);
    // 20 wait in the queue and 20 are refused past it; once the node has placed them all, each resets its connection.
    const sockets = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const request = upgradeRequest(node, token);
        request.on('error', () => {});
        const [socket] = (await once(request, 'socket')) as [Socket];
        await once(socket, 'connect');
        return socket;
      }),
    );
    const placed = async () =>
      (await metric(node, 'herald_handshakes_queued')) === 20 && (await metric(node, 'herald_admission_rejected_total')) === 20;
    await until(placed, 'the node to queue 20 and refuse 20');
    for (const socket of sockets) socket.resetAndDestroy();
    await until(async () => (await metric(node, 'herald_handshakes_queued')) === 0, 'the reset clients to leave the queue');
    await first.register(onEvent('announcements'));
    const later = await TestSocket.connect(node, token);
    await later.register(onEvent('announcements'));
    await Promise.all([first.close(), later.close()]);
  } finally {
    await node.close();
  }
});
