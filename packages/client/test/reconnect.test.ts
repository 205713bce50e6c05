/**
 * Reconnecting against real gateway nodes: a node restart on the same port stands for a deploy. Resume too:
 * order-updates keeps a history in the default config, so the client registers again from its last position.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { HeraldClient, HeraldError, type Notification, type TokenReason, type Tokens } from '../src/index.ts';
import { apiToken, emit, next, personToken, record, restart, startNode, type Node } from './support.ts';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;
const FAST = { minDelayMs: 50, maxDelayMs: 150 };
const NICK = { conditionType: 'RESPONSE' as const, criteria: { recipientId: 2 } };
let node: Node;
let nick: Tokens;

before(async () => {
  node = await startNode();
  nick = { apiToken: await apiToken(node), personToken: await personToken(node) };
});
after(() => node.gateway.close());

/** getTokens that answers `answer(reason)` and records every reason it was asked with. */
function tokensBy(answer: (reason: TokenReason) => Tokens) {
  const reasons: TokenReason[] = [];
  const getTokens = async ({ reason }: { reason: TokenReason }) => {
    reasons.push(reason);
    return answer(reason);
  };
  return { reasons, getTokens };
}

test('after the node closes every socket: reconnect, register again, notifications keep their handle', { timeout: 5000 }, async () => {
  const { reasons, getTokens } = tokensBy(() => nick);
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  const { validOnEvents } = await client.register([{ apiName: 'order-updates', condition: NICK }, { apiName: 'announcements' }]);
  const handles = validOnEvents.map(({ eventId }) => eventId);
  const disconnected = next(client, 'disconnected');
  const stateThen = new Promise((resolve) => client.on('disconnected', () => resolve(client.state)));
  const reconnected = next(client, 'reconnected');
  node = await restart(node);

  const drop = await disconnected;
  assert.equal(await stateThen, 'reconnecting');
  assert.equal(drop.code, 1001);
  assert.equal(drop.willReconnect, true);
  // A draining node spread its closes already: the first attempt waits at most minDelayMs, not the full window.
  assert.ok(drop.delayMs !== undefined && drop.delayMs >= 0 && drop.delayMs <= 50, `delay ${drop.delayMs}`);
  const back = await reconnected;
  assert.ok(back.attempt >= 1);
  assert.deepEqual(back.registered, handles);
  assert.deepEqual(back.refused, []);
  assert.equal(client.state, 'open');
  assert.deepEqual(reasons.slice(0, 2), ['connect', 'reconnect']);

  const received = next(client, 'notification');
  await emit(node, 'order-updates', { recipientId: 2, status: 'shipped' });
  const { offset, epoch, ...notification } = await received;
  assert.deepEqual(notification, { eventId: handles[0], apiName: 'order-updates', eventType: 'CUSTOM_WS_EVENTS', eventData: { recipientId: 2, status: 'shipped' } });
  assert.equal(typeof offset === 'number' && typeof epoch === 'string', true, 'order-updates keeps a history: its position');
  const released = await client.unregister([handles[1] ?? '']);
  assert.deepEqual(released, { validOnEvents: [{ eventId: handles[1] }], invalidOnEvents: [] });
  assert.deepEqual(await client.close(), { code: 1000, reason: '' });
});

test('a subscription the new connection refuses is reported and dropped; the others carry on', { timeout: 5000 }, async () => {
  // Reconnecting without the person token: order-updates is bound to the person, announcements is not.
  const { getTokens } = tokensBy((reason) => (reason === 'connect' ? nick : { apiToken: nick.apiToken }));
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  const { validOnEvents } = await client.register([{ apiName: 'order-updates', condition: NICK }, { apiName: 'announcements' }]);
  const [orders, announcements] = validOnEvents.map(({ eventId }) => eventId);
  const reconnected = next(client, 'reconnected');
  node = await restart(node);

  const { registered, refused } = await reconnected;
  assert.deepEqual(registered, [announcements]);
  assert.equal(refused.length, 1);
  assert.equal(refused[0]?.eventId, orders);
  assert.equal(refused[0]?.onEvent.apiName, 'order-updates');
  assert.equal(refused[0]?.errors[0]?.code, 'PERSON_TOKEN_REQUIRED');
  const received = next(client, 'notification');
  await emit(node, 'announcements', { title: 'back' });
  assert.equal((await received).eventId, announcements);
  await client.close();
});

