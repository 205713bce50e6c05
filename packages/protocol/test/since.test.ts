/** `since` in a REGISTER entry (parseOnEvent): a sound position is taken as it is; anything else is BAD_FRAME for that entry. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { parseOnEvent } from '../src/index.ts';

const entry = (since: unknown) => ({ eventType: 'CUSTOM_WS_EVENTS', apiName: 'kept', since });
const epochs = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/);

test('property: a non-negative safe integer offset and an epoch of up to 64 base64url characters are taken as they are', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), epochs, (offset, epoch) => {
      const parsed = parseOnEvent(entry({ offset, epoch, extra: 'ignored' }));
      assert.ok(parsed.ok);
      assert.deepEqual(parsed.value.since, { offset, epoch });
    }),
  );
});

test('property: any other since is BAD_FRAME, naming since', () => {
  const badOffset = fc.oneof(
    fc.integer({ max: -1 }),
    fc.double({ noInteger: true }),
    fc.constantFrom(Number.MAX_SAFE_INTEGER + 1, Infinity, NaN),
    fc.string(),
    fc.constant(null),
  );
  const badEpoch = fc.oneof(fc.constant(''), fc.string({ minLength: 65, maxLength: 80 }), fc.string().filter((s) => /[^A-Za-z0-9_-]/.test(s)), fc.integer(), fc.constant(null));
  const bad = fc.oneof(
    fc.record({ offset: badOffset, epoch: epochs }),
    fc.record({ offset: fc.nat(), epoch: badEpoch }),
    fc.record({ epoch: epochs }),
    fc.record({ offset: fc.nat() }),
    fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.array(fc.nat())),
  );
  fc.assert(
    fc.property(bad, (since) => {
      const parsed = parseOnEvent(entry(since));
      assert.ok(!parsed.ok, JSON.stringify(since));
      assert.equal(parsed.errors[0]?.code, 'BAD_FRAME');
      assert.match(parsed.errors[0]?.message ?? '', /^since must be/);
    }),
  );
});

test('absent or null since: no since in the entry', () => {
  for (const parsed of [parseOnEvent({ eventType: 'CUSTOM_WS_EVENTS', apiName: 'kept' }), parseOnEvent(entry(null))]) {
    assert.ok(parsed.ok && !('since' in parsed.value));
  }
});
