/**
 * server.apiPort: the clients' port serves the WebSocket, token and health only; the API port serves emit (its fast
 * path included), the table API, token, health and /metrics, and no WebSocket. Both close with the node.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { parseConfig } from '../../src/config/load.ts';
import { TestSocket, apiToken, defaultRawConfig, metric, onEvent, post, startNode, type TestNode } from '../support/gateway.ts';

const EMIT = '/api/system-api/bench/emit-event-ws';
const TOKEN = '/api/system-api/bench/token';
const PUBLIC_TABLE = '/api/schema/bench/mongodb/am_bench/inserts_public';

/** A node with both ports on free ports; `http` and `ws` are its clients' port, `api` its API port. */
async function splitNode(server: Record<string, unknown> = {}): Promise<TestNode & { api: string }> {
  const node = await startNode((raw) => Object.assign(raw.server, { apiPort: 0 }, server));
  const ports = node.gateway.ports!;
  assert.ok(ports.api !== undefined && ports.api !== ports.clients, 'two ports');
  return { ...node, api: `http://127.0.0.1:${ports.api}` };
}

async function get(url: string): Promise<{ status: number; text: string }> {
  const response = await fetch(url);
  return { status: response.status, text: await response.text() };
}

/** Whether anything accepts TCP connections on the URL's port. */
async function accepts(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const outcome = await new Promise<boolean>((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('error', () => resolve(false));
  });
  socket.destroy();
  return outcome;
}

for (const emitFastPath of [true, false]) {
  describe(`two ports (emitFastPath ${emitFastPath})`, () => {
    let node: TestNode & { api: string };
    let token: string;

    before(async () => {
      node = await splitNode({ emitFastPath });
      token = await apiToken(node);
    });
    after(() => node.close());

    test('emit: 404 on the clients\' port, delivered through the API port', async () => {
      const listener = await TestSocket.connect(node, token);
      await listener.register(onEvent('announcements'));
      const headers = { 'x-am-authorization': token };
      const body = { name: 'announcements', eventData: { title: 'hello' } };
      const refused = await post(`${node.http}${EMIT}`, body, headers);
      assert.deepEqual([refused.status, refused.body.errors[0].code], [404, 'NOT_FOUND']);
      const accepted = await post(`${node.api}${EMIT}`, body, headers);
      assert.deepEqual([accepted.status, accepted.body.data], [200, { name: 'announcements', nodes: 1 }]);
      const notification = await listener.next('NOTIFICATION');
      assert.deepEqual(notification.response.eventData, { title: 'hello' });
      await listener.close();
      assert.equal(await metric(node, 'herald_http_responses_total', { route: EMIT, status: '200' }), 1);
      assert.equal(await metric(node, 'herald_http_responses_total', { route: 'unmatched', status: '404' }), 1);
    });

    test('the table API is on the API port only', async () => {
      const row = { sku: 'A-1' };
      const refused = await post(`${node.http}${PUBLIC_TABLE}/save-single-or-multiple`, row);
      assert.equal(refused.status, 404);
      assert.equal((await get(`${node.http}${PUBLIC_TABLE}`)).status, 404);
      assert.equal((await post(`${node.api}${PUBLIC_TABLE}/save-single-or-multiple`, row)).status, 200);
      const read = await get(`${node.api}${PUBLIC_TABLE}`);
      assert.equal(read.status, 200);
      assert.equal(JSON.parse(read.text).data[0].sku, 'A-1');
    });

    test('token and health answer on both ports; /metrics only on the API port', async () => {
      for (const base of [node.http, node.api]) {
        const issued = await post(`${base}${TOKEN}`, { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } });
        assert.equal(issued.status, 200, base);
        assert.deepEqual(await get(`${base}/healthz`), { status: 200, text: '{"status":"ok"}' });
        assert.deepEqual(await get(`${base}/readyz`), { status: 200, text: '{"ready":true}' });
      }
      assert.equal((await get(`${node.http}/metrics`)).status, 404);
      const metrics = await get(`${node.api}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(metrics.text, /^herald_ready 1$/m);
    });

    test('a WebSocket upgrade on the API port is refused (404), with no socket opened', async () => {
      const url = `${node.api.replace('http', 'ws')}/?x-am-authorization=${token}`;
      const socket = new WebSocket(url);
      socket.on('error', () => {}); // terminate() below reports the unfinished handshake
      const [, response] = (await once(socket, 'unexpected-response')) as [unknown, { statusCode: number }];
      assert.equal(response.statusCode, 404);
      socket.terminate();
      assert.equal(await metric(node, 'herald_connections'), 0);
    });
  });
}

test('close() closes both ports, the probes that reached them no obstacle', async () => {
  for (const reusePort of [false, true]) {
    const node = await splitNode({ reusePort });
    assert.ok(await accepts(node.http));
    assert.ok(await accepts(node.api));
    // A connection that ends before its first byte is the fast path's until then: it must not keep the port open
    // until Node's headersTimeout (60 s), past any drain deadline.
    const started = performance.now();
    await node.close();
    assert.ok(performance.now() - started < 10_000, 'closed without waiting for the probes to time out');
    assert.equal(await accepts(node.http), false, `clients' port closed (reusePort ${reusePort})`);
    assert.equal(await accepts(node.api), false, `API port closed (reusePort ${reusePort})`);
  }
});

test('apiHost binds the API port elsewhere than host', async () => {
  const node = await splitNode({ host: '127.0.0.1', apiHost: '127.0.0.2' });
  try {
    const api = node.gateway.ports!.api!;
    assert.equal(await accepts(`http://127.0.0.2:${api}`), true);
    assert.equal(await accepts(`http://127.0.0.1:${api}`), false);
  } finally {
    await node.close();
  }
});

test('the schema refuses an apiPort equal to port, and an apiHost without apiPort', () => {
  const parse = (server: object) => () => parseConfig({ ...defaultRawConfig(), server }, '.');
  assert.throws(parse({ port: 40000, apiPort: 40000 }), /server\.apiPort: apiPort must differ from port/);
  assert.throws(parse({ port: 40000, apiHost: '127.0.0.1' }), /server\.apiHost: apiHost needs apiPort/);
  assert.equal(parseConfig({ ...defaultRawConfig(), server: { port: 0, apiPort: 0 } }, '.').server.apiPort, 0);
});
