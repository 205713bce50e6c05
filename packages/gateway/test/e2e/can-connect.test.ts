/** Events' can-connect code on REGISTER: allowed, refused with its errorText, and failures that harm nobody. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { TestSocket, apiToken, emit, metric, onEvent, personToken, startNode, type TestNode } from '../support/gateway.ts';

let node: TestNode;
let api: string;

const events = {
  'not-ed': `async function main(g: { req: { auth: { person?: { customer_id?: number } } } }) {
    return g.req.auth.person?.customer_id === 3 ? { canConnect: false, errorText: 'not you, Ed' } : { canConnect: true };
  }`,
  throws: `async function main() { throw new Error('the rules are broken'); }`,
  loops: `async function main() { for (;;) {} }`,
  // In the sandbox (it names process), whose worker is a child of this process: the node's own.
  signals: `function main() { process.kill(process.ppid, 'SIGTERM'); return { canConnect: true }; }`,
  criteria: `async function main(g) {
    const wanted = g.req.eventData.condition?.criteria?.room;
    return { canConnect: wanted === 'lobby', errorText: 'only the lobby' };
  }`,
};

before(async () => {
  node = await startNode((raw) => {
    raw.code = { timeoutMs: 300 };
    for (const [name, code] of Object.entries(events)) {
      raw.events[name] = { groups: { register: ['bench'], emit: ['bench'] }, canConnect: { code } };
    }
  });
  api = await apiToken(node);
});
after(() => node.close());

async function outcome(client: TestSocket, entry: object): Promise<string> {
  const reply = await client.register(entry);
  return reply.validOnEvents.length === 1 ? 'valid' : `${reply.invalidOnEvents[0]?.errors[0]?.code}: ${reply.invalidOnEvents[0]?.errors[0]?.message}`;
}

test('the shipped events: India only (token, database) in an isolate, and in the sandbox', async () => {
  const nick = await TestSocket.connect(node, api, await personToken(node, 'NICK', 'WAHLBERG'));
  for (const event of ['checked-token', 'checked-database', 'checked-sandbox']) assert.equal(await outcome(nick, onEvent(event)), 'valid', event);
  const anonymous = await TestSocket.connect(node, api);
  assert.match(await outcome(anonymous, onEvent('checked-token')), /^CAN_CONNECT_REFUSED: refused by the event's code: only people in India/);
  assert.match(await outcome(anonymous, onEvent('checked-database')), /^CAN_CONNECT_REFUSED: .*a person token is needed/);
  await Promise.all([nick.close(), anonymous.close()]);
});

test("a refusal carries the code's errorText; the code sees the person and the REGISTER entry", async () => {
  const ed = await TestSocket.connect(node, api, await personToken(node, 'ED', 'CHASE'));
  const nick = await TestSocket.connect(node, api, await personToken(node, 'NICK', 'WAHLBERG'));
  assert.equal(await outcome(ed, onEvent('not-ed')), "CAN_CONNECT_REFUSED: refused by the event's code: not you, Ed");
  assert.equal(await outcome(nick, onEvent('not-ed')), 'valid');
  assert.equal(await outcome(nick, onEvent('criteria', { room: 'lobby' })), 'valid');
  assert.match(await outcome(nick, onEvent('criteria', { room: 'vault' })), /only the lobby/);
  await Promise.all([ed.close(), nick.close()]);
});

test('code that throws or never ends is a refusal with its reason, counted, and the node carries on', async () => {
  const client = await TestSocket.connect(node, api);
  assert.match(await outcome(client, onEvent('throws')), /^CAN_CONNECT_REFUSED: the event's code failed \(threw\): .*the rules are broken/);
  assert.match(await outcome(client, onEvent('loops')), /^CAN_CONNECT_REFUSED: the event's code failed \(timeout\)/);
  assert.equal(await outcome(client, onEvent('announcements')), 'valid');
  assert.equal(await metric(node, 'herald_can_connect_total', { event: 'throws', result: 'threw' }), 1);
  assert.equal(await metric(node, 'herald_can_connect_total', { event: 'loops', result: 'timeout' }), 1);
  await client.close();
});

test('sandbox code that signals the node is refused (ERR_ACCESS_DENIED), and the node keeps running and delivering', async () => {
  const client = await TestSocket.connect(node, api);
  assert.match(await outcome(client, onEvent('signals')), /^CAN_CONNECT_REFUSED: the event's code failed \(threw\): .*ERR_ACCESS_DENIED.*process\.kill/);
  assert.equal(await outcome(client, onEvent('announcements')), 'valid');
  assert.equal((await emit(node, api, 'announcements', { n: 1 })).status, 200);
  assert.deepEqual((await client.next('NOTIFICATION')).response.eventData, { n: 1 });
  await client.close();
});
