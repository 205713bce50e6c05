/**
 * Resume against a real node (order-updates keeps a history in the default config): after a drop the client
 * registers again from its last position, the missed notifications come through 'notification' in order before
 * 'reconnected', which says whether the history reached back.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { HeraldClient, type Notification, type TokenReason, type Tokens } from '../src/index.ts';
import { apiToken, emit, next, personToken, record, restart, startNode, type Node } from './support.ts';

const NICK = { conditionType: 'RESPONSE' as const, criteria: { recipientId: 2 } };
let node: Node;
let nick: Tokens;

before(async () => {
  node = await startNode();
  nick = { apiToken: await apiToken(node), personToken: await personToken(node) };
});
after(() => node.gateway.close());

/** getTokens that makes each reconnect attempt wait for `let()`: what happens meanwhile happens while the client is away. */
function gatedTokens() {
  let gate = Promise.withResolvers<void>();
  const getTokens = async ({ reason }: { reason: TokenReason }) => {
    if (reason !== 'connect') await gate.promise;
    return nick;
  };
  const letIn = () => {
    gate.resolve();
    gate = Promise.withResolvers();
  };
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
