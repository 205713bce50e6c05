/**
 * The emit's fast path (src/http/fast-path.ts), over raw TCP: what it answers itself is what fastify answers, byte
 * for byte but the Date; every other request on the same connection reaches fastify, in order; and its connections
 * close with the node.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Broker } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import { GatewayError } from '../../src/errors.ts';
import { apiToken, metric, onEvent, startNode, TestSocket, type RawConfig, type TestNode } from '../support/gateway.ts';
import { EMIT_PATH, emitRequest, RawHttp, request, type RawResponse } from '../support/raw-http.ts';

const emitBody = (name: string, eventData: unknown = { recipientId: '7' }): string => JSON.stringify({ name, eventData });

async function handOvers(node: TestNode): Promise<Record<string, number>> {
  const reasons = ['other_request', 'http_form', 'body'];
  const counts = await Promise.all(reasons.map((reason) => metric(node, 'herald_http_fast_path_handovers_total', { reason })));
  return Object.fromEntries(reasons.map((reason, i) => [reason, counts[i]!]));
}

/** A memory broker whose publish can be made to fail as the Redis broker's does when Redis is gone. */
function failingBroker(nodeId: string): Broker & { down: boolean } {
  const inner = new MemoryBus().broker(nodeId);
  return {
    nodeId,
    down: false,
    ready: () => inner.ready(),
    start: (onDelivery) => inner.start(onDelivery),
    addRoute: (route) => inner.addRoute(route),
    removeRoute: (route) => inner.removeRoute(route),
    publish(event, eventData) {
      return this.down ? Promise.reject(new GatewayError('UNAVAILABLE', "the fleet's Redis is unreachable")) : inner.publish(event, eventData);
    },
    history: (route, range) => inner.history(route, range),
    close: () => inner.close(),
  };
}

const portOf = (node: TestNode): number => Number(new URL(node.http).port);

let fast: TestNode;
let plain: TestNode;
let brokers: Array<ReturnType<typeof failingBroker>>;
let token: string;

before(async () => {
  brokers = [failingBroker('fast'), failingBroker('plain')];
  const withViewer = (raw: RawConfig): void => {
    raw.apiUsers.viewer = { password: 'viewer-password', groups: ['viewers'] };
  };
  fast = await startNode(withViewer, { broker: brokers[0] });
  plain = await startNode((raw) => {
    withViewer(raw);
    raw.server.emitFastPath = false;
  }, { broker: brokers[1] });
  token = await apiToken(fast);
});

after(async () => {
  await Promise.all([fast.close(), plain.close()]);
});

