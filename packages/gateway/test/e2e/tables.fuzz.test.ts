/**
 * Property-based tests of the table API's inputs (conventions: every surface that takes input is fuzzed): whatever
 * the query, the path, the body or its content type, the answer is a 2xx, or a 4xx JSON envelope with a catalogue
 * code, never a 5xx; and the node is still up and delivering afterwards.
 * HERALD_FUZZ_RUNS sets the runs per property (default 150, a few seconds in all).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ErrorCode } from '@herald/protocol';
import { TestSocket, apiToken, inserts, personToken, saveTo, startNode, tableCall, type TableReply, type TestNode } from '../support/gateway.ts';

const RUNS = Number(process.env.HERALD_FUZZ_RUNS) || 150;
const MAX_PAGE = 50;

let node: TestNode;
let tokens: Array<{ api?: string; person?: string }>;

before(async () => {
  node = await startNode((raw) => {
    raw.instances.mongodb.databases.am_bench.collections.notes = { access: 'public', hidden: ['secret'] };
    raw.tables = { pageSize: 20, maxPageSize: MAX_PAGE, maxRowBytes: 512, maxSaveBytes: 8192 };
    raw.rateLimit = { tableCalls: { burst: 1_000_000 }, apiUserTableCalls: { burst: 1_000_000 } };
  });
  const api = await apiToken(node);
  tokens = [{}, { api }, { api, person: await personToken(node, 'NICK', 'WAHLBERG') }, { api: 'garbage' }];
});
after(() => node.close());

/** A defined answer: 2xx with rows, or a 4xx envelope whose code is in the catalogue and whose statusCode is the status. */
function assertDefined(reply: TableReply, what: string): void {
  assert.ok(reply.status < 500, `${what}: ${reply.status} ${JSON.stringify(reply.body)}`);
  if (reply.status < 300) {
    assert.ok(Array.isArray(reply.body.data), what);
    return;
  }
  assert.ok(reply.status >= 400, what);
  assert.equal(reply.body.statusCode, reply.status, what);
  const code = reply.body.errors?.[0]?.code ?? '';
  assert.ok(Object.hasOwn(ErrorCode, code), `${what}: ${code}`);
}

const collection = fc.oneof(fc.constantFrom('inserts_public', 'customers', 'notes', 'nope'), fc.string({ maxLength: 120 }).map(encodeURIComponent));
const caller = fc.nat({ max: 3 });

/** JSON-ish values that reach deep: fast-check's own, and nestings past MAX_JSON_DEPTH. */
const deep = fc.integer({ min: 60, max: 300 }).map((depth) => {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { d: value };
  return value;
});
const value = fc.oneof({ weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }) }, { weight: 1, arbitrary: deep });
const row = fc.dictionary(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('secret', '_id', '$where', '__proto__', 'constructor')), value, { maxKeys: 6 });

const filterValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.record({ $in: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 4 }) }),
  fc.record({ $eq: fc.jsonValue({ maxDepth: 1 }) }),
  fc.dictionary(fc.constantFrom('$gt', '$regex', '$where', '$ne', '$in'), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
);
const filter = fc.dictionary(fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('$and', '$or', 'secret', 'sku', 'customer_id')), filterValue, { maxKeys: 4 });
const findText = fc.oneof(filter.map((f) => JSON.stringify(f)), deep.map((d) => JSON.stringify({ $and: [d] })), fc.string({ maxLength: 40 }), fc.json({ maxDepth: 3 }));
const count = fc.oneof(fc.integer({ min: -5, max: MAX_PAGE + 5 }).map(String), fc.string({ maxLength: 12 }), fc.constantFrom('1e3', '0x10', ' 5', '5 ', '99999999999'));

describe('the table API under generated input', () => {
  test('GET: any limit, skip and find (repeated or not) answers rows or a 4xx envelope, and never more than the page', async () => {
    const query = fc.array(fc.tuple(fc.constantFrom('limit', 'skip', 'find', 'other'), fc.oneof(count, findText)), { maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(collection, caller, query, async (table, who, params) => {
        const search = new URLSearchParams(params).toString();
        const reply = await tableCall(node, 'GET', `${table}?${search}`, tokens[who]);
        assertDefined(reply, `GET ${table}?${search}`);
        if (reply.status === 200) {
          assert.ok(reply.body.data.length <= MAX_PAGE);
          const hidden = table === 'notes' ? 'secret' : 'password_hash';
          assert.ok(reply.body.data.every((shown: Record<string, unknown>) => !(hidden in shown)));
        }
      }),
      { numRuns: RUNS },
    );
  });

  test('save: any body, JSON or not, under any content type, answers the rows as saved or a 4xx envelope', async () => {
    const body = fc.oneof(
      { weight: 3, arbitrary: row.map((r) => JSON.stringify(r)) },
      { weight: 3, arbitrary: fc.array(row, { maxLength: 20 }).map((rows) => JSON.stringify(rows)) },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)) },
      { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
      { weight: 1, arbitrary: fc.constantFrom('', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}', '{"a":1', `[${'{}'.repeat(3)}]`) },
    );
    const type = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/xml', 'application/x-www-form-urlencoded', 'APPLICATION/JSON');
    await fc.assert(
      fc.asyncProperty(collection, caller, body, type, async (table, who, text, contentType) => {
        const reply = await tableCall(node, 'POST', saveTo(table), tokens[who], text, { 'content-type': contentType });
        assertDefined(reply, `POST ${table} ${contentType} ${text.slice(0, 200)}`);
        if (reply.status !== 200) return;
        const hidden = table === 'notes' ? 'secret' : 'password_hash';
        assert.ok(reply.body.data.every((saved: Record<string, unknown>) => ['string', 'number'].includes(typeof saved._id) && !(hidden in saved)));
      }),
      { numRuns: RUNS },
    );
  });

  test('afterwards the node is ready and still delivers a saved row to its subscriber', async () => {
    assert.equal((await fetch(`${node.http}/readyz`)).status, 200);
    const listener = await TestSocket.connect(node, tokens[1]?.api ?? '');
    await listener.register(inserts('inserts_public', { condition: { conditionType: 'RESPONSE', criteria: { sku: 'after-fuzz' } } }));
    assert.equal((await tableCall(node, 'POST', saveTo('inserts_public'), {}, { sku: 'after-fuzz' })).status, 200);
    assert.equal(((await listener.next('NOTIFICATION')).response.eventData as { sku: string }).sku, 'after-fuzz');
    await listener.close();
  });
});
