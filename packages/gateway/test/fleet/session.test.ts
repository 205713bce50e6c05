/**
 * Session control on three node processes behind HAProxy, one Redis: one call disconnects a person on every node;
 * revoked tokens are refused by every node, a node restarted after the revocation included; presence adds up every
 * node's count, and right after a kill -9 counts only the nodes that answer.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CloseCode } from '@herald/protocol';
import { control, pastSecondOf, presence } from '../support/control.ts';
import { TestSocket, apiToken, onEvent, personToken, type TestNode } from '../support/gateway.ts';
import { startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

let redis: RedisServer;
let fleet: Fleet;
let api: string;

before(async () => {
  redis = await startRedis();
  fleet = await startFleet(3, redis.url);
  api = await apiToken(fleet);
});
after(async () => {
  await fleet.stop();
  await redis.stop();
});

/** TestSocket takes a node's address; a fleet node has the same. */
const at = (node: FleetNode) => node as unknown as TestNode;
const NICK = { person: { generator: 'customers', id: 'NICK' } };

test('one disconnect call closes the person\'s connections on all three nodes, and no one else\'s', async () => {
  const [nick, ed] = [await personToken(fleet, 'NICK', 'WAHLBERG'), await personToken(fleet, 'ED', 'CHASE')];
  const nicks = await Promise.all(fleet.nodes.map((node) => TestSocket.connect(at(node), api, nick)));
  const eds = await Promise.all(fleet.nodes.map((node) => TestSocket.connect(at(node), api, ed)));
  const calledAt = performance.now();
  const told = await control(fleet, 'disconnect', { ...NICK, reason: 'maintenance' }, api);
  assert.deepEqual([told.status, told.body.data], [200, { nodes: 3 }]);
  for (const client of nicks) assert.deepEqual(await client.closed, { code: CloseCode.DISCONNECTED, reason: 'maintenance' });
  const lastClosedMs = performance.now() - calledAt;
  console.log(`# a person on 3 nodes disconnected: last socket closed ${lastClosedMs.toFixed(1)} ms after the call began`);
  assert.ok(lastClosedMs < 1000, `${lastClosedMs} ms`);
  for (const client of eds) assert.equal(client.socket.readyState, client.socket.OPEN);
  await Promise.all(eds.map((client) => client.close()));
});

test('revoked tokens are refused by every node, one restarted after the revocation too; new tokens pass', async () => {
  const old = await personToken(fleet, 'NICK', 'WAHLBERG');
  const open = await Promise.all(fleet.nodes.map((node) => TestSocket.connect(at(node), api, old)));
  const revoked = await control(fleet.nodes[0]!, 'revoke', NICK, api);
  assert.equal(revoked.body.data.nodes, 3);
  for (const client of open) assert.equal((await client.closed).code, CloseCode.TOKEN_REVOKED);
  fleet.nodes[2]!.child.kill('SIGTERM');
  await fleet.restart(2);
  for (const node of fleet.nodes) {
    const refused = TestSocket.open(at(node), api, old);
    assert.equal((await refused.next('TOKEN_VALIDATION')).errors[0]!.code, 'TOKEN_REVOKED', node.id);
    assert.equal((await refused.closed).code, CloseCode.TOKEN_REVOKED);
  }
  await pastSecondOf(revoked.body.data.revokedAt);
  const fresh = await personToken(fleet, 'NICK', 'WAHLBERG');
  for (const node of fleet.nodes) await (await TestSocket.connect(at(node), api, fresh)).close();
});

test('presence adds up every node; right after a kill -9 the dead node is missing, not counted, then not asked', async () => {
  await until(async () => (await fetch(`${fleet.http}/readyz`)).ok, 'the load balancer to route');
  const nick = await personToken(fleet, 'NICK', 'WAHLBERG');
  const [a, b, c] = fleet.nodes as [FleetNode, FleetNode, FleetNode];
  const clients = await Promise.all([a, b, b].map((node) => TestSocket.connect(at(node), api, nick)));
  const listeners = await Promise.all([a, b, c, c].map((node) => TestSocket.connect(at(node), api)));
  await Promise.all(listeners.map((client) => client.register(onEvent('announcements'))));
  const person = await presence(fleet, { person: 'customers:NICK' }, api);
  assert.deepEqual(person.body.data, { person: { generator: 'customers', id: 'NICK' }, connected: true, connections: 3, nodes: 2, complete: true, missing: [] });
  const event = await presence(fleet, { event: 'announcements' }, api);
  assert.deepEqual(event.body.data, { event: 'announcements', subscribers: 4, nodes: 3, complete: true, missing: [] });

  b.child.kill('SIGKILL');
  await b.exited;
  const afterKill = await presence(a, { person: 'customers:NICK' }, api);
  assert.deepEqual(afterKill.body.data, { person: { generator: 'customers', id: 'NICK' }, connected: true, connections: 1, nodes: 1, complete: false, missing: [b.id] });
  assert.equal((await presence(c, { event: 'announcements' }, api)).body.data.subscribers, 3);
  // Once its lease has run out (2 s here) the dead node is not asked at all.
  await until(async () => (await presence(a, { person: 'customers:NICK' }, api)).body.data.complete === true, 'the dead node not asked', 10_000);
  assert.equal((await presence(c, { person: 'customers:NICK' }, api)).body.data.connections, 1);
  await Promise.all([clients[0]!, ...listeners.filter((_, i) => i !== 1)].map((client) => client.close()));
});
