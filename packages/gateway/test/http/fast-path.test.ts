/**
 * The emit's fast path (src/http/fast-path.ts), over raw TCP: what it answers itself is what fastify answers, byte
 * for byte but the Date; every other request on the same connection reaches fastify, in order; and its connections
 * close with the node.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { DeliveryPending, type Broker } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import { GatewayError } from '../../src/errors.ts';
import { passThrough } from '../support/brokers.ts';
import { apiToken, metric, onEvent, startNode, TestSocket, type RawConfig, type TestNode } from '../support/gateway.ts';
import { connectionPair, EMIT_PATH, emitRequest, RawHttp, request, type RawResponse } from '../support/raw-http.ts';

const emitBody = (name: string, eventData: unknown = { recipientId: '7' }): string => JSON.stringify({ name, eventData });

async function handOvers(node: TestNode): Promise<Record<string, number>> {
  const reasons = ['other_request', 'http_form', 'body'];
  const counts = await Promise.all(reasons.map((reason) => metric(node, 'herald_http_fast_path_handovers_total', { reason })));
  return Object.fromEntries(reasons.map((reason, i) => [reason, counts[i]!]));
}

/** A memory broker whose publish can be made to fail as the Redis broker's does when Redis is gone. */
/** Publishes as the fleet does when it is up, cannot be reached, or takes an emit only part of the way (202). */
type Fleet = 'up' | 'down' | 'partly';

function failingBroker(nodeId: string): Broker & { fleet: Fleet } {
  const inner = new MemoryBus().broker(nodeId);
  return {
    ...passThrough(inner),
    fleet: 'up',
    publish(event, eventData, once) {
      if (this.fleet === 'down') return Promise.reject(new GatewayError('UNAVAILABLE', "the fleet's Redis is unreachable"));
      if (this.fleet === 'partly') return Promise.reject(new DeliveryPending(1, new Error('a shard is failing over')));
      return inner.publish(event, eventData, once);
    },
  };
}

const portOf = (node: TestNode): number => Number(new URL(node.http).port);

/**
 * Bytes copied by Buffer.concat, Buffer#copy and Uint8Array#set while `run` runs: every way of joining reads into one
 * buffer (each of them copies through V8's own set, which is not counted twice).
 */
function bytesCopiedBy(run: () => void): number {
  let copied = 0;
  const { concat } = Buffer;
  const { copy } = Buffer.prototype;
  const { set } = Uint8Array.prototype;
  Buffer.concat = (list: readonly Uint8Array[], length?: number) => {
    const joined = concat(list, length);
    copied += joined.length;
    return joined;
  };
  Buffer.prototype.copy = function (this: Buffer, ...args: Parameters<Buffer['copy']>): number {
    const count = copy.apply(this, args);
    copied += count;
    return count;
  };
  Uint8Array.prototype.set = function (this: Uint8Array, source: ArrayLike<number>, offset?: number): void {
    copied += source.length;
    set.call(this, source, offset);
  };
  try {
    run();
  } finally {
    Object.assign(Buffer, { concat });
    Object.assign(Buffer.prototype, { copy });
    Object.assign(Uint8Array.prototype, { set });
  }
  return copied;
}

