/** The token API and the WebSocket handshake: every way in, and every refusal with its close code. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createSigner } from 'fast-jwt';
import { CloseCode } from '@herald/protocol';
import { TestSocket, apiToken, emit, metric, onEvent, personToken, post, startNode, type TestNode } from '../support/gateway.ts';

let node: TestNode;
before(async () => {
  node = await startNode();
});
after(() => node.close());

/** An error envelope. */
type Failure = { success: false; statusCode: number; errors: Array<{ code: string; message: string }> };

const tokenUrl = () => `${node.http}/api/system-api/bench/token`;

describe('token API', () => {
  test('an API user with the right password gets a token, a refresh token and its lifetime', async () => {
    const { status, body } = await post(tokenUrl(), { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } });
    assert.equal(status, 200);
    assert.equal(body.success, true);
    assert.equal(body.statusCode, 200);
    assert.match(body.data.token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.match(body.data.refresh_token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.equal(body.data.expires_in, 3600);
  });

  test('a wrong password is refused with 401 BAD_CREDENTIALS', async () => {
    const { status, body } = await post(tokenUrl(), { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'nope' } });
    assert.equal(status, 401);
    assert.deepEqual(body.errors.map((e: { code: string }) => e.code), ['BAD_CREDENTIALS']);
  });

  test('a person token by the generator spelled out carries the select columns (NICK / WAHLBERG is customer 2)', async () => {
    const spec = { instance: 'mongodb', database: 'am_bench', collection: 'customers', usernameColumn: 'first_name', passwordColumn: 'password_hash' };
    const { status, body } = await post(tokenUrl(), { authTokenType: 'AM_DB', authTokenAMDB: { ...spec, u: 'NICK', p: 'WAHLBERG' } });
    assert.equal(status, 200);
    const person = node.gateway.authenticator.verifyPerson(body.data.token);
    assert.deepEqual(person.fields, { customer_id: 2, country: 'India' });
  });

  test('a generator the config does not declare is refused with 404', async () => {
    const spec = { instance: 'mongodb', database: 'am_bench', collection: 'customers', usernameColumn: 'first_name', passwordColumn: 'phone' };
    const { status, body } = await post(tokenUrl(), { authTokenType: 'AM_DB', authTokenAMDB: { ...spec, u: 'NICK', p: '1123456789' } });
    assert.equal(status, 404);
    assert.equal(body.errors[0].code, 'NOT_FOUND');
  });

  test('a refresh token gives a new token of the same kind', async () => {
    const first = await post(tokenUrl(), { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'ED', p: 'CHASE' } });
    const { status, body } = await post(tokenUrl(), { authTokenType: 'REFRESH', refreshToken: first.body.data.refresh_token });
    assert.equal(status, 200);
    assert.equal(node.gateway.authenticator.verifyPerson(body.data.token).fields.customer_id, 3);
  });

  test('a wrong body is a 400 naming the field', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ authTokenType: 'AM' }, /authTokenAM/],
      [{ authTokenType: 'XX' }, /authTokenType/],
      [{ authTokenType: 'AM', authTokenAM: { u: 'bench' } }, /authTokenAM.*p/],
      ['{not json', /JSON/i],
    ];
    for (const [body, field] of cases) {
      const reply = await post(tokenUrl(), body);
      assert.equal(reply.status, 400, JSON.stringify(body));
      assert.equal(reply.body.success, false);
      assert.equal(reply.body.errors[0].code, 'BAD_REQUEST');
      assert.match(reply.body.errors[0].message, field);
    }
  });

  test('the stored hash is not a password: giving it, or naming the old plain-text column, logs nobody in', async () => {
    const seed = JSON.parse(readFileSync(node.config.instances.mongodb?.databases.am_bench?.collections.customers?.seed ?? '', 'utf8'));
    const hash = seed.find((row: { first_name: string }) => row.first_name === 'NICK').password_hash as string;
    const byHash = await post(tokenUrl(), { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'NICK', p: hash } });
    assert.deepEqual([byHash.status, byHash.body.errors[0].code], [401, 'BAD_CREDENTIALS']);
    const spec = { instance: 'mongodb', database: 'am_bench', collection: 'customers', usernameColumn: 'first_name', passwordColumn: 'last_name' };
    const oldSpec = await post(tokenUrl(), { authTokenType: 'AM_DB', authTokenAMDB: { ...spec, u: 'NICK', p: 'WAHLBERG' } });
    assert.deepEqual([oldSpec.status, oldSpec.body.errors[0].code], [404, 'NOT_FOUND']);
  });

  test('a body that is not JSON is 415 UNSUPPORTED_MEDIA_TYPE, counted, on the token API and on emit', async () => {
    const before = await metric(node, 'herald_refusals_total', { code: 'UNSUPPORTED_MEDIA_TYPE' });
    const api = await apiToken(node);
    const emitUrl = `${node.http}/api/system-api/bench/emit-event-ws`;
    const calls: Array<[string, Record<string, string>]> = [
      [tokenUrl(), { 'content-type': 'text/plain' }],
      [tokenUrl(), { 'content-type': 'application/x-www-form-urlencoded' }],
      [emitUrl, { 'content-type': 'text/plain', 'x-am-authorization': api }],
      [`${emitUrl}?through=fastify`, { 'content-type': 'text/plain; charset=utf-8', 'x-am-authorization': api }],
      [emitUrl, { 'content-type': 'application/xml', 'x-am-authorization': api }],
    ];
    for (const [url, headers] of calls) {
      const response = await fetch(url, { method: 'POST', headers, body: '{"name":"announcements","eventData":{}}' });
      const body = (await response.json()) as Failure;
      assert.deepEqual([response.status, body.statusCode, body.errors[0]?.code], [415, 415, 'UNSUPPORTED_MEDIA_TYPE'], `${url} ${headers['content-type']}`);
    }
    assert.equal(await metric(node, 'herald_refusals_total', { code: 'UNSUPPORTED_MEDIA_TYPE' }), before + calls.length);
  });

  test('a URL fastify cannot decode is a 400 envelope, not fastify\'s own body', async () => {
    const response = await fetch(`${node.http}/api/schema/bench/mongodb/am_bench/%E0%A4%A`);
    const body = (await response.json()) as Failure;
    assert.deepEqual([response.status, body.success, body.errors[0]?.code], [400, false, 'BAD_REQUEST']);
  });

  test('another user path is a 404 with a JSON body', async () => {
    const { status, body } = await post(`${node.http}/api/system-api/other/token`, { authTokenType: 'AM' });
    assert.equal(status, 404);
    assert.equal(body.errors[0].code, 'NOT_FOUND');
  });
});

