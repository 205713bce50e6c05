/** The client's pure parts: the reconnect delay, reading a JWT's expiry, the handle table. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jwtExpiresAt, reconnectDelay, reconnectDelayAfter } from '../src/index.ts';
import { Subscriptions } from '../src/subscriptions.ts';
import { msUntilRefresh } from '../src/tokens.ts';

test('reconnectDelay: full jitter between the bounds, inclusive', () => {
  assert.equal(reconnectDelay(50, 150, () => 0), 50);
  assert.equal(reconnectDelay(50, 150, () => 0.5), 100);
  assert.equal(reconnectDelay(50, 150, () => 0.999_999), 150);
  assert.equal(reconnectDelay(1000, 1000, () => 0.7), 1000);
  for (let i = 0; i < 1000; i++) {
    const delay = reconnectDelay(1000, 5000);
    assert.ok(delay >= 1000 && delay <= 5000, String(delay));
  }
});

test("reconnectDelayAfter: the first attempt after a draining node's 1001 or a cut-off node's 4004 waits up to minMs; other closes and later attempts, the full window", () => {
  const top = () => 0.999_999;
  for (const paced of [1001, 4004]) {
    assert.equal(reconnectDelayAfter(paced, 1, 1000, 5000, top), 1000);
    assert.equal(reconnectDelayAfter(paced, 1, 1000, 5000, () => 0), 0);
    assert.equal(reconnectDelayAfter(paced, 2, 1000, 5000, () => 0), 1000);
  }
  assert.equal(reconnectDelayAfter(1006, 1, 1000, 5000, () => 0), 1000);
  assert.equal(reconnectDelayAfter(1006, 1, 1000, 5000, top), 5000);
  assert.equal(reconnectDelayAfter(1013, 1, 1000, 5000, () => 0), 1000);
});

const jwt = (payload: object) => `eyJhbGciOiJIUzI1NiJ9.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.c2ln`;

test('jwtExpiresAt reads exp without checking the signature, and answers undefined for anything else', () => {
  // A non-ASCII claim makes the payload use base64url's own characters and multi-byte UTF-8.
  assert.equal(jwtExpiresAt(jwt({ sub: 'Zoë ~~~ ???', exp: 1_800_000_000 })), 1_800_000_000_000);
  assert.equal(jwtExpiresAt(jwt({ sub: 'no exp' })), undefined);
  assert.equal(jwtExpiresAt(jwt({ exp: '1800000000' })), undefined);
  assert.equal(jwtExpiresAt('opaque-token'), undefined);
  assert.equal(jwtExpiresAt('a.%%%.c'), undefined);
  assert.equal(jwtExpiresAt('a.bm90IGpzb24.c'), undefined);
});

test('msUntilRefresh: the first expiry of the tokens less the margin; unknown if one cannot be read', () => {
  const api = jwt({ exp: 1000 });
  const person = jwt({ exp: 900 });
  assert.equal(msUntilRefresh({ apiToken: api }, 100_000, 800_000), 100_000);
  assert.equal(msUntilRefresh({ apiToken: api, personToken: person }, 100_000, 800_000), 0);
  assert.equal(msUntilRefresh({ apiToken: api, personToken: 'opaque' }, 0, 0), undefined);
});

const valid = (eventId: string, apiName: string) => ({ eventType: 'CUSTOM_WS_EVENTS' as const, apiName, getEventData: true, eventId });

test('Subscriptions: handles stay when the eventIds change, even when two swap', () => {
  const subscriptions = new Subscriptions();
  assert.equal(subscriptions.add(valid('a', 'one')), 'a');
  assert.equal(subscriptions.add(valid('b', 'two')), 'b');
  assert.equal(subscriptions.add(valid('a', 'one')), 'a');
  assert.deepEqual(subscriptions.held().map(([handle, onEvent]) => [handle, onEvent.apiName]), [['a', 'one'], ['b', 'two']]);

  subscriptions.rebind(new Map([['a', 'b'], ['b', 'a']]));
  assert.equal(subscriptions.handleOf('b'), 'a');
  assert.equal(subscriptions.handleOf('a'), 'b');
  assert.equal(subscriptions.eventIdOf('a'), 'b');
  assert.equal(subscriptions.add(valid('b', 'one')), 'a', 'registering again answers the existing handle');

  subscriptions.rebind(new Map([['a', 'x'], ['b', undefined]]));
  assert.deepEqual(subscriptions.held().map(([handle]) => handle), ['a']);
  assert.equal(subscriptions.handleOf('x'), 'a');
  assert.equal(subscriptions.eventIdOf('unknown'), 'unknown');
  assert.equal(subscriptions.remove('x'), 'a');
  assert.deepEqual(subscriptions.held(), []);
});

test('Subscriptions: positions of events with history, a repeat told from a new one, a new epoch noticed', () => {
  const subscriptions = new Subscriptions();
  const handle = subscriptions.add(valid('h', 'kept'));
  assert.equal(subscriptions.sinceOf(handle), undefined);
  subscriptions.registered(handle, { ...valid('h', 'kept'), offset: 4, epoch: 'e1' });
  assert.deepEqual(subscriptions.sinceOf(handle), { offset: 4, epoch: 'e1' });
  assert.deepEqual([5, 5, 3, 6].map((offset) => subscriptions.seen(handle, offset, 'e1')), ['new', 'duplicate', 'duplicate', 'new']);
  assert.equal(subscriptions.seen(handle, 1, 'e2'), 'epoch_changed');
  assert.deepEqual(subscriptions.sinceOf(handle), { offset: 1, epoch: 'e2' });
  // A resume the node answered whole keeps the position (the replay moves it on); any other takes the reply's.
  subscriptions.registered(handle, { ...valid('h2', 'kept'), offset: 9, epoch: 'e2', recovered: true });
  assert.deepEqual(subscriptions.sinceOf(handle), { offset: 1, epoch: 'e2' });
  assert.equal(subscriptions.handleOf('h2'), handle, 'the reply names the handle at once');
  subscriptions.registered(handle, { ...valid('h2', 'kept'), offset: 9, epoch: 'e3', recovered: false });
  assert.deepEqual(subscriptions.sinceOf(handle), { offset: 9, epoch: 'e3' });
  subscriptions.rebind(new Map([[handle, undefined]]));
  assert.equal(subscriptions.sinceOf(handle), undefined, 'a refused subscription forgets its position');
});
