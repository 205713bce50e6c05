/**
 * The control API fuzzed against a real node: whatever body or query it is given, one defined answer (200, or a 4xx
 * envelope with a catalogue code), never a 500; and the node still serves its clients. HERALD_FUZZ_RUNS searches longer.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode } from '@herald/protocol';
import { fuzzRuns } from '../../../protocol/test/arbitraries.ts';
import { control, presence } from '../support/control.ts';
import { TestSocket, apiToken, metric, post, startNode, type HttpReply, type TestNode } from '../support/gateway.ts';

let node: TestNode;
let api: string;

before(async () => {
  node = await startNode();
  api = await apiToken(node);
});
after(() => node.close());

const CODES = new Set<string>(Object.values(ErrorCode));

function assertDefined({ status, body }: HttpReply): void {
  if (status === 200) return assert.equal(body.success, true);
  assert.ok(status >= 400 && status < 500, `answered ${status}: ${JSON.stringify(body)}`);
  for (const { code } of body.errors) assert.ok(CODES.has(code) && code !== ErrorCode.INTERNAL, code);
}

const anyJson = fc.jsonValue({ maxDepth: 4 });
const text = fc.oneof(fc.constantFrom('customers', 'NICK', 'bench', 'a:b', '', 'é'.repeat(70)), fc.string({ maxLength: 20 }), fc.string({ minLength: 1020, maxLength: 1030 }));
/** People and API users nobody here is: a disconnect or revoke that passes closes nothing of the node's own client. */
const person = fc.record({ generator: fc.oneof(text, anyJson), id: fc.oneof(text.map((id) => `fuzz-${id}`), anyJson) }, { requiredKeys: [] });
const body = fc.oneof(
  { weight: 4, arbitrary: fc.record({ person: fc.oneof(person, anyJson), apiUser: fc.oneof(text.map((name) => `fuzz${name}`), anyJson), reconnect: anyJson, reason: fc.oneof(text, anyJson) }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: anyJson },
);

test('every disconnect and revoke body gets one defined answer, never a 500', async () => {
  const client = await TestSocket.connect(node, api);
  await fc.assert(
    fc.asyncProperty(fc.constantFrom('disconnect', 'revoke') as fc.Arbitrary<'disconnect' | 'revoke'>, body, async (action, sent) => {
      assertDefined(await control(node, action, sent, api));
    }),
    { numRuns: fuzzRuns(300) },
  );
  for (const raw of ['{not json', '', 'null', '"x"']) assertDefined(await post(`${node.http}/api/system-api/bench/disconnect`, raw, { 'x-am-authorization': api }));
  assert.equal(client.socket.readyState, client.socket.OPEN, 'no fuzzed call named this client');
  await client.close();
  assert.equal(await metric(node, 'herald_internal_errors_total', { where: 'broker_message' }), 0);
});

test('every presence query gets one defined answer, never a 500', async () => {
  const query = fc.dictionary(fc.constantFrom('person', 'event', 'other'), fc.oneof(text, fc.string({ maxLength: 10 }).map((id) => `customers:${id}`)), { maxKeys: 3 });
  await fc.assert(
    fc.asyncProperty(query, async (sent) => assertDefined(await presence(node, sent, api))),
    { numRuns: fuzzRuns(200) },
  );
});