describe('WebSocket handshake', () => {
  test('both good tokens: CONNECTED', async () => {
    const client = TestSocket.open(node, await apiToken(node), await personToken(node, 'NICK', 'WAHLBERG'));
    assert.deepEqual(await client.next(), { type: 'CONNECTED', response: { connected: true } });
    await client.close();
  });

  test('the API user token alone is enough to connect', async () => {
    const client = await TestSocket.connect(node, await apiToken(node));
    await client.close();
  });

  async function refusal(api: string | undefined, person?: string) {
    const client = TestSocket.open(node, api, person);
    const frame = await client.next('TOKEN_VALIDATION');
    const { code } = await client.closed;
    return { code, errors: frame.errors.map((e) => e.code) };
  }

  test('no API user token: TOKEN_MISSING, closed with 4501', async () => {
    assert.deepEqual(await refusal(undefined), { code: CloseCode.TOKEN_MISSING, errors: ['TOKEN_MISSING'] });
  });

  test('a forged API user token: TOKEN_INVALID, closed with 4502', async () => {
    const forged = createSigner({ key: 'another-secret-of-enough-length', iss: 'herald/bench' })({ typ: 'api', sub: 'bench' });
    assert.deepEqual(await refusal(forged), { code: CloseCode.TOKEN_INVALID, errors: ['TOKEN_INVALID'] });
  });

  test('a person token where the API user token belongs: TOKEN_INVALID', async () => {
    const person = await personToken(node, 'NICK', 'WAHLBERG');
    assert.deepEqual(await refusal(person), { code: CloseCode.TOKEN_INVALID, errors: ['TOKEN_INVALID'] });
  });

  test('a bad person token is refused even with a good API user token', async () => {
    assert.deepEqual(await refusal(await apiToken(node), 'garbage'), { code: CloseCode.TOKEN_INVALID, errors: ['TOKEN_INVALID'] });
  });

  test('an expired token: TOKEN_EXPIRED, closed with 4001 (refresh, then reconnect)', async () => {
    const hourAgo = Date.now() - 3600_000;
    const sign = createSigner({ key: node.config.auth.secret, iss: 'herald/bench', expiresIn: 60_000, clockTimestamp: hourAgo });
    assert.deepEqual(await refusal(sign({ typ: 'api', sub: 'bench' })), { code: CloseCode.TOKEN_EXPIRED, errors: ['TOKEN_EXPIRED'] });
  });

  test('a token signed with the node\'s own secret but without iss or exp, or from another issuer: TOKEN_INVALID, on the handshake and on emit', async () => {
    const { secret } = node.config.auth;
    const forged = [
      createSigner({ key: secret, expiresIn: 60_000 })({ typ: 'api', sub: 'bench' }),
      createSigner({ key: secret, iss: 'herald/bench' })({ typ: 'api', sub: 'bench' }),
      createSigner({ key: secret, iss: 'herald/other', expiresIn: 60_000 })({ typ: 'api', sub: 'bench' }),
    ];
    for (const token of forged) {
      assert.deepEqual(await refusal(token), { code: CloseCode.TOKEN_INVALID, errors: ['TOKEN_INVALID'] });
      const emitted = await emit(node, token, 'announcements', { title: 'forged' });
      assert.deepEqual([emitted.status, emitted.body.errors[0].code], [401, 'TOKEN_INVALID']);
      const viaFastify = await post(`${node.http}/api/system-api/bench/emit-event-ws?through=fastify`, { name: 'announcements', eventData: {} }, { 'x-am-authorization': token });
      assert.deepEqual([viaFastify.status, viaFastify.body.errors[0].code], [401, 'TOKEN_INVALID']);
    }
    const person = createSigner({ key: secret, expiresIn: 60_000 })({ typ: 'person', sub: 'NICK', gen: 'customers', usr: { customer_id: 3 } });
    assert.deepEqual(await refusal(await apiToken(node), person), { code: CloseCode.TOKEN_INVALID, errors: ['TOKEN_INVALID'] });
  });

  test('refusals are counted by code', async () => {
    assert.ok((await metric(node, 'herald_refusals_total', { code: 'TOKEN_MISSING' })) >= 1);
    assert.ok((await metric(node, 'herald_refusals_total', { code: 'TOKEN_EXPIRED' })) >= 1);
  });
});

