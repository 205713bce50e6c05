/**
 * fast-check arbitraries for client frames: valid ones, ones that are almost valid (one field wrong, a limit just
 * passed), and anything at all. Shared by the protocol's property tests and the gateway's frame fuzz suite.
 */
import fc from 'fast-check';

/** Runs per property: a few hundred by default, HERALD_FUZZ_RUNS for a longer search. */
export const fuzzRuns = (fallback: number): number => Number(process.env.HERALD_FUZZ_RUNS) || fallback;

const names = fc.oneof(
  fc.constantFrom('order-updates', 'announcements', 'checked-token', 'recipientId', 'title', 'nope', 'a,b', 'a|b', ''),
  fc.string({ maxLength: 12 }),
  fc.string({ minLength: 120, maxLength: 140 }),
);

const scalars = fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.double(), fc.boolean(), fc.string({ unit: 'grapheme', minLength: 60, maxLength: 300 }));

/** Anything JSON can hold, nested up to a few levels. */
const anyJson = fc.jsonValue({ maxDepth: 4 });

const criteria = fc.oneof(
  { weight: 4, arbitrary: fc.dictionary(names, scalars, { maxKeys: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(names, anyJson, { maxKeys: 20 }) },
  { weight: 1, arbitrary: anyJson },
);

const condition = fc.oneof(
  { weight: 4, arbitrary: fc.record({ conditionType: fc.constant('RESPONSE'), criteria }) },
  { weight: 1, arbitrary: fc.record({ conditionType: anyJson, criteria }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: anyJson },
);

const select = fc.oneof(fc.array(names, { maxLength: 4 }), fc.string({ maxLength: 20 }), fc.array(names, { minLength: 60, maxLength: 70 }), anyJson);

/** A REGISTER entry: usually close to valid, each field sometimes absent or wrong. */
export const registerEntry = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record(
      {
        eventType: fc.oneof(fc.constantFrom('CUSTOM_WS_EVENTS', 'INSTANCES'), anyJson),
        apiName: fc.oneof(names, fc.constant('SCHEMA_POST_BULK_INSERT'), anyJson),
        instance: fc.oneof(fc.constantFrom('mongodb', 'x'), names),
        database: fc.oneof(fc.constantFrom('am_bench'), names),
        collection: fc.oneof(fc.constantFrom('inserts_public', 'customers'), names),
        getEventData: fc.oneof(fc.boolean(), anyJson),
        select,
        condition,
      },
      { requiredKeys: ['eventType', 'apiName'] },
    ),
  },
  { weight: 1, arbitrary: anyJson },
);

export const unregisterEntry = fc.oneof(fc.record({ eventId: fc.oneof(names, anyJson) }), anyJson);

const token = fc.oneof(
  fc.constantFrom('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJOSUNLIn0.c2ln', 'garbage', ''),
  fc.string({ maxLength: 40 }),
  fc.string({ minLength: 8190, maxLength: 8194 }),
  anyJson,
);

/** A REFRESH frame: tokens usually strings, sometimes absent, null, too long or not strings. */
export const refreshFrame = fc
  .record({ objType: fc.constant('REFRESH'), apiToken: token, personToken: fc.oneof(token, fc.constant(null)), onEvents: anyJson }, { requiredKeys: ['objType'] })
  .map((frame) => JSON.stringify(frame));

/** A frame as text: a REGISTER, UNREGISTER or REFRESH of arbitrary content, any JSON at all, or not JSON. */
export const frameText = fc.oneof(
  { weight: 6, arbitrary: fc.array(registerEntry, { maxLength: 6 }).map((onEvents) => JSON.stringify({ objType: 'REGISTER', onEvents })) },
  { weight: 2, arbitrary: fc.array(unregisterEntry, { maxLength: 4 }).map((onEvents) => JSON.stringify({ objType: 'UNREGISTER', onEvents })) },
  { weight: 1, arbitrary: refreshFrame },
  { weight: 1, arbitrary: fc.record({ objType: anyJson, onEvents: anyJson }, { requiredKeys: [] }).map((frame) => JSON.stringify(frame)) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 200 }).map((entries) => JSON.stringify({ objType: 'REGISTER', onEvents: Array(entries).fill({}) })) },
  { weight: 1, arbitrary: fc.integer({ min: 10, max: 3000 }).map((depth) => `{"objType":"REGISTER","onEvents":[${'['.repeat(depth)}${']'.repeat(depth)}]}`) },
  { weight: 1, arbitrary: anyJson.map((value) => JSON.stringify(value)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
);
