/** The protocol's parsers: every input answers a defined result, and what they accept keeps the limits. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_FRAME_LIMITS,
  ErrorCode,
  MAX_CRITERIA_FIELDS,
  MAX_FIELD_NAME_LENGTH,
  MAX_SELECT_FIELDS,
  MAX_TOKEN_LENGTH,
  parseClientFrame,
  parseEventId,
  parseOnEvent,
  utf8Length,
  type WireError,
} from '../src/index.ts';
import { frameText, fuzzRuns, refreshFrame, registerEntry, unregisterEntry } from './arbitraries.ts';

const CODES = new Set<string>(Object.values(ErrorCode));
/** A refusal names a catalogue code, is never INTERNAL, and its message does not grow with the input. */
function assertRefusal(errors: WireError[]): void {
  assert.equal(errors.length, 1);
  const [{ code, message }] = errors as [WireError];
  assert.ok(CODES.has(code) && code !== ErrorCode.INTERNAL, code);
  assert.ok(message.length <= 400, `a message of ${message.length} characters`);
}

test('parseClientFrame answers every text: a frame of a known objType with at most maxEntries entries, or one refusal', () => {
  fc.assert(
    fc.property(frameText, (text) => {
      const parsed = parseClientFrame(text);
      if (!parsed.ok) return assertRefusal(parsed.errors);
      if (parsed.value.objType === 'REFRESH') return;
      assert.ok(parsed.value.objType === 'REGISTER' || parsed.value.objType === 'UNREGISTER');
      assert.ok(parsed.value.onEvents.length <= DEFAULT_FRAME_LIMITS.maxEntries);
    }),
    { numRuns: fuzzRuns(500) },
  );
});

test('a REFRESH is accepted with an API token and an optional person token, each a string of 1 to MAX_TOKEN_LENGTH, and nothing else', () => {
  const isToken = (value: unknown) => typeof value === 'string' && value.length > 0 && value.length <= MAX_TOKEN_LENGTH;
  fc.assert(
    fc.property(refreshFrame, (text) => {
      const parsed = parseClientFrame(text);
      const sent = JSON.parse(text) as Record<string, unknown>;
      const personOk = sent.personToken === undefined || sent.personToken === null || isToken(sent.personToken);
      assert.equal(parsed.ok, isToken(sent.apiToken) && personOk, text.slice(0, 200));
      if (!parsed.ok) return assertRefusal(parsed.errors);
      assert.deepEqual(parsed.value, {
        objType: 'REFRESH',
        apiToken: sent.apiToken,
        ...(typeof sent.personToken === 'string' && { personToken: sent.personToken }),
      });
    }),
    { numRuns: fuzzRuns(500) },
  );
});

test('parseOnEvent accepts only entries within the limits, and refuses every other with one code', () => {
  fc.assert(
    fc.property(registerEntry, (entry) => {
      const parsed = parseOnEvent(entry);
      if (!parsed.ok) return assertRefusal(parsed.errors);
      const { apiName, select, condition } = parsed.value;
      assert.ok(apiName.length > 0 && apiName.length <= MAX_FIELD_NAME_LENGTH);
      if (select) assert.ok(select.length <= MAX_SELECT_FIELDS && select.every((field) => field.length > 0 && field.length <= MAX_FIELD_NAME_LENGTH));
      const fields = Object.entries(condition?.criteria ?? {});
      assert.ok(fields.length <= MAX_CRITERIA_FIELDS);
      for (const [field, value] of fields) {
        assert.ok(field.length > 0 && !/[,|]/.test(field));
        assert.ok(['string', 'number', 'boolean'].includes(typeof value));
        if (typeof value === 'string') assert.ok(utf8Length(value) <= DEFAULT_FRAME_LIMITS.maxCriteriaValueBytes);
      }
    }),
    { numRuns: fuzzRuns(1000) },
  );
});

test('parseEventId accepts a name of 1 to 128 characters and nothing else', () => {
  fc.assert(
    fc.property(unregisterEntry, (entry) => {
      const parsed = parseEventId(entry);
      if (!parsed.ok) return assertRefusal(parsed.errors);
      assert.ok(parsed.value.length > 0 && parsed.value.length <= MAX_FIELD_NAME_LENGTH);
    }),
    { numRuns: fuzzRuns(300) },
  );
});

test('the limits hold at their edges', () => {
  const entries = (n: number) => JSON.stringify({ objType: 'REGISTER', onEvents: Array(n).fill({}) });
  assert.equal(parseClientFrame(entries(100)).ok, true);
  assert.equal(parseClientFrame(entries(101)).ok, false);
  assert.equal(parseClientFrame(entries(3), { maxEntries: 2, maxCriteriaValueBytes: 1 }).ok, false);
  const deep = (levels: number) => `{"objType":"REGISTER","onEvents":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
  assert.equal(parseClientFrame(deep(16)).ok, true);
  assert.deepEqual(parseClientFrame(deep(17)), { ok: false, errors: [{ code: 'BAD_FRAME', message: 'the frame nests deeper than 16 levels' }] });
  const withValue = (value: string) => ({ eventType: 'CUSTOM_WS_EVENTS', apiName: 'e', condition: { conditionType: 'RESPONSE', criteria: { k: value } } });
  assert.equal(parseOnEvent(withValue('€'.repeat(85))).ok, true); // 255 bytes
  assert.equal(parseOnEvent(withValue('€'.repeat(86))).ok, false); // 258 bytes
  assert.equal(parseOnEvent(withValue('x'.repeat(300)), { maxEntries: 1, maxCriteriaValueBytes: 300 }).ok, true);
  const long = 'x'.repeat(100_000);
  const refused = parseClientFrame(JSON.stringify({ objType: long }));
  assert.equal(refused.ok, false);
  assert.ok(!refused.ok && refused.errors[0]!.message.length < 200);
});
