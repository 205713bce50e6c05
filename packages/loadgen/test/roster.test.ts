/** Who each client is and where it connects from: the plans a load process holds tens of thousands of. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sourceAddress } from '../src/source-addresses.ts';
import { planClient, registerFrameOf, type Roster } from '../src/roster.ts';

const roster: Roster = {
  wsUrls: ['ws://127.0.0.1:1001', 'ws://127.0.0.1:1002/'],
  apiToken: 'api',
  personTokens: ['p0', 'p1', 'p2'],
  customerIds: ['10', '11', '12'],
  event: 'announcements',
  criteria: 'client',
};

test('client i connects to the (i mod n)-th node with person i mod p, and clients of one node and person share one URL string', () => {
  const plans = Array.from({ length: 12 }, (_, i) => planClient(roster, i));
  assert.equal(plans[0]!.url, 'ws://127.0.0.1:1001/?x-am-authorization=api&x-am-user-authorization=p0');
  assert.equal(plans[1]!.url, 'ws://127.0.0.1:1002/?x-am-authorization=api&x-am-user-authorization=p1');
  assert.equal(plans[5]!.url, 'ws://127.0.0.1:1002/?x-am-authorization=api&x-am-user-authorization=p2');
  // Client 6 has client 0's node and person: the very same string, not a copy.
  assert.ok(Object.is(plans[6]!.url, plans[0]!.url));
  assert.deepEqual(plans.map((plan) => plan.recipient), plans.map((_, i) => String(i)));
});

test('the REGISTER frame is built from the plan when it is sent', () => {
  assert.equal(registerFrameOf(planClient(roster, 7)), '{"objType":"REGISTER","onEvents":[{"eventType":"CUSTOM_WS_EVENTS","apiName":"announcements","condition":{"conditionType":"RESPONSE","criteria":{"recipientId":"7"}}}]}');
  assert.equal(registerFrameOf(planClient({ ...roster, criteria: 'none' }, 7)), '{"objType":"REGISTER","onEvents":[{"eventType":"CUSTOM_WS_EVENTS","apiName":"announcements"}]}');
  assert.equal(registerFrameOf(planClient({ ...roster, event: undefined }, 7)), undefined);
});

test('source addresses: per-address clients each from 127.0.0.2 on, past 127.0.0.255 into 127.0.1.x', () => {
  assert.equal(sourceAddress(0, 0), undefined);
  assert.equal(sourceAddress(0, 5000), '127.0.0.2');
  assert.equal(sourceAddress(4999, 5000), '127.0.0.2');
  assert.equal(sourceAddress(5000, 5000), '127.0.0.3');
  assert.equal(sourceAddress(253 * 5000, 5000), '127.0.0.255');
  assert.equal(sourceAddress(254 * 5000, 5000), '127.0.1.0');
  assert.equal(sourceAddress(800_999, 2000), '127.0.1.146');
});
