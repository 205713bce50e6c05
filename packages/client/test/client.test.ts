/** The client SDK and the herald-ws command line against a real gateway node. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { DEFAULT_CONFIG_FILE, Gateway, loadConfigFile } from '@herald/gateway';
import { HeraldClient, HeraldError } from '../src/index.ts';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;
let gateway: Gateway;
let http: string;
let ws: string;

before(async () => {
  gateway = await Gateway.create(loadConfigFile(DEFAULT_CONFIG_FILE, { port: 0, host: '127.0.0.1' }));
  const port = await gateway.listen();
  http = `http://127.0.0.1:${port}`;
  ws = `ws://127.0.0.1:${port}`;
});
after(() => gateway.close());

async function token(body: object): Promise<string> {
  const response = await fetch(`${http}/api/system-api/bench/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return ((await response.json()) as { data: { token: string } }).data.token;
}

const apiToken = () => token({ authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } });

async function emit(name: string, eventData: object): Promise<void> {
  const response = await fetch(`${http}/api/system-api/bench/emit-event-ws`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-am-authorization': await apiToken() },
    body: JSON.stringify({ name, eventData }),
  });
  assert.equal(response.status, 200);
}

test('connect, register, receive, unregister', async () => {
  const personToken = await token({ authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'NICK', p: 'WAHLBERG' } });
  const client = await HeraldClient.connect({ url: ws, apiToken: await apiToken(), personToken });
  const reply = await client.register([
    { apiName: 'order-updates', condition: { conditionType: 'RESPONSE', criteria: { recipientId: '2' } } },
    { apiName: 'order-updates', condition: { conditionType: 'RESPONSE', criteria: { recipientId: '3' } } },
  ]);
  assert.equal(reply.validOnEvents.length, 1);
  assert.equal(reply.invalidOnEvents[0]?.errors[0]?.code, 'CRITERIA_NOT_YOURS');
  const received = new Promise((resolve) => client.onNotification(resolve));
  await emit('order-updates', { recipientId: 2, status: 'shipped' });
  // order-updates keeps a history (the default config): its notifications carry their position, the reply's + 1.
  const { offset, epoch } = reply.validOnEvents[0] ?? {};
  assert.deepEqual(await received, {
    eventId: reply.validOnEvents[0]?.eventId,
    apiName: 'order-updates',
    eventType: 'CUSTOM_WS_EVENTS',
    offset: (offset ?? NaN) + 1,
    epoch,
    eventData: { recipientId: 2, status: 'shipped' },
  });
  const released = await client.unregister([reply.validOnEvents[0]?.eventId ?? '']);
  assert.equal(released.validOnEvents.length, 1);
  assert.equal((await client.close()).code, 1000);
});

test('notifications() iterates from the call on and ends when the client is closed', async () => {
  const client = await HeraldClient.connect({ url: ws, apiToken: await apiToken() });
  await client.register([{ apiName: 'announcements', select: ['title'] }]);
  const iterator = client.notifications();
  // Both arrive before the loop starts reading: the iterator keeps them.
  await emit('announcements', { title: 'one', body: 'x' });
  await emit('announcements', { title: 'two' });
  const titles: unknown[] = [];
  for await (const { eventData } of iterator) {
    titles.push(eventData);
    if (titles.length === 2) void client.close();
  }
  assert.deepEqual(titles, [{ title: 'one' }, { title: 'two' }]);
  assert.equal(client.state, 'closed');
});

test('bad tokens reject connect with the TOKEN_VALIDATION errors and the close code', async () => {
  await assert.rejects(HeraldClient.connect({ url: ws, apiToken: 'garbage' }), (error: unknown) => {
    assert.ok(error instanceof HeraldError);
    assert.equal(error.closeCode, 4502);
    assert.equal(error.errors[0]?.code, 'TOKEN_INVALID');
    return true;
  });
});

test('the README walk-through: herald-ws tokens, herald-ws listen, an emit, the NOTIFICATION', async () => {
  const tokens = spawn(process.execPath, [CLI, 'tokens', '--http', http]);
  let exports = '';
  tokens.stdout.on('data', (chunk) => (exports += chunk));
  assert.equal((await once(tokens, 'exit'))[0], 0);
  const env = Object.fromEntries([...exports.matchAll(/^export (\w+)=(\S+)$/gm)].map(([, k, v]) => [k, v]));
  assert.ok(env.API_TOKEN && env.PERSON_TOKEN, exports);

  const listen = spawn(process.execPath, [
    CLI, 'listen', '--url', ws, '--api-token', env.API_TOKEN, '--person-token', env.PERSON_TOKEN,
    '--register', 'order-updates', '--criteria', 'recipientId=2', '--count', '1',
  ]);
  let lines = '';
  listen.stdout.on('data', (chunk) => (lines += chunk));
  while (!lines.includes('"type":"REGISTER"')) await once(listen.stdout, 'data');
  await emit('order-updates', { recipientId: '2', orderId: 1001 });
  assert.equal((await once(listen, 'exit'))[0], 0);
  const frames = lines.trim().split('\n').map((line) => JSON.parse(line) as { type: string; response: any });
  assert.deepEqual(frames.map((frame) => frame.type), ['CONNECTED', 'REGISTER', 'NOTIFICATION']);
  assert.deepEqual(frames[2]?.response.eventData, { recipientId: '2', orderId: 1001 });
});
