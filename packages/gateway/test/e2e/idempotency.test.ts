/**
 * Emits with an Idempotency-Key on in-process nodes: a repeat is answered as the first was (idempotent-replayed) and
 * delivered to nobody, on the node that took the first or another one of its fleet; another body under the key is 422;
 * a repeat while the first is being published is 409; a bad key is 400 naming the header; keys are the API user's
 * own. On the fast path and on fastify alike.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Broker } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import { passThrough } from '../support/brokers.ts';
import { TestSocket, apiToken, metric, onEvent, startNode, type TestNode } from '../support/gateway.ts';

interface Answer {
  status: number;
  replayed: string | null;
  retryAfter: string | null;
  body: { data?: unknown; errors?: Array<{ code: string; message: string }> };
}

async function emitWithKey(node: TestNode, token: string, key: string | undefined, name: string, eventData: object): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-am-authorization': token };
  if (key !== undefined) headers['idempotency-key'] = key;
  const response = await fetch(`${node.http}/api/system-api/bench/emit-event-ws`, { method: 'POST', headers, body: JSON.stringify({ name, eventData }) });
  return { status: response.status, replayed: response.headers.get('idempotent-replayed'), retryAfter: response.headers.get('retry-after'), body: (await response.json()) as Answer['body'] };
}

/** Two nodes of one fleet (one in-process bus): `fastPath` on, or every emit through fastify. */
async function fleetOfTwo(fastPath: boolean): Promise<[TestNode, TestNode]> {
  const bus = new MemoryBus();
  const adjust = (raw: Record<string, any>) => {
    raw.server.emitFastPath = fastPath;
    // Another API user allowed to emit the same events: its keys are its own.
    raw.apiUsers.other = { password: 'other-password', groups: ['bench'] };
  };
  return [await startNode(adjust, { broker: bus.broker('one') }), await startNode(adjust, { broker: bus.broker('two') })];
}

for (const fastPath of [true, false]) {
  describe(`an emit with an Idempotency-Key (${fastPath ? 'fast path' : 'fastify'})`, () => {
    let nodes: [TestNode, TestNode];
    let token: string;
    before(async () => {
      nodes = await fleetOfTwo(fastPath);
      token = await apiToken(nodes[0]);
    });
    after(() => Promise.all(nodes.map((node) => node.close())));

    test('a repeat on either node is answered as the first was and delivered to nobody', async () => {
      const client = await TestSocket.connect(nodes[1], token);
      await client.register(onEvent('announcements'));
      const first = await emitWithKey(nodes[0], token, 'order-1', 'announcements', { n: 1 });
      assert.deepEqual([first.status, first.replayed, first.body.data], [200, null, { name: 'announcements', nodes: 1 }]);
      for (const node of nodes) {
        const repeat = await emitWithKey(node, token, 'order-1', 'announcements', { n: 1 });
        assert.deepEqual([repeat.status, repeat.replayed, repeat.body], [200, 'true', first.body]);
      }
      await emitWithKey(nodes[0], token, undefined, 'announcements', { n: 2 });
      const got = [await client.next('NOTIFICATION'), await client.next('NOTIFICATION')];
      assert.deepEqual(got.map((frame) => (frame.response.eventData as { n: number }).n), [1, 2], 'the repeats delivered nothing');
      assert.equal(await metric(nodes[1], 'herald_emits_idempotent_total', { result: 'replayed' }), 1);
      await client.close();
    });

    test('the key reused for another body is 422 IDEMPOTENCY_KEY_REUSED, and nothing is published', async () => {
      assert.equal((await emitWithKey(nodes[0], token, 'order-2', 'announcements', { n: 1 })).status, 200);
      const reused = await emitWithKey(nodes[1], token, 'order-2', 'announcements', { n: 2 });
      assert.deepEqual([reused.status, reused.body.errors?.[0]?.code], [422, 'IDEMPOTENCY_KEY_REUSED']);
      assert.match(reused.body.errors![0]!.message, /"order-2" was used for another emit within the last 300 s/);
    });

    test('a bad key is 400 naming the header; keys are each API user\'s own', async () => {
      for (const bad of ['', 'a'.repeat(256), 'tab\there']) {
        const refused = await emitWithKey(nodes[0], token, bad, 'announcements', { n: 1 });
        assert.deepEqual([refused.status, refused.body.errors?.[0]?.code], [400, 'BAD_REQUEST'], JSON.stringify(bad));
        assert.match(refused.body.errors![0]!.message, /idempotency-key header must be 1 to 255 printable ASCII/);
      }
      assert.equal((await emitWithKey(nodes[0], token, 'a'.repeat(255), 'announcements', { n: 1 })).replayed, null);
      assert.equal((await emitWithKey(nodes[0], token, 'shared', 'announcements', { n: 1 })).status, 200);
      const again = await apiToken(nodes[0], 'bench', 'bench');
      assert.equal((await emitWithKey(nodes[0], again, 'shared', 'announcements', { n: 1 })).replayed, 'true', 'the same API user, another token');
      const other = await apiToken(nodes[0], 'other', 'other-password');
      const theirs = await emitWithKey(nodes[0], other, 'shared', 'announcements', { n: 2 });
      assert.deepEqual([theirs.status, theirs.replayed], [200, null], 'another API user\'s same key is another key (another body, not 422)');
    });
  });
}

test('a repeat while the first is being published is 409 IDEMPOTENCY_KEY_IN_USE with retry-after; once it is, the answer', async () => {
  const inner = new MemoryBus().broker('gated');
  let release: () => void = () => {};
  const publishing = Promise.withResolvers<void>();
  const gated: Broker = {
    ...passThrough(inner),
    // The first publish waits until released, as one on its way through Redis.
    publish: (event, eventData, once) => {
      publishing.resolve();
      return new Promise<void>((resolve) => (release = resolve)).then(() => inner.publish(event, eventData, once));
    },
  };
  const node = await startNode(() => {}, { broker: gated });
  try {
    const token = await apiToken(node);
    const first = emitWithKey(node, token, 'slow', 'announcements', { n: 1 });
    await publishing.promise;
    const during = await emitWithKey(node, token, 'slow', 'announcements', { n: 1 });
    assert.deepEqual([during.status, during.retryAfter, during.body.errors?.[0]?.code], [409, '1', 'IDEMPOTENCY_KEY_IN_USE']);
    release();
    assert.equal((await first).status, 200);
    assert.equal((await emitWithKey(node, token, 'slow', 'announcements', { n: 1 })).replayed, 'true');
  } finally {
    await node.close();
  }
});
