/**
 * The table API's bounds (issue 24): pages, the size and nesting of a saved row, the save's body, and the rate
 * limits per caller. Each refusal is a 4xx envelope, counted, and the node goes on delivering.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TestSocket, apiToken, inserts, metric, saveTo, startNode, tableCall as call, type RawConfig, type TestNode } from '../support/gateway.ts';

const code = (reply: { status: number; body: { errors?: Array<{ code: string }> } }) => [reply.status, reply.body.errors?.[0]?.code];
const skus = (reply: { body: { data?: Array<{ sku: string }> } }) => reply.body.data?.map((row) => row.sku);

/** A node of its own for the tests of one describe: started (with `adjust`) before them, closed after them. */
function nodeFor(adjust?: (raw: RawConfig) => void): { node: TestNode; api: string } {
  const own = {} as { node: TestNode; api: string };
  before(async () => {
    own.node = await startNode(adjust);
    own.api = await apiToken(own.node);
  });
  after(() => own.node.close());
  return own;
}

describe('pages', () => {
  const own = nodeFor((raw) => {
    raw.tables = { pageSize: 3, maxPageSize: 5, maxPageBytes: 2048 };
  });
  before(() => call(own.node, 'POST', saveTo('inserts_public'), {}, Array.from({ length: 7 }, (_, i) => ({ sku: `p${i}` }))));

  test('a GET answers pageSize rows by default; limit and skip page on; x-herald-next-skip says where the next page starts', async () => {
    const first = await call(own.node, 'GET', 'inserts_public', {});
    assert.deepEqual([skus(first), first.headers.get('x-herald-next-skip')], [['p0', 'p1', 'p2'], '3']);
    const second = await call(own.node, 'GET', 'inserts_public?skip=3&limit=5', {});
    assert.deepEqual([skus(second), second.headers.get('x-herald-next-skip')], [['p3', 'p4', 'p5', 'p6'], null]);
    const exact = await call(own.node, 'GET', 'inserts_public?skip=2&limit=5', {});
    assert.deepEqual([skus(exact), exact.headers.get('x-herald-next-skip')], [['p2', 'p3', 'p4', 'p5', 'p6'], null]);
    const past = await call(own.node, 'GET', 'inserts_public?skip=100', {});
    assert.deepEqual([skus(past), past.headers.get('x-herald-next-skip')], [[], null]);
    const found = await call(own.node, 'GET', `inserts_public?limit=1&find=${encodeURIComponent('{"sku":{"$in":["p4","p6"]}}')}`, {});
    assert.deepEqual([skus(found), found.headers.get('x-herald-next-skip')], [['p4'], '1']);
  });

  test('a limit or skip that is not a whole number in range is a 400 naming it', async () => {
    for (const query of ['limit=0', 'limit=6', 'limit=abc', 'limit=1.5', 'limit=-1', 'limit=', 'limit=1&limit=2', 'skip=-1', 'skip=1e3', 'skip=99999999999']) {
      const refused = await call(own.node, 'GET', `inserts_public?${query}`, {});
      assert.deepEqual(code(refused), [400, 'BAD_REQUEST'], query);
      assert.match(refused.body.errors?.[0]?.message ?? '', /querystring\/(limit|skip) must be a whole number from/, query);
    }
  });

  test('a page ends before the row that would take its JSON past maxPageBytes, and never holds fewer than one row', async () => {
    const wide = Array.from({ length: 4 }, (_, i) => ({ sku: `w${i}`, text: 'x'.repeat(900) }));
    await call(own.node, 'POST', saveTo('inserts_public'), {}, wide);
    const page = await call(own.node, 'GET', `inserts_public?skip=7&limit=5`, {});
    assert.deepEqual([skus(page), page.headers.get('x-herald-next-skip')], [['w0', 'w1'], '9']);
    assert.ok(Buffer.byteLength(JSON.stringify(page.body.data)) <= 2048);
  });
});

