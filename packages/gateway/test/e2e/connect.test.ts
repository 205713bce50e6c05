/** The token API and the WebSocket handshake: every way in, and every refusal with its close code. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createSigner } from 'fast-jwt';
import { CloseCode } from '@herald/protocol';
import { TestSocket, apiToken, metric, personToken, post, startNode, type TestNode } from '../support/gateway.ts';

let node: TestNode;
before(async () => {
  node = await startNode();
});
after(() => node.close());

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
    const spec = { instance: 'mongodb', database: 'am_bench', collection: 'customers', usernameColumn: 'first_name', passwordColumn: 'last_name' };
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

  test('refusals are counted by code', async () => {
    assert.ok((await metric(node, 'herald_refusals_total', { code: 'TOKEN_MISSING' })) >= 1);
    assert.ok((await metric(node, 'herald_refusals_total', { code: 'TOKEN_EXPIRED' })) >= 1);
  });
});