test('a frame too big for the node (1009) rejects its call instead of being sent again; the client reconnects', { timeout: 5000 }, async () => {
  const client = await HeraldClient.connect({ url: node.ws, apiToken: nick.apiToken, ...FAST });
  const reconnected = next(client, 'reconnected');
  const select = Array.from({ length: 2000 }, (_, i) => `field-${'x'.repeat(40)}-${i}`);
  await assert.rejects(client.register([{ apiName: 'announcements', select }]), (error: unknown) => {
    assert.ok(error instanceof HeraldError);
    assert.equal(error.closeCode, 1009);
    return true;
  });
  await reconnected;
  assert.equal((await client.register([{ apiName: 'announcements' }])).validOnEvents.length, 1);
  await client.close();
});

test('no reconnect after a final close code (4502)', { timeout: 5000 }, async () => {
  const { reasons, getTokens } = tokensBy((reason) => (reason === 'connect' ? nick : { apiToken: 'garbage' }));
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  const final = next(client, 'disconnected', ({ willReconnect }) => !willReconnect);
  node = await restart(node);

  const refusal = await final;
  assert.equal(refusal.code, 4502);
  assert.equal(refusal.errors[0]?.code, 'TOKEN_INVALID');
  assert.deepEqual(await client.closed, { code: 4502, reason: 'TOKEN_INVALID' });
  assert.equal(client.state, 'closed');
  assert.ok(reasons.slice(1).every((reason) => reason === 'reconnect'), String(reasons));
  await assert.rejects(client.register([{ apiName: 'announcements' }]), HeraldError);
});

test('close() by the application while reconnecting stops for good', { timeout: 5000 }, async () => {
  const { reasons, getTokens } = tokensBy(() => nick);
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  const waiting = next(client, 'disconnected', ({ willReconnect }) => willReconnect);
  await node.gateway.close();
  await waiting;
  assert.equal(client.state, 'reconnecting');
  const asked = reasons.length;
  assert.deepEqual(await client.close(4000, 'done'), { code: 4000, reason: 'done' });
  assert.equal(client.state, 'closed');

  node = await startNode(node.configFile, node.port);
  // Proving an absence takes a wait: three times the longest delay, in which an attempt would have come.
  await sleep(3 * FAST.maxDelayMs);
  assert.equal(reasons.length, asked, 'getTokens was called after close()');
  assert.equal(node.gateway.hub.sessions.size, 0);
});

test('with refreshBeforeExpiryMs, fresh tokens are reused on reconnect without asking getTokens', { timeout: 5000 }, async () => {
  const { reasons, getTokens } = tokensBy(() => nick);
  // Tokens live an hour here, so they stay fresh with a one-minute margin.
  const client = await HeraldClient.connect({ url: node.ws, getTokens, refreshBeforeExpiryMs: 60_000, ...FAST });
  const reconnected = next(client, 'reconnected');
  node = await restart(node);
  await reconnected;
  assert.deepEqual(reasons, ['connect']);
  await client.close();
});

test('herald-ws listen --no-reconnect exits at the first close', { timeout: 5000 }, async () => {
  const child = spawn(process.execPath, [
    CLI, 'listen', '--url', node.ws, '--api-token', nick.apiToken, '--register', 'announcements', '--no-reconnect',
  ]);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  while (!stdout.includes('"type":"REGISTER"')) await once(child.stdout, 'data');
  // Listened for before the restart: the CLI may exit while the new node is still starting.
  const exited = once(child, 'exit');
  node = await restart(node);
  assert.equal((await exited)[0], 0);
  assert.match(stderr, /^closed: 1001 /m);
});