describe('token API rate limit', () => {
  test('past its burst an address is refused 429 RATE_LIMITED with Retry-After, counted; other addresses and the node carry on', async () => {
    const limited = await startNode((raw) => {
      raw.server.trustProxy = ['loopback'];
      raw.rateLimit = { tokenRequests: { perSecond: 0.01, burst: 3 } };
    });
    const body = { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } };
    const from = (address: string) => ({ 'x-forwarded-for': address });
    const url = `${limited.http}/api/system-api/bench/token`;
    const api = (await post(url, body, from('192.0.2.1'))).body.data.token as string;
    const listener = await TestSocket.connect(limited, api);
    await listener.register(onEvent('announcements'));
    for (let i = 0; i < 2; i++) assert.equal((await post(url, body, from('192.0.2.1'))).status, 200);
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...from('192.0.2.1') }, body: JSON.stringify(body) });
    const refused = (await response.json()) as Failure;
    assert.deepEqual([response.status, refused.statusCode, refused.errors[0]?.code], [429, 429, 'RATE_LIMITED']);
    assert.equal(response.headers.get('retry-after'), '100');
    // A flood from one address is refused before its body is read; another address is not held back by it.
    const flood = await Promise.all(Array.from({ length: 50 }, () => post(url, '{not even json', from('192.0.2.1'))));
    assert.ok(flood.every((reply) => reply.status === 429));
    assert.equal((await post(url, body, from('192.0.2.2'))).status, 200);
    assert.equal((await post(url, body, from('2001:db8:1:2::1'))).status, 200);
    assert.equal(await metric(limited, 'herald_rate_limited_total', { limit: 'tokenRequests' }), 51);
    assert.equal(await metric(limited, 'herald_refusals_total', { code: 'RATE_LIMITED' }), 51);
    assert.equal((await emit(limited, api, 'announcements', { title: 'still here' })).status, 200);
    assert.deepEqual((await listener.next('NOTIFICATION')).response.eventData, { title: 'still here' });
    await listener.close();
    await limited.close();
  });
});

describe('people whose passwords are stored as plain text', () => {
  test('log in no more: BAD_CREDENTIALS even with the stored text, counted as not_hashed', async () => {
    const plain = await startNode((raw) => {
      const customers = raw.instances.mongodb.databases.am_bench.collections.customers;
      const rows = JSON.parse(readFileSync(customers.seed, 'utf8')) as Array<Record<string, unknown>>;
      const file = join(mkdtempSync(join(tmpdir(), 'herald-seed-')), 'customers.json');
      writeFileSync(file, JSON.stringify(rows.map((row) => ({ ...row, password_hash: row.last_name }))));
      customers.seed = file;
    });
    const body = { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'NICK', p: 'WAHLBERG' } };
    for (let i = 0; i < 2; i++) {
      const reply = await post(`${plain.http}/api/system-api/bench/token`, body);
      assert.deepEqual([reply.status, reply.body.errors[0].code], [401, 'BAD_CREDENTIALS']);
    }
    assert.equal(await metric(plain, 'herald_person_logins_total', { generator: 'customers', result: 'not_hashed' }), 2);
    await plain.close();
  });
});
