/** Encoders: what a client parses is what was meant. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { CONNECTED_FRAME, encodeErrors, encodeNotification, EventType } from '../src/index.ts';
import { fuzzRuns } from './arbitraries.ts';

test('encodeNotification parses back to the notification, with eventData or without', () => {
  fc.assert(
    fc.property(fc.string(), fc.constantFrom(...Object.values(EventType)), fc.option(fc.jsonValue(), { nil: undefined }), (eventId, eventType, eventData) => {
      const json = eventData === undefined ? undefined : JSON.stringify(eventData);
      const frame = JSON.parse(encodeNotification(eventId, eventType, json));
      const response = json === undefined ? { eventId, eventType } : { eventId, eventType, eventData: JSON.parse(json) };
      assert.deepEqual(frame, { type: 'NOTIFICATION', response });
    }),
    { numRuns: fuzzRuns(300) },
  );
});

test('CONNECTED and error frames are the JSON of their types', () => {
  assert.deepEqual(JSON.parse(CONNECTED_FRAME), { type: 'CONNECTED', response: { connected: true } });
  const errors = [{ code: 'BAD_FRAME' as const, message: 'm' }];
  assert.deepEqual(JSON.parse(encodeErrors('ERROR', errors)), { type: 'ERROR', errors });
});