/**
 * getTokens that makes each reconnect attempt wait for `letIn()`: what happens meanwhile happens while the client is
 * away. One `letIn()` lets one attempt through, whether the attempt asks before or after it.
 */
function gatedTokens() {
  let gate = Promise.withResolvers<void>();
  const getTokens = async ({ reason }: { reason: TokenReason }) => {
    if (reason === 'connect') return nick;
    await gate.promise;
    gate = Promise.withResolvers();
    return nick;
  };
  const letIn = () => gate.resolve();
  return { getTokens, letIn };
}

/** Drop every socket of the node without a close frame, as a network loss does (the client sees 1006). */
function dropAll(target: Node): void {
  for (const session of target.gateway.hub.sessions) session.socket.terminate();
}

const numbers = (notifications: Notification[]) => notifications.map((n) => (n.eventData as { n: number }).n);

test('after a drop, the notifications emitted while away are replayed in order, once, before reconnected says recovered', { timeout: 10_000 }, async () => {
  const { getTokens, letIn } = gatedTokens();
  const client = await HeraldClient.connect({ url: node.ws, getTokens, minDelayMs: 0, maxDelayMs: 10 });
  const { validOnEvents } = await client.register([{ apiName: 'order-updates', condition: NICK }]);
  const handle = validOnEvents[0]!.eventId;
  assert.equal(typeof validOnEvents[0]?.offset, 'number');
  const got = record(client, 'notification');
  const order: string[] = [];
  client.on('notification', () => void order.push('notification'));
  client.on('reconnected', () => void order.push('reconnected'));
  await emit(node, 'order-updates', { recipientId: 2, n: 1 });
  await next(client, 'notification');
  const away = next(client, 'disconnected');
  dropAll(node);
  assert.equal((await away).code, 1006);
  for (const n of [2, 3, 4]) await emit(node, 'order-updates', { recipientId: 2, n });
  const back = next(client, 'reconnected');
  letIn();
  const { recovered } = await back;
  assert.deepEqual(recovered, { [handle]: true });
  await emit(node, 'order-updates', { recipientId: 2, n: 5 });
  await next(client, 'notification');
  assert.deepEqual(numbers(got), [1, 2, 3, 4, 5]);
  assert.deepEqual(order, ['notification', 'notification', 'notification', 'notification', 'reconnected', 'notification']);
  assert.ok(got.every((n) => n.eventId === handle && typeof n.offset === 'number'));
  assert.deepEqual(got.map((n) => n.offset), [1, 2, 3, 4, 5].map((i) => got[0]!.offset! + i - 1));
  await client.close();
});

test('a node whose history was lost (the in-process broker, restarted): recovered false, and what comes next is delivered', { timeout: 10_000 }, async () => {
  const { getTokens, letIn } = gatedTokens();
  const client = await HeraldClient.connect({ url: node.ws, getTokens, minDelayMs: 0, maxDelayMs: 10 });
  const { validOnEvents } = await client.register([{ apiName: 'order-updates', condition: NICK }]);
  const handle = validOnEvents[0]!.eventId;
  for (const n of [1, 2]) await emit(node, 'order-updates', { recipientId: 2, n });
  await next(client, 'notification', (n) => (n.eventData as { n: number }).n === 2);
  const lost = record(client, 'historyLost');
  const back = next(client, 'reconnected');
  node = await restart(node);
  letIn();
  assert.deepEqual((await back).recovered, { [handle]: false });
  const received = next(client, 'notification');
  await emit(node, 'order-updates', { recipientId: 2, n: 3 });
  assert.deepEqual((await received).eventData, { recipientId: 2, n: 3 });
  assert.deepEqual(lost, [], 'the reply told it: the new epoch is no surprise');
  await client.close();
});
