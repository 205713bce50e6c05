/**
 * Session control on one node: tokens expiring on open connections (TOKEN_EXPIRING, then 4001), in-band REFRESH
 * accepted and refused, disconnect and revoke through the control API, revoked tokens refused at the handshake, at
 * REFRESH, at the token API's refresh grant and on emit, presence, and who may call the control API.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CloseCode } from '@herald/protocol';
import { control, pastSecondOf, presence } from '../support/control.ts';
import { TestSocket, apiToken, emit, metric, onEvent, personToken, post, startNode, type RawConfig, type TestNode } from '../support/gateway.ts';

/** A second API user, in a group the control API does not admit. */
const withOther = (raw: RawConfig) => {
  raw.apiUsers.other = { password: 'other-password', groups: ['others'] };
};

const refresh = (client: TestSocket, apiToken: string, personToken?: string) => {
  client.send({ objType: 'REFRESH', apiToken, personToken });
  return client.next('REFRESH');
};

const expiresAtOf = (jwt: string): number => JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).exp * 1000;

describe('tokens that expire on open connections (tokens live 6 s, told 3 s before: room for a loaded machine)', () => {
  let node: TestNode;
  before(async () => {
    node = await startNode((raw) => {
      raw.auth.tokenTtlSeconds = 6;
      raw.auth.expiryNoticeMs = 3000;
      withOther(raw);
    });
  });
  after(() => node.close());

  test('told TOKEN_EXPIRING, then closed with 4001 at expiry; one that refreshed stays, subscriptions and all', async () => {
    const [api, nick] = [await apiToken(node), await personToken(node, 'NICK', 'WAHLBERG')];
    const expiresAt = Math.min(expiresAtOf(api), expiresAtOf(nick));
    const idle = await TestSocket.connect(node, api, nick);
    const refreshing = await TestSocket.connect(node, api, nick);
    await refreshing.register(onEvent('order-updates', { recipientId: 2 }));

    const notice = await idle.next('TOKEN_EXPIRING', 7000);
    assert.deepEqual(notice, { type: 'TOKEN_EXPIRING', response: { expiresAt } });
    assert.ok(Date.now() >= expiresAt - 3000 && Date.now() < expiresAt, `told ${expiresAt - Date.now()} ms before`);
    await refreshing.next('TOKEN_EXPIRING');
    // Tokens of a later second expire later.
    const [api2, nick2] = [await apiToken(node), await personToken(node, 'NICK', 'WAHLBERG')];
    const renewed = Math.min(expiresAtOf(api2), expiresAtOf(nick2));
    assert.ok(renewed > expiresAt);
    assert.deepEqual(await refresh(refreshing, api2, nick2), { type: 'REFRESH', response: { expiresAt: renewed } });

    assert.deepEqual(await idle.closed, { code: CloseCode.TOKEN_EXPIRED, reason: 'TOKEN_EXPIRED' });
    assert.ok(Date.now() >= expiresAt, 'not closed before its expiry');
    assert.equal(await metric(node, 'herald_sessions_expired_total'), 1);
    assert.equal(refreshing.socket.readyState, refreshing.socket.OPEN);
    assert.equal((await emit(node, api2, 'order-updates', { recipientId: 2, after: 'refresh' })).status, 200);
    assert.deepEqual((await refreshing.next('NOTIFICATION')).response.eventData, { recipientId: 2, after: 'refresh' });
    await refreshing.close();
  });

  test('REFRESH refused: the connection stays as it was, and closes at its old expiry', async () => {
    const [api, nick] = [await apiToken(node), await personToken(node, 'NICK', 'WAHLBERG')];
    const client = await TestSocket.connect(node, api, nick);
    const bare = await TestSocket.connect(node, api);
    const refusal = async (socket: TestSocket, apiToken: string, personToken?: string) =>
      ((await refresh(socket, apiToken, personToken)) as { errors: Array<{ code: string }> }).errors.map((error) => error.code);
    assert.deepEqual(await refusal(client, 'garbage', nick), ['TOKEN_INVALID']);
    assert.deepEqual(await refusal(client, nick, nick), ['TOKEN_INVALID'], 'a person token as the API token');
    assert.deepEqual(await refusal(client, await apiToken(node, 'other', 'other-password'), nick), ['TOKEN_MISMATCH']);
    assert.deepEqual(await refusal(client, api, await personToken(node, 'ED', 'CHASE')), ['TOKEN_MISMATCH']);
    assert.deepEqual(await refusal(client, api), ['PERSON_TOKEN_REQUIRED']);
    assert.deepEqual(await refusal(bare, api, nick), ['TOKEN_MISMATCH'], 'a person where the connection has none');
    bare.send({ objType: 'REFRESH', apiToken: 'x'.repeat(9000) });
    assert.equal((await bare.next('ERROR')).errors[0]!.code, 'BAD_FRAME', 'a frame the parser refuses is an ERROR, as any');
    // The same tokens again: accepted, the expiry unchanged.
    assert.deepEqual(await refresh(client, api, nick), { type: 'REFRESH', response: { expiresAt: Math.min(expiresAtOf(api), expiresAtOf(nick)) } });
    assert.equal((await client.register(onEvent('order-updates', { recipientId: 2 }))).validOnEvents.length, 1);
    assert.equal((await client.closed).code, CloseCode.TOKEN_EXPIRED);
    assert.equal((await bare.closed).code, CloseCode.TOKEN_EXPIRED);
    assert.ok((await metric(node, 'herald_refreshes_total', { result: 'refused' })) >= 6);
    assert.ok((await metric(node, 'herald_refusals_total', { code: 'TOKEN_MISMATCH' })) >= 3);
  });
});