/** `promise`, or a failure naming `what` after `ms`. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `bytes` as the server reads them: one 'data' event of `size` bytes at a time. */
function feed(server: Socket, bytes: Buffer, size: number): void {
  for (let at = 0; at < bytes.length; at += size) server.emit('data', bytes.subarray(at, at + size));
}

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
  test('answers as fastify does, errors, Retry-After and 202 included, and hands nothing over', async () => {
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
    const pending: RawResponse[] = [];
    for (const fleet of ['up', 'down', 'partly'] as const) {
      for (const broker of brokers) broker.fleet = fleet;
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
        if (answers[0]!.status === 202) pending.push(answers[0]!);
      }
    }
    for (const broker of brokers) broker.fleet = 'up';
    assert.deepEqual(await handOvers(fast), before);
    // The valid calls, with Redis gone: both the plain one and the one with more headers.
    assert.equal(unavailable.length, 2);
    for (const answer of unavailable) assert.ok(answer.headers.includes('retry-after: 1'), answer.headers.join(' | '));
    // Taken part of the way: accepted, not to be retried.
    assert.equal(pending.length, 2);
    for (const answer of pending) assert.deepEqual(JSON.parse(answer.body), { success: true, statusCode: 202, data: { name: 'order-updates', nodes: 1, pending: true } });
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
      ['text', request(`${head}\r\nContent-Type: text/plain`, ok), 415, 'http_form'],
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

  test('a body in many small reads is kept in one growing buffer: each byte is copied once or twice, not once per read after it', async () => {
    const { client, server } = await connectionPair(portOf(fast));
    const pad = 'x'.repeat(1024 * 1024 - 100);
    const call = Buffer.from(emitRequest(token, emitBody('order-updates', { recipientId: '7', pad })));
    const last = call.length - 1;
    // Joining each read to all the ones before it would copy bytes in the square of the number of reads.
    const copied = bytesCopiedBy(() => feed(server, call.subarray(0, last), 128));
    server.emit('data', call.subarray(last));
    assert.equal((await client.next()).status, 200);
    assert.ok(copied < 3 * call.length, `${copied} bytes copied for a call of ${call.length}`);
    client.socket.destroy();
  });

  test('a call without a valid token is answered at once, before its body, which is then read and dropped, not kept', async () => {
    // A body that reads like a request: it must be dropped, never answered.
    const trap = 'GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n';
    const next = emitRequest(token, emitBody('order-updates'));
    for (const refused of [undefined, 'garbage']) {
      const call = emitRequest(refused, trap);
      const headEnd = call.indexOf('\r\n\r\n') + 4;
      const answers = await Promise.all([fast, plain].map(async (node) => {
        const client = new RawHttp(portOf(node));
        client.write(call.slice(0, headEnd));
        const first = await within(2000, client.next(), 'the refusal before the body');
        client.write(call.slice(headEnd) + next);
        const second = await client.next();
        client.socket.destroy();
        return [first, second];
      }));
      assert.deepEqual(answers[0], answers[1]);
      assert.deepEqual(answers[0]!.map((answer) => answer.status), [401, 200]);
      assert.match(answers[0]![1]!.body, /"name":"order-updates"/);
    }
    const { client, server } = await connectionPair(portOf(fast));
    const big = emitRequest(undefined, 'x'.repeat(1024 * 1024));
    const headEnd = big.indexOf('\r\n\r\n') + 4;
    server.emit('data', Buffer.from(big.slice(0, headEnd)));
    assert.equal((await client.next()).status, 401);
    assert.equal(bytesCopiedBy(() => feed(server, Buffer.from(big.slice(headEnd)), 128)), 0);
    server.emit('data', Buffer.from(next));
    assert.equal((await client.next()).status, 200);
    client.socket.destroy();
  });

  test('garbage, and a request the client ends its side in the middle of, are answered as fastify answers them', async () => {
    const call = emitRequest(token, emitBody('order-updates'));
    for (const sent of ['garbage', 'PO', call.slice(0, 60), call.slice(0, -3), `${call}GET /heal`]) {
      const answers = await Promise.all([fast, plain].map(async (node) => {
        const client = new RawHttp(portOf(node));
        client.socket.end(sent);
        return within(5000, client.rest(), JSON.stringify(sent));
      }));
      assert.deepEqual(answers[0], answers[1], JSON.stringify(sent));
      assert.equal(answers[0]!.responses.at(-1)?.status, 400, JSON.stringify(sent));
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

/** Runs per property: a few seconds in `pnpm run test`; e.g. HERALD_FUZZ_RUNS=2000 for a longer search. */
const FUZZ_RUNS = Number(process.env.HERALD_FUZZ_RUNS ?? 100);

/** What a node answers to `bytes`, read in pieces of `sizes` (in turn), maybe a turn of the event loop apart, then the client's end. */
async function answersTo(node: TestNode, bytes: Buffer, sizes: number[], apart: boolean): Promise<Awaited<ReturnType<RawHttp['rest']>>> {
  const { client, server } = await connectionPair(portOf(node));
  // Pushed into the socket's stream, as its reads are, so that bytes handed back to Node's server (unshift) keep their place.
  for (let at = 0, piece = 0; at < bytes.length && !server.destroyed; piece++) {
    const size = sizes[piece % sizes.length]!;
    server.push(bytes.subarray(at, at + size));
    at += size;
    if (apart) await new Promise(setImmediate);
  }
  client.socket.end();
  return within(5000, client.rest(), 'the connection closing');
}

const bodies = fc.oneof(
  fc.record({ name: fc.constantFrom('order-updates', 'no-such-event', ''), eventData: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })) }).map((body) => JSON.stringify(body)),
  fc.record({ name: fc.jsonValue({ maxDepth: 1 }), eventData: fc.jsonValue({ maxDepth: 2 }) }).map((body) => JSON.stringify(body)),
  fc.json({ maxDepth: 2 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('{"name":"order-updates","eventData":{"__proto__":{"x":1}}}', '{"name":"order-updates","eventData":{"constructor":1}}', '{"name":"order-updates",'),
);

/**
 * Header lines a well-formed request may carry besides its one Host: the ones the fast path reads, in their forms, and
 * others. (Without a Host Node answers 400 itself, and what it answers to the pipelined requests after that depends on
 * whether the ones before it were answered yet: fastify's own race, not the fast path's.)
 */
const wellFormedHeaders = (tokens: { valid: string; viewer: string }) =>
  fc.oneof(
    fc.constantFrom('Content-Type: application/json', 'content-type: application/json; charset=utf-8', 'Content-Type: APPLICATION/JSON', 'Content-Type: text/plain', 'Content-Type: application/xml'),
    fc.constantFrom(`x-am-authorization: ${tokens.valid}`, `X-AM-Authorization:  ${tokens.valid}  `, `x-am-authorization: ${tokens.viewer}`, 'x-am-authorization: garbage', 'x-am-authorization:'),
    fc.constantFrom('Connection: keep-alive', 'Connection: close', 'connection: Keep-Alive, Close', 'Connection: upgrade', 'Accept: */*'),
    // Repeats of a key answered from the first (idempotent-replayed), reused for another body (422), or refused (400).
    fc.constantFrom('Idempotency-Key: k1', 'idempotency-key: k2', 'Idempotency-Key:  k1 ', 'Idempotency-Key:', `Idempotency-Key: ${'a'.repeat(256)}`, 'Idempotency-Key: \u00c3\u00a9'),
    fc.tuple(fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/), fc.stringMatching(/^[\x21-\x7e]{0,16}$/)).map(([name, value]) => `X-${name}: ${value}`),
  );

const requestLines = fc.constantFrom(
  `POST ${EMIT_PATH} HTTP/1.1`, `POST ${EMIT_PATH} HTTP/1.1`, `POST ${EMIT_PATH} HTTP/1.1`, `POST ${EMIT_PATH}?x=1 HTTP/1.1`,
  `POST ${EMIT_PATH} HTTP/1.0`, `PUT ${EMIT_PATH} HTTP/1.1`, 'POST /api/system-api/bench/other HTTP/1.1', 'GET /healthz HTTP/1.1',
);

/** How the reads are cut: their sizes, in turn, and whether a turn of the event loop passes between them. */
const reads = fc.record({ sizes: fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 6 }), apart: fc.boolean() });

