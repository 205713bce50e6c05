/**
 * @herald/server against a real node in this process (the default config): emits taken once however many tries reach
 * the node (a response lost on its way back, a 503, a 409), refusals that no retry changes thrown at once, tokens
 * renewed, batches whose items are tried again alone, the control API, webhook signatures, and the stream's entry.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_CONFIG_FILE, Gateway, loadConfigFile } from '@herald/gateway';
import { HeraldServer, HeraldServerError, streamFields, verifyWebhook, xadd, type Fetch } from '../src/index.ts';
import { TestSocket, apiToken, onEvent, type TestNode } from '../../gateway/test/support/gateway.ts';

let node: TestNode;
let client: TestSocket;

before(async () => {
  const gateway = await Gateway.create(loadConfigFile(DEFAULT_CONFIG_FILE, { port: 0, host: '127.0.0.1' }));
  const port = await gateway.listen();
  node = { gateway, config: gateway.config, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}`, close: () => gateway.close() };
  client = await TestSocket.connect(node, await apiToken(node));
  await client.register(onEvent('announcements'));
});
after(async () => {
  await client.close();
  await node.close();
});

const credentials = { u: 'bench', p: 'bench' };
/** A fetch that counts its calls and may change what one of them does. */
function fetchWith(change: (call: number, url: string, real: () => Promise<Response>) => Promise<Response>): { fetch: Fetch; calls: string[] } {
  const calls: string[] = [];
  const wrapped: Fetch = async (url, init) => {
    calls.push(url);
    return change(calls.length, url, () => fetch(url, init as RequestInit));
  };
  return { fetch: wrapped, calls };
}

/** The next `count` announcements' eventData; the ones not expected make the next emit's wait fail. */
async function announced(count: number): Promise<unknown[]> {
  const got: unknown[] = [];
  while (got.length < count) got.push((await client.next('NOTIFICATION')).response.eventData);
  return got;
}

describe('emit', () => {
  test('taken once when the answer to the first try is lost on its way back: the retry is answered replayed', async () => {
    // The request reaches the node; its answer never reaches the back end (a connection cut after the write).
    const { fetch, calls } = fetchWith(async (call, url, real) => {
      const response = await real();
      if (url.endsWith('/emit-event-ws') && calls.filter((each) => each.endsWith('/emit-event-ws')).length === 1) throw new TypeError('fetch failed: socket hang up');
      return response;
    });
    const herald = new HeraldServer({ url: node.http, userPath: 'bench', credentials, fetch, retry: { minDelayMs: 1, maxDelayMs: 5 } });
    const result = await herald.emit('announcements', { n: 'lost-answer' });
    assert.deepEqual(result, { name: 'announcements', nodes: 1, pending: false, replayed: true });
    await herald.emit('announcements', { n: 'next' });
    assert.deepEqual(await announced(2), [{ n: 'lost-answer' }, { n: 'next' }], 'delivered once, then the next one');
  });

  test('a 503 or a 409 is tried again after its Retry-After; a refusal no retry changes is thrown at once', async () => {
    const { fetch, calls } = fetchWith(async (call, url, real) => {
      const emits = calls.filter((each) => each.endsWith('/emit-event-ws')).length;
      if (url.endsWith('/emit-event-ws') && emits <= 2) {
        return new Response(JSON.stringify({ success: false, statusCode: 503, errors: [{ code: 'UNAVAILABLE', message: 'x' }] }), { status: emits === 1 ? 503 : 409, headers: { 'retry-after': '0.01' } });
      }
      return real();
    });
    const herald = new HeraldServer({ url: node.http, userPath: 'bench', credentials, fetch });
    assert.deepEqual(await herald.emit('announcements', { n: 'after-503' }), { name: 'announcements', nodes: 1, pending: false, replayed: false });
    assert.deepEqual(await announced(1), [{ n: 'after-503' }]);
    const before = calls.length;
    await assert.rejects(herald.emit('no-such-event', {}), (error: unknown) => error instanceof HeraldServerError && error.status === 404 && error.code === 'UNKNOWN_EVENT');
    assert.equal(calls.length, before + 1, 'one try');
  });

  test('a 202 (taken part of the way) is a result, pending, and not tried again', async () => {
    const { fetch, calls } = fetchWith(async (_call, url, real) => {
      if (!url.endsWith('/emit-event-ws')) return real();
      return new Response(JSON.stringify({ success: true, statusCode: 202, data: { name: 'announcements', nodes: 2, pending: true } }), { status: 202 });
    });
    const herald = new HeraldServer({ url: node.http, userPath: 'bench', credentials, fetch });
    assert.deepEqual(await herald.emit('announcements', { n: 'pending' }), { name: 'announcements', nodes: 2, pending: true, replayed: false });
    assert.equal(calls.filter((each) => each.endsWith('/emit-event-ws')).length, 1);
  });

  test('out of tries: the last failure is thrown, with status 0 when nothing answered', async () => {
    const herald = new HeraldServer({ url: 'http://127.0.0.1:1', userPath: 'bench', apiToken: 'x', retry: { attempts: 2, minDelayMs: 1, maxDelayMs: 2 } });
    await assert.rejects(herald.emit('announcements', {}), (error: unknown) => error instanceof HeraldServerError && error.status === 0);
  });

  test('a refused token is renewed once (the credentials log in again); a given token is not', async () => {
    let first = true;
    const { fetch, calls } = fetchWith(async (_call, url, real) => {
      if (url.endsWith('/emit-event-ws') && first) {
        first = false;
        return new Response(JSON.stringify({ success: false, statusCode: 401, errors: [{ code: 'TOKEN_EXPIRED', message: 'expired' }] }), { status: 401 });
      }
      return real();
    });
    const herald = new HeraldServer({ url: node.http, userPath: 'bench', credentials, fetch });
    await herald.emit('announcements', { n: 'renewed' });
    assert.deepEqual(calls.map((url) => url.split('/').at(-1)), ['token', 'emit-event-ws', 'token', 'emit-event-ws']);
    await announced(1);
    const given = new HeraldServer({ url: node.http, userPath: 'bench', apiToken: 'not-a-token' });
    await assert.rejects(given.emit('announcements', {}), (error: unknown) => error instanceof HeraldServerError && error.status === 401);
  });
});