describe('the control API', () => {
  let node: TestNode;
  let api: string;
  before(async () => {
    node = await startNode(withOther);
    api = await apiToken(node);
  });
  after(() => node.close());

  const NICK = { person: { generator: 'customers', id: 'NICK' } };

  test('only an API user of control.groups may call it', async () => {
    const other = await apiToken(node, 'other', 'other-password');
    const refused = await control(node, 'disconnect', NICK, other);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.errors[0].code, 'FORBIDDEN');
    assert.equal((await presence(node, { person: 'customers:NICK' }, other)).status, 403);
    const missing = await post(`${node.http}/api/system-api/bench/revoke`, NICK);
    assert.equal(missing.status, 401);
    assert.equal(missing.body.errors[0].code, 'TOKEN_MISSING');
    assert.equal((await control(node, 'revoke', NICK, 'garbage')).body.errors[0].code, 'TOKEN_INVALID');
  });

  test('disconnect closes every connection of the person (4003, or 4503 for good) with the reason given, and no one else', async () => {
    const [nick, ed] = [await personToken(node, 'NICK', 'WAHLBERG'), await personToken(node, 'ED', 'CHASE')];
    const nicks = await Promise.all([TestSocket.connect(node, api, nick), TestSocket.connect(node, api, nick)]);
    const eds = await TestSocket.connect(node, api, ed);
    const told = await control(node, 'disconnect', { ...NICK, reason: 'your account moved' }, api);
    assert.deepEqual([told.status, told.body.data], [200, { nodes: 1 }]);
    for (const client of nicks) assert.deepEqual(await client.closed, { code: CloseCode.DISCONNECTED, reason: 'your account moved' });
    const again = await TestSocket.connect(node, api, nick);
    await control(node, 'disconnect', { ...NICK, reconnect: false }, api);
    assert.deepEqual(await again.closed, { code: CloseCode.DISCONNECTED_FINAL, reason: 'disconnected by the back end' });
    assert.equal(eds.socket.readyState, eds.socket.OPEN);
    assert.equal(await metric(node, 'herald_control_closes_total', { action: 'disconnect' }), 3);
    await eds.close();
  });

  test('disconnect of an API user closes each of its connections, with a person or without', async () => {
    const other = await apiToken(node, 'other', 'other-password');
    const theirs = await Promise.all([TestSocket.connect(node, other), TestSocket.connect(node, other, await personToken(node, 'ED', 'CHASE'))]);
    const ours = await TestSocket.connect(node, api);
    assert.equal((await control(node, 'disconnect', { apiUser: 'other' }, api)).status, 200);
    for (const client of theirs) assert.equal((await client.closed).code, CloseCode.DISCONNECTED);
    assert.equal(ours.socket.readyState, ours.socket.OPEN);
    await ours.close();
  });

  test('revoke: closes with 4504; the old tokens are refused at the handshake, at REFRESH and at the refresh grant; new ones pass', async () => {
    const login = await post(`${node.http}/api/system-api/bench/token`, { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'NICK', p: 'WAHLBERG' } });
    const { token: old, refresh_token: oldRefresh } = login.body.data;
    const open = await TestSocket.connect(node, api, old);
    const revoked = await control(node, 'revoke', NICK, api);
    assert.equal(revoked.status, 200);
    assert.equal(revoked.body.data.nodes, 1);
    assert.deepEqual(await open.closed, { code: CloseCode.TOKEN_REVOKED, reason: 'TOKEN_REVOKED' });

    const refused = TestSocket.open(node, api, old);
    assert.equal((await refused.next('TOKEN_VALIDATION')).errors[0]!.code, 'TOKEN_REVOKED');
    assert.equal((await refused.closed).code, CloseCode.TOKEN_REVOKED);
    const grant = await post(`${node.http}/api/system-api/bench/token`, { authTokenType: 'REFRESH', refreshToken: oldRefresh });
    assert.deepEqual([grant.status, grant.body.errors[0].code], [401, 'TOKEN_REVOKED']);

    await pastSecondOf(revoked.body.data.revokedAt);
    const fresh = await TestSocket.connect(node, api, await personToken(node, 'NICK', 'WAHLBERG'));
    const answer = (await refresh(fresh, api, old)) as { errors: Array<{ code: string }> };
    assert.equal(answer.errors[0]!.code, 'TOKEN_REVOKED');
    assert.equal(fresh.socket.readyState, fresh.socket.OPEN, 'a refused REFRESH leaves the connection be');
    await fresh.close();
  });

  test('a revoked API user cannot emit with its old token', async () => {
    const other = await apiToken(node, 'other', 'other-password');
    const revoked = await control(node, 'revoke', { apiUser: 'other' }, api);
    const refused = await emit(node, other, 'announcements', {});
    assert.deepEqual([refused.status, refused.body.errors[0].code], [401, 'TOKEN_REVOKED']);
    await pastSecondOf(revoked.body.data.revokedAt);
    assert.equal((await emit(node, await apiToken(node, 'other', 'other-password'), 'announcements', {})).status, 403, 'past the token: not its group');
  });

  test('presence: a person\'s connections, and the clients holding a subscription to an event', async () => {
    await pastSecondOf(Date.now());
    const nick = await personToken(node, 'NICK', 'WAHLBERG');
    const clients = await Promise.all([TestSocket.connect(node, api, nick), TestSocket.connect(node, api, nick), TestSocket.connect(node, api)]);
    await clients[0]!.register(onEvent('announcements'), onEvent('announcements', undefined, { select: ['title'] }));
    await clients[2]!.register(onEvent('announcements'));
    const person = await presence(node, { person: 'customers:NICK' }, api);
    assert.deepEqual(person.body.data, { person: { generator: 'customers', id: 'NICK' }, connected: true, connections: 2, nodes: 1, complete: true, missing: [] });
    const nobody = await presence(node, { person: 'customers:GRACE' }, api);
    assert.deepEqual([nobody.body.data.connected, nobody.body.data.connections, nobody.body.data.nodes], [false, 0, 0]);
    const event = await presence(node, { event: 'announcements' }, api);
    assert.deepEqual(event.body.data, { event: 'announcements', subscribers: 2, nodes: 1, complete: true, missing: [] });
    await Promise.all(clients.map((client) => client.close()));
    assert.equal((await presence(node, { person: 'customers:NICK' }, api)).body.data.connections, 0);
  });

  test('bad bodies and queries are 400 naming what is wrong', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{}, /exactly one of person/],
      [{ ...NICK, apiUser: 'bench' }, /exactly one of person/],
      [{ person: { generator: 'customers' } }, /person.id/],
      [{ person: { generator: 'a:b', id: 'x' } }, /person.generator/],
      [{ ...NICK, reconnect: 'yes' }, /reconnect/],
      [{ ...NICK, reason: 'é'.repeat(62) }, /reason/],
      [[1], /JSON object/],
    ];
    for (const [body, message] of cases) {
      const reply = await control(node, 'disconnect', body, api);
      assert.equal(reply.status, 400, JSON.stringify(body));
      assert.match(reply.body.errors[0].message, message);
    }
    for (const query of [{}, { person: 'NICK' }, { person: 'customers:NICK', event: 'x' }] as Array<Record<string, string>>) {
      assert.equal((await presence(node, query, api)).status, 400, JSON.stringify(query));
    }
  });
});