describe('the emit fast path, fuzzed against fastify', () => {
  let tokens: { valid: string; viewer: string };
  before(async () => {
    tokens = { valid: token, viewer: await apiToken(fast, 'viewer', 'viewer-password') };
  });

  const sameAnswers = async (bytes: Buffer, { sizes, apart }: { sizes: number[]; apart: boolean }): Promise<void> => {
    const [fromFast, fromFastify] = await Promise.all([answersTo(fast, bytes, sizes, apart), answersTo(plain, bytes, sizes, apart)]);
    assert.deepEqual(fromFast, fromFastify);
  };

  /** Well-formed calls, pipelined: any request, or an emit of the kind the fast path takes. */
  const pipelinedCalls = () => {
    const headers = fc.array(wellFormedHeaders(tokens), { maxLength: 6 });
    const anyCall = fc.tuple(requestLines, fc.constantFrom('Host: gateway', 'host:gateway'), headers, bodies)
      .map(([line, host, more, body]) => request([line, host, ...more].join('\r\n'), body));
    const emit = fc.tuple(fc.constantFrom('order-updates', 'no-such-event'), fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), headers)
      .map(([name, eventData, more]) => emitRequest(tokens.valid, JSON.stringify({ name, eventData }), more.map((line) => `\r\n${line}`).join('')));
    const call = fc.oneof(anyCall, emit);
    // A request after one that closes the connection is Node's "data after close" error, which races with the answers
    // still due: fastify's own race again. Such a request is the last.
    const closes = (call: string): boolean => /HTTP\/1\.0|close/i.test(call.slice(0, call.indexOf('\r\n\r\n')));
    return fc.array(call, { minLength: 1, maxLength: 4 }).map((calls) => {
      const closing = calls.findIndex(closes);
      return closing < 0 ? calls : calls.slice(0, closing + 1);
    });
  };

  test('well-formed requests, pipelined and cut anywhere, are answered as fastify answers them, in order', async () => {
    await fc.assert(
      fc.asyncProperty(pipelinedCalls(), reads, async (calls, cut) => sameAnswers(Buffer.from(calls.join('')), cut)),
      { numRuns: FUZZ_RUNS },
    );
  });

  test('with the delivery backlog past its bound, the same: an emit that would be taken is 503 OVERLOADED with Retry-After', async () => {
    // Both nodes' backlogs held past their bound by fan-out bytes counted and never written.
    const held = [fast, plain].map(({ gateway }) => gateway.hub.backlog);
    for (const backlog of held) backlog.fanOutBytes += backlog.bound + 1;
    try {
      const overloaded = await answersTo(fast, Buffer.from(emitRequest(tokens.valid, '{"name":"order-updates","eventData":{"recipientId":"1"}}')), [1 << 16], false);
      assert.match(JSON.stringify(overloaded), /503[^]*Retry-After: 1[^]*OVERLOADED/i);
      await fc.assert(
        fc.asyncProperty(pipelinedCalls(), reads, async (calls, cut) => sameAnswers(Buffer.from(calls.join('')), cut)),
        { numRuns: FUZZ_RUNS },
      );
    } finally {
      for (const backlog of held) backlog.fanOutBytes -= backlog.bound + 1;
    }
  });

  test('any one request, malformed heads and framing included, is answered as fastify answers it', async () => {
    // Any byte but CR and LF in a header: a line break would frame a second request, whose race with the first is fastify's own.
    const anyHeader = fc.oneof(
      wellFormedHeaders(tokens),
      fc.constantFrom('Host: gateway', 'Transfer-Encoding: chunked', 'Expect: 100-continue', 'Expect: nothing', 'Content-Encoding: gzip', 'Content-Length: 5', 'Content-Length: abc', ' Host: gateway', 'Host : gateway', 'no colon'),
      fc.tuple(fc.string({ unit: 'binary-ascii', maxLength: 12 }), fc.string({ unit: 'binary-ascii', maxLength: 16 })).map(([name, value]) => `${name}:${value}`.replace(/[\r\n]/g, '')),
    );
    const framing = fc.constantFrom('exact', 'exact', 'none', 'chunked');
    const call = fc.tuple(requestLines, fc.array(anyHeader, { maxLength: 6 }), bodies, framing).map(([line, headers, body, frame]) => {
      const head = [line, ...headers].join('\r\n');
      if (frame === 'exact') return request(head, body);
      if (frame === 'none') return `${head}\r\n\r\n${body}`;
      return `${head}\r\nTransfer-Encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    });
    await fc.assert(fc.asyncProperty(call, reads, async (one, cut) => sameAnswers(Buffer.from(one), cut)), { numRuns: FUZZ_RUNS });
  });

  test('the node is still up and delivering after the fuzz', async () => {
    const client = new RawHttp(portOf(fast));
    client.write(emitRequest(token, emitBody('order-updates')));
    assert.equal((await client.next()).status, 200);
    client.socket.destroy();
  });
});