describe('the emit fast path', () => {
  test('answers as fastify does, errors and Retry-After included, and hands nothing over', async () => {
    const viewer = await apiToken(fast, 'viewer', 'viewer-password');
    const calls = [
      emitRequest(token, emitBody('order-updates')),
      emitRequest(undefined, emitBody('order-updates')),
      emitRequest('garbage', emitBody('order-updates')),
      emitRequest(viewer, emitBody('order-updates')),
      emitRequest(token, emitBody('no-such-event')),
      emitRequest(token, emitBody('order-updates'), '\r\nConnection: keep-alive\r\nX-Other: 1'),
    ];
    const before = await handOvers(fast);
    const unavailable: RawResponse[] = [];
    for (const down of [false, true]) {
      for (const broker of brokers) broker.down = down;
      for (const call of calls) {
        const answers = await Promise.all([fast, plain].map(async (node) => {
          const client = new RawHttp(portOf(node));
          client.write(call);
          const answer = await client.next();
          client.socket.destroy();
          return answer;
        }));
        assert.deepEqual(answers[0], answers[1], call);
        if (answers[0]!.status === 503) unavailable.push(answers[0]!);
      }
    }
    for (const broker of brokers) broker.down = false;
    assert.deepEqual(await handOvers(fast), before);
    // The valid calls, with Redis gone: both the plain one and the one with more headers.
    assert.equal(unavailable.length, 2);
    for (const answer of unavailable) assert.ok(answer.headers.includes('retry-after: 1'), answer.headers.join(' | '));
  });

  test('a WebSocket client\'s socket keeps no timer of it for the life of the connection', async () => {
    const before = new Set(fast.gateway.hub.sessions);
    const client = await TestSocket.connect(fast, token);
    const session = [...fast.gateway.hub.sessions].find((each) => !before.has(each))!;
    const tcp = (session.socket as unknown as { _socket: Record<symbol, unknown> })._socket;
    const timers = Object.getOwnPropertySymbols(tcp).filter((key) => (tcp[key] as object | null)?.constructor?.name === 'Timeout');
    assert.deepEqual(timers, []);
    await client.close();
  });

  test('delivers, and keeps the connection for the next call', async () => {
    const listener = await TestSocket.connect(fast, token);
    await listener.register(onEvent('announcements', { recipientId: 'fast-1' }));
    const client = new RawHttp(portOf(fast));
    for (const n of [1, 2]) {
      client.write(emitRequest(token, emitBody('announcements', { recipientId: 'fast-1', n })));
      const answer = await client.next();
      assert.equal(answer.status, 200);
      assert.deepEqual(JSON.parse(answer.body), { success: true, statusCode: 200, data: { name: 'announcements', nodes: 1 } });
      assert.deepEqual((await listener.next('NOTIFICATION')).response.eventData, { recipientId: 'fast-1', n });
    }
    assert.ok(!client.socket.destroyed);
    client.socket.destroy();
    await listener.close();
  });

  test('a request in pieces, and pipelined requests, are answered in order; another route on the same connection goes to fastify', async () => {
    const client = new RawHttp(portOf(fast));
    const call = emitRequest(token, emitBody('order-updates'));
    // Apart in time so that they come in separate reads; nothing on the server tells when a piece has been read.
    for (const piece of [call.slice(0, 7), call.slice(7, 60), call.slice(60, -5), call.slice(-5)]) {
      client.write(piece);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.equal((await client.next()).status, 200);
    const before = await handOvers(fast);
    client.write(call + emitRequest(token, emitBody('no-such-event')) + 'GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n' + call);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await client.next()).status);
    assert.deepEqual(statuses, [200, 404, 200, 200]);
    assert.equal((await handOvers(fast)).other_request, before.other_request! + 1);
    client.socket.destroy();
  });

  test('what it does not take whole goes to fastify, which answers as it always has', async () => {
    const head = `POST ${EMIT_PATH} HTTP/1.1\r\nHost: gateway\r\nx-am-authorization: ${token}`;
    const ok = emitBody('order-updates');
    const chunked = `${head}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${ok.length.toString(16)}\r\n${ok}\r\n0\r\n\r\n`;
    const cases: Array<[string, string, number, string]> = [
      ['chunked', chunked, 200, 'http_form'],
      ['a query', request(`POST ${EMIT_PATH}?x=1 HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nx-am-authorization: ${token}`, ok), 200, 'other_request'],
      ['HTTP/1.0', request(`POST ${EMIT_PATH} HTTP/1.0\r\nHost: gateway\r\nContent-Type: application/json\r\nx-am-authorization: ${token}`, ok), 200, 'other_request'],
      ['no Host', request(`POST ${EMIT_PATH} HTTP/1.1\r\nContent-Type: application/json\r\nx-am-authorization: ${token}`, ok), 400, 'http_form'],
      ['text', request(`${head}\r\nContent-Type: text/plain`, ok), 400, 'http_form'],
      ['XML', request(`${head}\r\nContent-Type: application/xml`, ok), 415, 'http_form'],
      ['a number for a name, coerced', emitRequest(token, '{"name":5,"eventData":{}}'), 404, 'body'],
      ['bad JSON', emitRequest(token, '{"name":'), 400, 'body'],
      ['__proto__', emitRequest(token, '{"name":"order-updates","eventData":{"__proto__":{"x":1}}}'), 400, 'body'],
      ['eventData not an object', emitRequest(token, emitBody('order-updates', 'text')), 400, 'body'],
      ['a header of 20 KB', emitRequest(token, ok, `\r\nX-Big: ${'a'.repeat(20_000)}`), 431, 'http_form'],
    ];
    for (const [what, call, status, reason] of cases) {
      const before = await handOvers(fast);
      const client = new RawHttp(portOf(fast));
      client.write(call);
      assert.equal((await client.next()).status, status, what);
      assert.equal((await handOvers(fast))[reason], before[reason]! + 1, what);
      client.socket.destroy();
    }
  });

  test('Connection: close, and a client that ends its side, are answered, then the connection ends', async () => {
    const closing = new RawHttp(portOf(fast));
    closing.write(emitRequest(token, emitBody('order-updates'), '\r\nConnection: close'));
    const answer = await closing.next();
    assert.equal(answer.status, 200);
    assert.ok(answer.headers.includes('Connection: close'));
    await closing.closed;
    const ending = new RawHttp(portOf(fast));
    ending.socket.end(emitRequest(token, emitBody('order-updates')));
    assert.equal((await ending.next()).status, 200);
    await ending.closed;
  });

  test('an idle connection does not hold up the node\'s close', async () => {
    const node = await startNode();
    const client = new RawHttp(portOf(node));
    client.write(emitRequest(await apiToken(node), emitBody('order-updates')));
    assert.equal((await client.next()).status, 200);
    const started = performance.now();
    await node.close();
    await client.closed;
    assert.ok(performance.now() - started < 5000, 'closed long before the keep-alive timeout (72 s)');
  });
});
