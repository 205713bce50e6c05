/** Draining one node: not ready at once, new clients refused, every client told 1001 in batches. */
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { once } from 'node:events';
import { test } from 'node:test';
import { TestSocket, apiToken, metric, onEvent, startNode, type TestNode } from '../support/gateway.ts';
import { emitRequest, RawHttp } from '../support/raw-http.ts';
import { startRedis } from '../support/redis.ts';

/** A keep-alive emit connection that the kernel gave to `node` (of the nodes sharing its port). */
async function emitConnectionTo(node: TestNode, token: string): Promise<RawHttp> {
  const port = Number(new URL(node.http).port);
  const body = JSON.stringify({ name: 'announcements', eventData: {} });
  for (let attempt = 0; attempt < 200; attempt++) {
    const before = await metric(node, 'herald_emits_total', { event: 'announcements' });
    const client = new RawHttp(port);
    client.write(emitRequest(token, body));
    assert.equal((await client.next()).status, 200);
    if ((await metric(node, 'herald_emits_total', { event: 'announcements' })) > before) return client;
    client.socket.destroy();
  }
  throw new Error('the kernel gave the node none of 200 connections');
}

test('close(): /readyz 503 at once, upgrades refused with 503, clients closed with 1001 in batches', async () => {
  const node = await startNode((raw) => {
    raw.drain = { batchSize: 2, batchIntervalMs: 100, deadlineMs: 5000 };
  });
  const token = await apiToken(node);
  const clients = await Promise.all(Array.from({ length: 6 }, () => TestSocket.connect(node, token)));
  await Promise.all(clients.map((client) => client.register(onEvent('announcements'))));
  const closedAt: number[] = [];
  for (const client of clients) void client.closed.then(({ code }) => closedAt.push(code === 1001 ? Date.now() : -code));

  const drained = node.close();
  assert.equal((await fetch(`${node.http}/readyz`)).status, 503);
  const upgrade = get(`${node.http}/?x-am-authorization=${token}`, {
    headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
  });
  const [response] = await once(upgrade, 'response');
  assert.equal(response.statusCode, 503);
  response.resume();
  await drained;
  await Promise.all(clients.map((client) => client.closed));
  assert.equal(closedAt.length, 6);
  assert.ok(closedAt.every((at) => at > 0), `every client was told 1001: ${closedAt}`);
  // Three batches of two, 100 ms apart: the last client heard at least ~200 ms after the first.
  assert.ok(Math.max(...closedAt) - Math.min(...closedAt) >= 150, 'the closes were spread out');
});

test('server.reusePort: a successor shares the port, and every client that arrives while the first drains reaches it', async () => {
  const first = await startNode((raw) => {
    raw.server.reusePort = true;
    raw.drain = { batchSize: 1, batchIntervalMs: 300, deadlineMs: 5000 };
  });
  const port = Number(new URL(first.http).port);
  const successor = await startNode((raw) => {
    raw.server = { ...raw.server, port, reusePort: true };
  });
  const token = await apiToken(first);
  // The kernel spreads connections over both listeners: connect until the first node holds some to drain.
  const held: TestSocket[] = [];
  while (first.gateway.hub.sessions.size < 3) {
    assert.ok(held.length < 200, 'the kernel sent the first node hardly any of 200 connections');
    held.push(await TestSocket.connect(first, token));
  }
  const toldToLeave = first.gateway.hub.sessions.size;
  const emitter = await emitConnectionTo(first, token);

  const drained = first.close();
  // Its idle keep-alive connection ends as it stops listening, as Node's server's do: the next emit reaches the successor.
  assert.equal(await Promise.race([emitter.closed.then(() => 'closed'), drained.then(() => 'drained')]), 'closed');
  // Without the early stop, about half of these would reach the draining node and be refused with 503.
  const arrivals = await Promise.all(Array.from({ length: 12 }, () => TestSocket.connect(first, token)));
  assert.ok(first.gateway.hub.sessions.size > 0, 'the first node was still draining while they arrived');
  await drained;
  assert.equal(successor.gateway.hub.sessions.size, held.length - toldToLeave + arrivals.length);
  await Promise.all([...held, ...arrivals].map((client) => client.close()));
  await successor.close();
});

test("a Redis that does not answer holds the drain's 1001s for a third of its deadline at most", async (t) => {
  const redis = await startRedis();
  let redisPid: number | undefined;
  t.after(async () => {
    if (redisPid !== undefined) process.kill(redisPid, 'SIGCONT');
    await redis.stop();
  });
  const node = await startNode((raw) => {
    raw.redis = { url: redis.url };
    raw.drain = { batchSize: 256, batchIntervalMs: 0, deadlineMs: 3000 };
  });
  const token = await apiToken(node);
  const client = await TestSocket.connect(node, token);
  await client.register(onEvent('announcements'));
  redisPid = Number(/process_id:(\d+)/.exec(await redis.cli('info', 'server'))![1]);
  // Stopped, Redis keeps its connections open and answers nothing: the node's removal of its routes waits on it.
  process.kill(redisPid, 'SIGSTOP');
  const drainedAt = performance.now();
  const drained = node.close();
  const { code } = await client.closed;
  const waitedMs = performance.now() - drainedAt;
  assert.equal(code, 1001);
  assert.ok(waitedMs >= 900 && waitedMs < 2000, `told 1001 after ${waitedMs.toFixed(0)} ms`);
  process.kill(redisPid, 'SIGCONT');
  await drained;
});