describe('rows and bodies', () => {
  const own = nodeFor((raw) => {
    raw.tables = { maxRowBytes: 1024, maxSaveBytes: 8192 };
  });

  test('a row over maxRowBytes, or nested deeper than 64, is a 400 naming it; nothing of the save is stored; counted', async () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 65; i++) deep = { deeper: deep };
    const big = await call(own.node, 'POST', saveTo('inserts_public'), {}, [{ sku: 'ok' }, { sku: 'big', text: 'x'.repeat(1100) }]);
    assert.deepEqual(code(big), [400, 'BAD_REQUEST']);
    assert.match(big.body.errors?.[0]?.message ?? '', /body\[1\] is \d+ bytes of JSON; a row may have at most 1024/);
    const nested = await call(own.node, 'POST', saveTo('inserts_public'), {}, { sku: 'deep', deep });
    assert.deepEqual(code(nested), [400, 'BAD_REQUEST']);
    assert.match(nested.body.errors?.[0]?.message ?? '', /body nests deeper than 64/);
    assert.deepEqual((await call(own.node, 'GET', 'inserts_public', {})).body.data, []);
    assert.equal(await metric(own.node, 'herald_table_rows_refused_total', { reason: 'size' }), 1);
    assert.equal(await metric(own.node, 'herald_table_rows_refused_total', { reason: 'depth' }), 1);
  });

  test('a body over maxSaveBytes is a 413 envelope, and the node goes on delivering', async () => {
    const listener = await TestSocket.connect(own.node, own.api);
    await listener.register(inserts('inserts_public'));
    const rows = Array.from({ length: 20 }, (_, i) => ({ sku: `r${i}`, text: 'x'.repeat(500) }));
    const refused = await call(own.node, 'POST', saveTo('inserts_public'), {}, rows);
    assert.deepEqual([refused.status, refused.body.statusCode, refused.body.errors?.[0]?.code], [413, 413, 'BAD_REQUEST']);
    await call(own.node, 'POST', saveTo('inserts_public'), {}, { sku: 'after' });
    assert.equal(((await listener.next('NOTIFICATION')).response.eventData as { sku: string }).sku, 'after');
    await listener.close();
  });
});

describe('the attack of issue 24 on the shipped limits', () => {
  const own = nodeFor();

  test('20 public saves of 1 MiB are refused without a token, a GET answers at most 1 MiB, and a notification still comes at once', async () => {
    const listener = await TestSocket.connect(own.node, own.api);
    await listener.register(inserts('inserts_public', { condition: { conditionType: 'RESPONSE', criteria: { sku: 'small' } } }));
    const mib = { sku: 'huge', text: 'x'.repeat(1024 * 1024) };
    const refused = await Promise.all(Array.from({ length: 20 }, () => call(own.node, 'POST', saveTo('inserts_public'), {}, mib)));
    assert.deepEqual([...new Set(refused.map((reply) => reply.status))], [413]);
    // 120 rows just under 16 KiB each (two saves just under 1 MiB): ~1.9 MiB of rows, more than one answer may hold.
    const wide = Array(60).fill({ sku: 'wide', text: 'x'.repeat(16 * 1024 - 40) });
    for (let i = 0; i < 2; i++) assert.equal((await call(own.node, 'POST', saveTo('inserts_public'), {}, wide)).status, 200);
    const page = await call(own.node, 'GET', 'inserts_public?limit=1000', {});
    assert.ok(Buffer.byteLength(JSON.stringify(page.body)) <= 1024 * 1024 + 64, String(page.body.data.length));
    assert.equal(page.headers.get('x-herald-next-skip'), String(page.body.data.length));
    const sent = performance.now();
    await call(own.node, 'POST', saveTo('inserts_public'), {}, { sku: 'small' });
    await listener.next('NOTIFICATION');
    assert.ok(performance.now() - sent < 1000);
    await listener.close();
  });
});

describe('rate limits on the table API', () => {
  const own = nodeFor((raw) => {
    raw.rateLimit = { tableCalls: { perSecond: 0.01, burst: 5 }, apiUserTableCalls: { perSecond: 0.01, burst: 8 } };
  });

  test('without an API user token, an address past its burst gets 429 RATE_LIMITED with Retry-After, counted; a bad token counts as none', async () => {
    for (let i = 0; i < 4; i++) assert.equal((await call(own.node, 'GET', 'inserts_public', {})).status, 200);
    assert.equal((await call(own.node, 'GET', 'inserts_public', { api: 'garbage' })).status, 401);
    const refused = await call(own.node, 'POST', saveTo('inserts_public'), {}, { sku: 'over' });
    assert.deepEqual(code(refused), [429, 'RATE_LIMITED']);
    assert.equal(refused.headers.get('retry-after'), '100');
    assert.deepEqual(code(await call(own.node, 'GET', 'inserts_public', { api: 'garbage' })), [429, 'RATE_LIMITED']);
    assert.equal(await metric(own.node, 'herald_rate_limited_total', { limit: 'tableCalls' }), 2);
  });

  test('an API user has a bucket of its own per address, so anonymous callers cannot spend it', async () => {
    for (let i = 0; i < 8; i++) assert.equal((await call(own.node, 'GET', 'inserts_public', { api: own.api })).status, 200, String(i));
    assert.deepEqual(code(await call(own.node, 'GET', 'inserts_public', { api: own.api })), [429, 'RATE_LIMITED']);
    assert.equal(await metric(own.node, 'herald_rate_limited_total', { limit: 'apiUserTableCalls' }), 1);
    assert.ok((await metric(own.node, 'herald_refusals_total', { code: 'RATE_LIMITED' })) >= 3);
  });
});
