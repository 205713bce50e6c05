/** The table API and its insert notifications: access modes, find, saves, and who is told about which row. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TestSocket, apiToken, personToken, startNode, type TestNode } from '../support/gateway.ts';

let node: TestNode;
let api: string;
let nick: string;

before(async () => {
  node = await startNode();
  api = await apiToken(node);
  nick = await personToken(node, 'NICK', 'WAHLBERG');
});
after(() => node.close());

const table = (collection: string) => `${node.http}/api/schema/bench/mongodb/am_bench/${collection}`;

async function call(method: 'GET' | 'POST', url: string, tokens: { api?: string; person?: string }, body?: unknown) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (tokens.api) headers['x-am-authorization'] = tokens.api;
  if (tokens.person) headers['x-am-user-authorization'] = tokens.person;
  const response = await fetch(url, { method, headers, ...(body !== undefined && { body: JSON.stringify(body) }) });
  return { status: response.status, body: (await response.json()) as { data?: any; errors?: Array<{ code: string; message: string }> } };
}

const inserts = (collection: string, extra: object = {}) => ({
  eventType: 'INSTANCES',
  apiName: 'SCHEMA_POST_BULK_INSERT',
  instance: 'mongodb',
  database: 'am_bench',
  collection,
  getEventData: true,
  ...extra,
});

describe('reading a table', () => {
  test('a both-tokens table refuses a caller without them, and serves one with them', async () => {
    assert.equal((await call('GET', table('customers'), {})).body.errors?.[0]?.code, 'TOKEN_MISSING');
    const apiOnly = await call('GET', table('customers'), { api });
    assert.deepEqual([apiOnly.status, apiOnly.body.errors?.[0]?.code], [401, 'PERSON_TOKEN_REQUIRED']);
    const both = await call('GET', table('customers'), { api, person: nick });
    assert.equal(both.status, 200);
    assert.equal(both.body.data.length, 10);
  });

  test('find filters with MongoDB equality; a bad find is a 400 naming it', async () => {
    const found = await call('GET', `${table('customers')}?find=${encodeURIComponent('{"customer_id":2}')}`, { api, person: nick });
    assert.deepEqual(found.body.data.map((row: { first_name: string }) => row.first_name), ['NICK']);
    const bad = await call('GET', `${table('customers')}?find=nope`, { api, person: nick });
    assert.deepEqual([bad.status, bad.body.errors?.[0]?.code], [400, 'BAD_REQUEST']);
    assert.match(bad.body.errors?.[0]?.message ?? '', /find/);
    for (const find of ['{"$where":"sleep(1000)"}', '{"country":{"$regex":"^I"}}', '{"$and":[{"$or":[]}]}']) {
      const refused = await call('GET', `${table('inserts_public')}?find=${encodeURIComponent(find)}`, {});
      assert.equal(refused.status, 400, find);
      assert.match(refused.body.errors?.[0]?.message ?? '', /is not supported/);
    }
    const $in = await call('GET', `${table('customers')}?find=${encodeURIComponent('{"customer_id":{"$in":[2,3]}}')}`, { api, person: nick });
    assert.equal($in.body.data.length, 2);
  });

  test('a public table needs no token; an undeclared one is a 404; a bad token is a 401 even on a public table', async () => {
    assert.equal((await call('GET', table('inserts_public'), {})).status, 200);
    assert.equal((await call('GET', table('nope'), {})).status, 404);
    assert.equal((await call('GET', table('inserts_public'), { api: 'garbage' })).status, 401);
  });
});

describe('saving rows', () => {
  test('one row or many; each stored with an _id; bad bodies are 400 and store nothing', async () => {
    const one = await call('POST', `${table('inserts_public')}/save-single-or-multiple`, {}, { sku: 'a' });
    assert.equal(one.status, 200);
    assert.match(one.body.data[0]._id, /^[0-9a-f]{24}$/);
    const many = await call('POST', `${table('inserts_public')}/save-single-or-multiple`, {}, [{ sku: 'b' }, { sku: 'c' }]);
    assert.deepEqual(many.body.data.map((row: { sku: string }) => row.sku), ['b', 'c']);
    for (const body of [[], [1, 2], 'text', Array.from({ length: 1001 }, () => ({}))]) {
      const refused = await call('POST', `${table('inserts_public')}/save-single-or-multiple`, {}, body);
      assert.deepEqual([refused.status, refused.body.errors?.[0]?.code], [400, 'BAD_REQUEST']);
    }
    const stored = await call('GET', table('inserts_public'), {});
    assert.deepEqual(stored.body.data.map((row: { sku: string }) => row.sku), ['a', 'b', 'c']);
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
    await call('POST', `${table('inserts_public')}/save-single-or-multiple`, {}, rows);
    for (const sku of ['x1', 'x2', 'x3']) {
      const { response } = await everything.next('NOTIFICATION');
      assert.equal(response.eventType, 'INSTANCES');
      assert.equal((response.eventData as { sku: string }).sku, sku);
    }
    for (const sku of ['x1', 'x3']) {
      assert.deepEqual((await onlyNew.next('NOTIFICATION')).response, { eventId, eventType: 'INSTANCES', eventData: { sku } });
    }
    // A failed save tells nobody: the next thing the subscriber hears is the save after it.
    await call('POST', `${table('inserts_public')}/save-single-or-multiple`, {}, [1]);
    await call('POST', `${table('inserts_public')}/save-single-or-multiple`, {}, { sku: 'x4', status: 'new' });
    assert.deepEqual((await onlyNew.next('NOTIFICATION')).response.eventData, { sku: 'x4' });
    assert.equal(onlyNew.frames.length, 0);
    await Promise.all([everything.close(), onlyNew.close()]);
  });

  test('registering for a table follows its access; unknown tables and apiNames are refused', async () => {
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
