/**
 * Frames fuzzed against a real node: whatever a client sends, it gets one defined answer (the reply of its objType, or
 * an ERROR frame), never INTERNAL, its connection stays open, other clients are served, and the node keeps nothing of
 * it once it unregisters. HERALD_FUZZ_RUNS=<n> searches longer.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode, parseClientFrame, type ServerFrame } from '@herald/protocol';
import { frameText, fuzzRuns } from '../../../protocol/test/arbitraries.ts';
import { TestSocket, apiToken, emit, metric, onEvent, personToken, startNode, type TestNode } from '../support/gateway.ts';

let node: TestNode;
let api: string;
let nick: string;

before(async () => {
  node = await startNode((raw) => {
    raw.websocket = { maxSubscriptionsPerConnection: 20 };
  });
  api = await apiToken(node);
  nick = await personToken(node, 'NICK', 'WAHLBERG');
});
after(() => node.close());

const CODES = new Set<string>(Object.values(ErrorCode));

function assertDefined(errors: ReadonlyArray<{ code: string }>): void {
  for (const { code } of errors) assert.ok(CODES.has(code) && code !== ErrorCode.INTERNAL, `refused with ${code}`);
}

/** The reply to the frame just sent: of its objType when it parses, else ERROR. */
async function replyTo(client: TestSocket, frame: string | Buffer): Promise<ServerFrame> {
  const parsed = parseClientFrame(String(frame));
  client.socket.send(frame);
  if (!parsed.ok) return client.next('ERROR');
  return client.next(parsed.value.objType);
}

test('every frame gets one defined answer, the connection stays, and nothing is left behind', async () => {
  const client = await TestSocket.connect(node, api, nick);
  const binary = fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes));
  await fc.assert(
    fc.asyncProperty(fc.oneof({ weight: 9, arbitrary: frameText }, { weight: 1, arbitrary: binary }), async (frame) => {
      const reply = await replyTo(client, frame);
      if (reply.type === 'ERROR') assertDefined(reply.errors);
      else if (reply.type === 'REGISTER' || reply.type === 'UNREGISTER') {
        for (const entry of reply.response.invalidOnEvents) assertDefined(entry.errors);
      } else if (reply.type === 'REFRESH') {
        if ('errors' in reply) assertDefined(reply.errors);
      } else assert.fail(`answered ${reply.type}`);
      assert.equal(client.socket.readyState, client.socket.OPEN);
    }),
    { numRuns: fuzzRuns(300) },
  );
  assert.equal(await metric(node, 'herald_internal_errors_total', { where: 'frame' }), 0);
  // The node still delivers, to this client and to another.
  const other = await TestSocket.connect(node, api);
  await other.register(onEvent('announcements'));
  assert.equal((await emit(node, api, 'announcements', { after: 'fuzz' })).status, 200);
  assert.deepEqual((await other.next('NOTIFICATION')).response.eventData, { after: 'fuzz' });
  await other.close();
  await client.close();
  assert.equal(await metric(node, 'herald_subscriptions'), 0, 'a subscription outlived its connection');
  assert.equal(await metric(node, 'herald_routes'), 0, 'a route outlived its subscriptions');
});
