/**
 * The batch emit (emit-events-ws) on an in-process node: one answer per item, in order, each as the emit alone would
 * be answered, so one bad item refuses only itself; Idempotency-Keys per item; the batch's own limits; and a fast-check
 * property over arbitrary batches (never a 5xx but a 503, one result per item).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode } from '@herald/protocol';
import { TestSocket, apiToken, emit, onEvent, post, startNode, type HttpReply, type TestNode } from '../support/gateway.ts';

const FUZZ_RUNS = Number(process.env.HERALD_FUZZ_RUNS ?? 100);

let node: TestNode;
let token: string;
before(async () => {
  node = await startNode((raw) => void (raw.emit = { maxBatchEvents: 50 }));
  token = await apiToken(node);
});
after(() => node.close());

const batch = (body: unknown, headers: Record<string, string> = { 'x-am-authorization': token }): Promise<HttpReply> =>
  post(`${node.http}/api/system-api/bench/emit-events-ws`, body, headers);

interface ItemResult {
  success: boolean;
  statusCode: number;
  data?: { name: string; nodes: number };
  errors?: Array<{ code: string; message: string }>;
  replayed?: true;
}

const results = (reply: HttpReply): ItemResult[] => reply.body.data.results as ItemResult[];

describe('emit-events-ws', () => {
  test('one answer per item, in order; a bad item refuses only itself; the good ones are delivered', async () => {
    const client = await TestSocket.connect(node, token);
    await client.register(onEvent('announcements'));
    const reply = await batch({
      events: [
        { name: 'announcements', eventData: { n: 1 } },
        { name: 'no-such-event', eventData: {} },
        { name: 'announcements', eventData: 'not an object' },
        'not an item',
        { name: 'announcements', eventData: { n: 2 } },
      ],
    });
    assert.equal(reply.status, 200);
    assert.deepEqual(results(reply).map((result) => [result.statusCode, result.errors?.[0]?.code]), [
      [200, undefined], [404, 'UNKNOWN_EVENT'], [400, 'BAD_REQUEST'], [400, 'BAD_REQUEST'], [200, undefined],
    ]);
    assert.deepEqual(results(reply)[0]!.data, { name: 'announcements', nodes: 1 });
    assert.match(results(reply)[2]!.errors![0]!.message, /events\[2\]\.eventData must be an object/);
    const got = [await client.next('NOTIFICATION'), await client.next('NOTIFICATION')];
    assert.deepEqual(got.map((frame) => (frame.response.eventData as { n: number }).n).sort(), [1, 2]);
    await client.close();
  });

  test('each item\'s idempotencyKey: a repeat in a later batch (or a single emit) is answered replayed, and not published', async () => {
    const first = await batch({ events: [{ name: 'announcements', eventData: { n: 1 }, idempotencyKey: 'batch-k1' }] });
    assert.deepEqual(results(first)[0]!.replayed, undefined);
    const again = await batch({ events: [{ name: 'announcements', eventData: { n: 1 }, idempotencyKey: 'batch-k1' }, { name: 'announcements', eventData: { n: 2 }, idempotencyKey: 'batch-k1' }] });
    assert.deepEqual(results(again).map((result) => [result.statusCode, result.replayed, result.errors?.[0]?.code]), [[200, true, undefined], [422, undefined, 'IDEMPOTENCY_KEY_REUSED']]);
    const bad = await batch({ events: [{ name: 'announcements', eventData: {}, idempotencyKey: 7 }, { name: 'announcements', eventData: {}, idempotencyKey: '' }] });
    assert.deepEqual(results(bad).map((result) => result.statusCode), [400, 400]);
  });

  test('the batch itself: its token first, events an array of 1 to emit.maxBatchEvents, a JSON body', async () => {
    assert.equal((await batch({ events: [] }, {})).status, 401);
    for (const body of [{}, { events: {} }, { events: [] }, { events: Array.from({ length: 51 }, () => ({ name: 'announcements', eventData: {} })) }]) {
      const refused = await batch(body);
      assert.deepEqual([refused.status, refused.body.errors[0].code], [400, 'BAD_REQUEST'], JSON.stringify(body).slice(0, 60));
    }
    assert.match((await batch({ events: [] })).body.errors[0].message, /a batch holds 1 to 50 events \(emit.maxBatchEvents\); this one holds 0/);
    assert.equal((await batch('[1]')).status, 400);
  });

  test('property: any batch is answered 200 with one result per item (or 400 whole), never a 5xx but a 503', async () => {
    const known = new Set<string>(Object.values(ErrorCode));
    const item = fc.oneof(
      fc.record({ name: fc.constantFrom('announcements', 'order-updates', 'no-such-event', '', 5), eventData: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 })) }, { requiredKeys: [] }),
      fc.record({ name: fc.jsonValue({ maxDepth: 1 }), eventData: fc.jsonValue({ maxDepth: 2 }), idempotencyKey: fc.oneof(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 })) }, { requiredKeys: [] }),
      fc.jsonValue({ maxDepth: 2 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.record({ events: fc.array(item, { maxLength: 60 }) }), fc.jsonValue({ maxDepth: 2 })), async (body) => {
        const reply = await batch(body);
        assert.ok(reply.status === 200 || reply.status === 400, `${reply.status} ${JSON.stringify(reply.body).slice(0, 200)}`);
        if (reply.status !== 200) return assert.equal(reply.body.errors[0].code, 'BAD_REQUEST');
        const answered = results(reply);
        assert.equal(answered.length, (body as { events: unknown[] }).events.length);
        for (const result of answered) {
          if (result.statusCode === 200) assert.equal(result.success, true);
          else assert.ok(result.statusCode < 500 || result.statusCode === 503, JSON.stringify(result));
          for (const error of result.errors ?? []) assert.ok(known.has(error.code), error.code);
        }
      }),
      { numRuns: FUZZ_RUNS },
    );
    // The node still delivers after all of it.
    assert.equal((await emit(node, token, 'announcements', { after: true })).status, 200);
  });
});
