/**
 * The table API and its insert notifications: read and write access, hidden columns, find, saves, who is told about
 * which row; and the attack of issue 24, a signed-in person taking over another's notifications through a table.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashPassword } from '../../src/auth/password.ts';
import {
  TestSocket,
  apiToken,
  inserts,
  onEvent,
  personToken,
  post,
  saveTo,
  startNode,
  tableCall as call,
  type TestNode,
} from '../support/gateway.ts';

let node: TestNode;
let api: string;
let nick: string;

before(async () => {
  node = await startNode((raw) => {
    const collections = raw.instances.mongodb.databases.am_bench.collections;
    collections.notes = { access: 'public', hidden: ['secret'] };
    collections.drop_box = { access: { read: 'none', write: 'public' } };
    // These tests make more calls from one address than the default limit lets through; tables-limits.test.ts tests it.
    raw.rateLimit = { tableCalls: { burst: 10_000 } };
  });
  api = await apiToken(node);
  nick = await personToken(node, 'NICK', 'WAHLBERG');
});
after(() => node.close());

const code = (reply: { status: number; body: { errors?: Array<{ code: string }> } }) => [reply.status, reply.body.errors?.[0]?.code];

describe('reading a table', () => {
  test('a both-tokens table refuses a caller without them, and serves one with them', async () => {
    assert.deepEqual(code(await call(node, 'GET', 'customers', {})), [401, 'TOKEN_MISSING']);
    assert.deepEqual(code(await call(node, 'GET', 'customers', { api })), [401, 'PERSON_TOKEN_REQUIRED']);
    const both = await call(node, 'GET', 'customers', { api, person: nick });
    assert.equal(both.status, 200);
    assert.equal(both.body.data.length, 10);
  });

  test('find filters with MongoDB equality; a bad find is a 400 naming it', async () => {
    const found = await call(node, 'GET', `customers?find=${encodeURIComponent('{"customer_id":2}')}`, { api, person: nick });
    assert.deepEqual(found.body.data.map((row: { first_name: string }) => row.first_name), ['NICK']);
    const bad = await call(node, 'GET', 'customers?find=nope', { api, person: nick });
    assert.deepEqual(code(bad), [400, 'BAD_REQUEST']);
    assert.match(bad.body.errors?.[0]?.message ?? '', /find/);
    for (const find of ['{"$where":"sleep(1000)"}', '{"country":{"$regex":"^I"}}', '{"$and":[{"$or":[]}]}']) {
      const refused = await call(node, 'GET', `inserts_public?find=${encodeURIComponent(find)}`, {});
      assert.equal(refused.status, 400, find);
      assert.match(refused.body.errors?.[0]?.message ?? '', /is not supported/);
    }
    // Parts of $and that are not filters: refused by the filter language, on a table that hides columns too.
    for (const [table, find] of [['inserts_public', '{"$and":[null]}'], ['customers', '{"$and":[1,{"customer_id":2}]}']] as const) {
      const refused = await call(node, 'GET', `${table}?find=${encodeURIComponent(find)}`, { api, person: nick });
      assert.deepEqual(code(refused), [400, 'BAD_REQUEST'], find);
      assert.match(refused.body.errors?.[0]?.message ?? '', /\$and must be an array of filters/);
    }
    const $in = await call(node, 'GET', `customers?find=${encodeURIComponent('{"customer_id":{"$in":[2,3]}}')}`, { api, person: nick });
    assert.equal($in.body.data.length, 2);
    const deep = `${'{"$and":['.repeat(70)}{}${']}'.repeat(70)}`;
    assert.deepEqual(code(await call(node, 'GET', `inserts_public?find=${encodeURIComponent(deep)}`, {})), [400, 'BAD_REQUEST']);
  });

  test('a public table needs no token; an undeclared one is a 404; a bad token is a 401 even on a public table', async () => {
    assert.equal((await call(node, 'GET', 'inserts_public', {})).status, 200);
    assert.equal((await call(node, 'GET', 'nope', {})).status, 404);
    assert.equal((await call(node, 'GET', 'inserts_public', { api: 'garbage' })).status, 401);
  });

  test('a write-only table refuses reading and following with 403 TABLE_FORBIDDEN, whatever the tokens, and takes saves', async () => {
    for (const tokens of [{}, { api }, { api, person: nick }]) {
      assert.deepEqual(code(await call(node, 'GET', 'drop_box', tokens)), [403, 'TABLE_FORBIDDEN']);
    }
    const client = await TestSocket.connect(node, api, nick);
    const reply = await client.register(inserts('drop_box'));
    assert.deepEqual(reply.invalidOnEvents.map((entry) => entry.errors[0]?.code), ['TABLE_FORBIDDEN']);
    await client.close();
    const saved = await call(node, 'POST', saveTo('drop_box'), {}, { note: 'for the back office' });
    assert.deepEqual([saved.status, saved.body.data[0].note], [200, 'for the back office']);
  });
});

describe('taking over another person through the customers table (issue 24)', () => {
  test('a signed-in person reads no password column: the hash and the demo password (last_name) are never shown', async () => {
    const rows = (await call(node, 'GET', 'customers', { api, person: nick })).body.data as Array<Record<string, unknown>>;
    assert.equal(rows.length, 10);
    for (const row of rows) {
      assert.ok(!('password_hash' in row) && !('last_name' in row), JSON.stringify(row));
      assert.ok('first_name' in row && 'customer_id' in row);
    }
  });

  test('nor can they search by it, one value at a time', async () => {
    for (const find of ['{"password_hash":"x"}', '{"last_name":"CHASE"}', '{"$and":[{"customer_id":3},{"last_name":{"$in":["CHASE"]}}]}', '{"password_hash.0":"$"}']) {
      const refused = await call(node, 'GET', `customers?find=${encodeURIComponent(find)}`, { api, person: nick });
      assert.deepEqual(code(refused), [400, 'BAD_REQUEST'], find);
      assert.match(refused.body.errors?.[0]?.message ?? '', /cannot be searched/);
    }
  });

  test('nor save a row into customers, with any tokens: 403 TABLE_FORBIDDEN, nothing stored', async () => {
    const mallory = { customer_id: 3, first_name: 'MALLORY', password_hash: await hashPassword('mallory', { ln: 10, r: 8, p: 1 }), country: 'India' };
    for (const tokens of [{}, { api }, { api, person: nick }]) {
      for (const body of [mallory, [mallory]]) {
        assert.deepEqual(code(await call(node, 'POST', saveTo('customers'), tokens, body)), [403, 'TABLE_FORBIDDEN']);
      }
    }
    const rows = (await call(node, 'GET', 'customers', { api, person: nick })).body.data as Array<{ first_name: string }>;
    assert.deepEqual(rows.map((row) => row.first_name).filter((name) => name === 'MALLORY'), []);
  });

  test('so no table call gives a token as another person, and another person\'s order-updates stay theirs', async () => {
    const login = (u: string, p: string) => post(`${node.http}/api/system-api/bench/token`, { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u, p } });
    assert.deepEqual(code(await login('MALLORY', 'mallory')), [401, 'BAD_CREDENTIALS']);
    assert.deepEqual(code(await login('ED', 'mallory')), [401, 'BAD_CREDENTIALS']);
    const client = await TestSocket.connect(node, api, nick);
    const reply = await client.register(onEvent('order-updates', { recipientId: 3 }));
    assert.deepEqual(reply.invalidOnEvents.map((entry) => entry.errors[0]?.code), ['CRITERIA_NOT_YOURS']);
    await client.close();
  });
});

describe('saving rows', () => {
  test('one row or many; each stored with an _id; bad bodies are 400 and store nothing', async () => {
    const one = await call(node, 'POST', saveTo('inserts_public'), {}, { sku: 'a' });
    assert.equal(one.status, 200);
    assert.match(one.body.data[0]._id, /^[0-9a-f]{24}$/);
    const many = await call(node, 'POST', saveTo('inserts_public'), {}, [{ sku: 'b' }, { sku: 'c' }]);
    assert.deepEqual(many.body.data.map((row: { sku: string }) => row.sku), ['b', 'c']);
    const own = await call(node, 'POST', saveTo('inserts_public'), {}, { _id: 'mine', sku: 'd' });
    assert.equal(own.body.data[0]._id, 'mine');
    for (const body of [[], [1, 2], 'text', Array.from({ length: 1001 }, () => ({})), { _id: ['a'] }, [{ sku: 'e' }, { _id: { $gt: '' } }]]) {
      assert.deepEqual(code(await call(node, 'POST', saveTo('inserts_public'), {}, body)), [400, 'BAD_REQUEST'], JSON.stringify(body).slice(0, 80));
    }
    const stored = await call(node, 'GET', 'inserts_public', {});
    assert.deepEqual(stored.body.data.map((row: { sku: string }) => row.sku), ['a', 'b', 'c', 'd']);
  });

  test('a body that is not JSON is 415 UNSUPPORTED_MEDIA_TYPE and stores nothing', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const refused = await call(node, 'POST', saveTo('notes'), {}, '{"title":"typed"}', { 'content-type': type });
      assert.deepEqual(code(refused), [415, 'UNSUPPORTED_MEDIA_TYPE'], type);
    }
    const find = encodeURIComponent('{"title":"typed"}');
    assert.deepEqual((await call(node, 'GET', `notes?find=${find}`, {})).body.data, []);
  });

  test('hidden columns are stored but never shown: not in the save\'s answer, a GET, or a notification, nor matched by criteria', async () => {
    const everything = await TestSocket.connect(node, api);
    const bySecret = await TestSocket.connect(node, api);
    await everything.register(inserts('notes'));
    await bySecret.register(inserts('notes', { condition: { conditionType: 'RESPONSE', criteria: { secret: 's1' } } }));
    const saved = await call(node, 'POST', saveTo('notes'), {}, [{ title: 't1', secret: 's1' }, { title: 't2', secret: 's2' }]);
    assert.deepEqual(saved.body.data.map(({ _id, ...row }: Record<string, unknown>) => row), [{ title: 't1' }, { title: 't2' }]);
    for (const title of ['t1', 't2']) {
      const { _id, ...shown } = (await everything.next('NOTIFICATION')).response.eventData as Record<string, unknown>;
      assert.deepEqual(shown, { title });
    }
    const read = await call(node, 'GET', 'notes', {});
    assert.ok(read.body.data.every((row: Record<string, unknown>) => !('secret' in row)));
    assert.deepEqual(code(await call(node, 'GET', `notes?find=${encodeURIComponent('{"secret":"s1"}')}`, {})), [400, 'BAD_REQUEST']);
    // Had the secret reached the broker, `bySecret` would have been told of t1 before this save.
    await call(node, 'POST', saveTo('notes'), {}, { title: 't3' });
    await everything.next('NOTIFICATION');
    assert.equal(bySecret.frames.length, 0);
    await Promise.all([everything.close(), bySecret.close()]);
  });
});

describe('insert notifications', () => {
  test('each saved row reaches the subscribers whose criteria it matches, with select applied', async () => {
    const everything = await TestSocket.connect(node, api);
    const onlyNew = await TestSocket.connect(node, api);
    await everything.register(inserts('inserts_public'));
    const reply = await onlyNew.register(inserts('inserts_public', { condition: { conditionType: 'RESPONSE', criteria: { status: 'new' } }, select: ['sku'] }));
    const eventId = reply.validOnEvents[0]?.eventId;
    const rows = [{ sku: 'x1', status: 'new' }, { sku: 'x2', status: 'old' }, { sku: 'x3', status: 'new' }];
    await call(node, 'POST', saveTo('inserts_public'), {}, rows);
    for (const sku of ['x1', 'x2', 'x3']) {
      const { response } = await everything.next('NOTIFICATION');
      assert.equal(response.eventType, 'INSTANCES');
      assert.equal((response.eventData as { sku: string }).sku, sku);
    }
    for (const sku of ['x1', 'x3']) {
      assert.deepEqual((await onlyNew.next('NOTIFICATION')).response, { eventId, eventType: 'INSTANCES', eventData: { sku } });
    }
    // A failed save tells nobody: the next thing the subscriber hears is the save after it.
    await call(node, 'POST', saveTo('inserts_public'), {}, [1]);
    await call(node, 'POST', saveTo('inserts_public'), {}, { sku: 'x4', status: 'new' });
    assert.deepEqual((await onlyNew.next('NOTIFICATION')).response.eventData, { sku: 'x4' });
    assert.equal(onlyNew.frames.length, 0);
    await Promise.all([everything.close(), onlyNew.close()]);
  });

  test('registering for a table follows its read access; unknown tables and apiNames are refused', async () => {
    const apiOnly = await TestSocket.connect(node, api);
    const reply = await apiOnly.register(
      inserts('customers'),
      inserts('nope'),
      { ...inserts('inserts_public'), apiName: 'SCHEMA_POST_DELETE' },
      { ...inserts('inserts_public'), instance: undefined },
    );
    assert.deepEqual(reply.invalidOnEvents.map((entry) => entry.errors[0]?.code), ['PERSON_TOKEN_REQUIRED', 'UNKNOWN_EVENT', 'UNKNOWN_EVENT', 'BAD_FRAME']);
    await apiOnly.close();
    const withPerson = await TestSocket.connect(node, api, nick);
    assert.equal((await withPerson.register(inserts('customers'))).validOnEvents.length, 1);
    await withPerson.close();
  });
});
