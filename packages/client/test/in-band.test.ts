/**
 * Refresh in band against a real node whose tokens live 3 s and whose connections are told 1.5 s before expiry:
 * the client answers TOKEN_EXPIRING (or its own refreshBeforeExpiryMs) with REFRESH on the open connection and is
 * not closed; a refused REFRESH ends in 4001 and the usual reconnect with fresh tokens.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { after, before, test } from 'node:test';
import { HeraldClient, HeraldError, type TokenReason, type Tokens } from '../src/index.ts';
import { apiToken, emit, expiresAt, next, personToken, record, shortLivedConfig, startNode, type Node } from './support.ts';

const FAST = { minDelayMs: 50, maxDelayMs: 150 };
const NICK = { conditionType: 'RESPONSE' as const, criteria: { recipientId: 2 } };
let node: Node;

before(async () => {
  node = await startNode(shortLivedConfig(3, 1500));
});
after(async () => {
  await node.gateway.close();
  rmSync(dirname(node.configFile), { recursive: true, force: true });
});

const nickTokens = async (): Promise<Tokens> => ({ apiToken: await apiToken(node), personToken: await personToken(node) });
const expiryOf = (tokens: Tokens): number => Math.min(expiresAt(tokens.apiToken), expiresAt(tokens.personToken ?? tokens.apiToken));

/** getTokens answering `answer(reason)`, recording the reasons. */
function tokensBy(answer: (reason: TokenReason) => Promise<Tokens>) {
  const reasons: TokenReason[] = [];
  return { reasons, getTokens: async ({ reason }: { reason: TokenReason }) => (reasons.push(reason), answer(reason)) };
}

test("told TOKEN_EXPIRING, the client refreshes in band: the connection outlives its first tokens, subscriptions and all", { timeout: 10_000 }, async () => {
  const first = await nickTokens();
  const { reasons, getTokens } = tokensBy(async (reason) => (reason === 'connect' ? first : nickTokens()));
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  try {
    const disconnects = record(client, 'disconnected');
    const [handle] = (await client.register([{ apiName: 'order-updates', condition: NICK }])).validOnEvents.map(({ eventId }) => eventId);
    const { expiresAt: renewed } = await next(client, 'refreshed');
    assert.ok(renewed > expiryOf(first), 'a later expiry');
    assert.deepEqual(reasons, ['connect', 'refresh']);
    // Past the first tokens' expiry and the node's next tick.
    await new Promise((resolve) => setTimeout(resolve, expiryOf(first) + 1100 - Date.now()));
    const notified = next(client, 'notification');
    await emit(node, 'order-updates', { recipientId: 2, after: 'expiry' });
    // order-updates keeps a history: the notification also carries its position.
    const { eventId, eventType, eventData } = await notified;
    assert.deepEqual({ eventId, eventType, eventData }, { eventId: handle, eventType: 'CUSTOM_WS_EVENTS', eventData: { recipientId: 2, after: 'expiry' } });
    assert.deepEqual(disconnects, [], 'never closed');
  } finally {
    await client.close();
  }
});

test('refreshBeforeExpiryMs refreshes in band by itself, before the node says anything', { timeout: 10_000 }, async () => {
  const first = await nickTokens();
  // When it asked for new tokens: the refresh's own round trips (a login among them) may be slow on a loaded machine.
  let askedAt = Infinity;
  const { getTokens } = tokensBy(async (reason) => {
    if (reason === 'connect') return first;
    askedAt = Math.min(askedAt, Date.now());
    return nickTokens();
  });
  const client = await HeraldClient.connect({ url: node.ws, getTokens, refreshBeforeExpiryMs: 2000, ...FAST });
  try {
    await next(client, 'refreshed');
    assert.ok(askedAt < expiryOf(first) - 1500, 'asked before the notice was due');
  } finally {
    await client.close();
  }
});

test('a refused REFRESH is reported, and the close at expiry (4001) leads to a reconnect with fresh tokens', { timeout: 10_000 }, async () => {
  const first = await nickTokens();
  // The refresh answers another person's tokens: the node refuses them (TOKEN_MISMATCH).
  const { reasons, getTokens } = tokensBy(async (reason) =>
    reason === 'connect' ? first : reason === 'refresh' ? { apiToken: await apiToken(node), personToken: await personToken(node, 'ED', 'CHASE') } : nickTokens(),
  );
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  try {
    await client.register([{ apiName: 'order-updates', condition: NICK }]);
    const refused = await next(client, 'error');
    assert.ok(refused instanceof HeraldError);
    assert.deepEqual(refused.errors.map((error) => error.code), ['TOKEN_MISMATCH']);
    const closed = await next(client, 'disconnected');
    assert.deepEqual([closed.code, closed.willReconnect], [4001, true]);
    const { registered } = await next(client, 'reconnected');
    assert.equal(registered.length, 1);
    assert.equal(reasons[reasons.indexOf('expired') - 1], 'refresh', String(reasons));
  } finally {
    await client.close();
  }
});