test('emitBatch: one result per event; an item the node could not take now is sent again alone, with its key', async () => {
  let rewritten = false;
  const { fetch } = fetchWith(async (_call, url, real) => {
    const response = await real();
    if (!url.endsWith('/emit-events-ws') || rewritten) return response;
    // The first answer says item 1 was unavailable, though the node took it: its retry must be a repeat.
    rewritten = true;
    const body = (await response.json()) as { data: { results: Array<Record<string, unknown>> } };
    body.data.results[1] = { success: false, statusCode: 503, errors: [{ code: 'UNAVAILABLE', message: 'x' }] };
    return new Response(JSON.stringify(body), { status: 200, headers: { 'retry-after': '0.01' } });
  });
  const herald = new HeraldServer({ url: node.http, userPath: 'bench', credentials, fetch });
  const results = await herald.emitBatch([
    { name: 'announcements', eventData: { b: 1 } },
    { name: 'announcements', eventData: { b: 2 } },
    { name: 'no-such-event', eventData: {} },
  ]);
  assert.deepEqual(results.map((result) => (result.ok ? [true, result.replayed] : [false, result.status])), [[true, false], [true, true], [false, 404]]);
  assert.deepEqual((await announced(2)).sort((a, b) => (a as { b: number }).b - (b as { b: number }).b), [{ b: 1 }, { b: 2 }]);
});

test('the control API: presence and disconnect', async () => {
  const herald = new HeraldServer({ url: node.http, userPath: 'bench', credentials });
  assert.deepEqual(await herald.disconnect({ person: { generator: 'customers', id: 'NOBODY' } }, { reason: 'test' }), { nodes: 1 });
  assert.equal((await herald.presence({ event: 'announcements' })).subscribers, 1);
  assert.equal((await herald.presence({ person: 'customers:NICK' })).connections, 0);
});

test('verifyWebhook: the body signed with the secret, in constant time; anything else false', () => {
  const body = '[{"type":"connect"}]';
  const secret = 'a-webhook-secret-of-16+';
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  assert.equal(verifyWebhook(body, signature, secret), true);
  assert.equal(verifyWebhook(Buffer.from(body), signature, secret), true);
  for (const wrong of [undefined, null, '', 'sha256=', signature.slice(0, -2), signature.replace('sha256=', 'sha1='), `${signature}00`]) {
    assert.equal(verifyWebhook(body, wrong, secret), false, String(wrong));
  }
  assert.equal(verifyWebhook(`${body} `, signature, secret), false);
  assert.equal(verifyWebhook(body, signature, `${secret}x`), false);
});

test('streamFields and xadd: the entry the emit stream reads, with a key of its own unless given', async () => {
  assert.deepEqual(streamFields({ name: 'x', eventData: { a: 1 }, idempotencyKey: 'k', apiUser: 'app' }), ['name', 'x', 'eventData', '{"a":1}', 'idempotencyKey', 'k', 'apiUser', 'app']);
  const [, , , , , key] = streamFields({ name: 'x', eventData: {} });
  assert.match(key!, /^[0-9a-f-]{36}$/);
  const sent: string[][] = [];
  const id = await xadd({ call: async (...words: string[]) => (sent.push(words), '1-0') }, { name: 'x', eventData: {}, idempotencyKey: 'k' }, { maxLen: 1000 });
  assert.equal(id, '1-0');
  assert.deepEqual(sent, [['XADD', 'herald:emits', 'MAXLEN', '~', '1000', '*', 'name', 'x', 'eventData', '{}', 'idempotencyKey', 'k']]);
});
