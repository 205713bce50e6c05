/** Tokens that expire: a node whose tokens live one second, 4001 at the handshake, getTokens and refreshBeforeExpiryMs. */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { HeraldClient, HeraldError, type TokenReason } from '../src/index.ts';
import { apiToken, expiresAt, next, record, restart, shortLivedConfig, startNode, type Node } from './support.ts';

const FAST = { minDelayMs: 50, maxDelayMs: 150 };
let node: Node;
/** An API token that has expired: the node answers it with 4001. */
let stale: string;

/**
 * exp is in whole seconds, so a one-second token may have anywhere from 0 to 1000 ms left. When it has less
 * than `minLifeMs`, wait for it to expire (the next second) and take one with nearly the whole second.
 */
async function freshToken(minLifeMs = 400): Promise<string> {
  const token = await apiToken(node);
  if (expiresAt(token) - Date.now() >= minLifeMs) return token;
  await sleep(expiresAt(token) - Date.now() + 5);
  return apiToken(node);
}

before(async () => {
  node = await startNode(shortLivedConfig());
  stale = await apiToken(node);
  // The node refuses a token once the clock is past its exp: wait for that moment, at most one second.
  await sleep(expiresAt(stale) - Date.now() + 5);
});
after(async () => {
  await node.gateway.close();
  rmSync(dirname(node.configFile), { recursive: true, force: true });
});

test('an expired token at the first connect rejects connect() with TOKEN_EXPIRED and 4001, even with getTokens', { timeout: 5000 }, async () => {
  for (const getTokens of [undefined, async () => ({ apiToken: await freshToken() })]) {
    await assert.rejects(HeraldClient.connect({ url: node.ws, apiToken: stale, getTokens, ...FAST }), (error: unknown) => {
      assert.ok(error instanceof HeraldError);
      assert.equal(error.closeCode, 4001);
      assert.equal(error.errors[0]?.code, 'TOKEN_EXPIRED');
      return true;
    });
  }
});

test('retryFirstConnect: after 4001 at the first connect, getTokens is asked for fresh tokens', { timeout: 5000 }, async () => {
  const reasons: TokenReason[] = [];
  const client = new HeraldClient({
    url: node.ws,
    getTokens: async ({ reason }) => {
      reasons.push(reason);
      return { apiToken: reason === 'connect' ? stale : await freshToken() };
    },
    retryFirstConnect: true,
    ...FAST,
  });
  const disconnected = record(client, 'disconnected');
  await client.connect();
  assert.deepEqual(reasons, ['connect', 'expired']);
  assert.deepEqual(
    disconnected.map(({ code, willReconnect }) => ({ code, willReconnect })),
    [{ code: 4001, willReconnect: true }],
  );
  await client.close();
});

test('a reconnect refused with 4001 asks getTokens for fresh tokens and goes on', { timeout: 5000 }, async () => {
  const reasons: TokenReason[] = [];
  // As an application with a token cache would: cached tokens on reconnect, new ones once told they expired.
  const getTokens = async ({ reason }: { reason: TokenReason }) => {
    reasons.push(reason);
    return { apiToken: reason === 'reconnect' ? stale : await freshToken() };
  };
  const client = await HeraldClient.connect({ url: node.ws, getTokens, ...FAST });
  const expired = next(client, 'disconnected', ({ code }) => code === 4001);
  const reconnected = next(client, 'reconnected');
  node = await restart(node);
  assert.equal((await expired).willReconnect, true);
  await reconnected;
  assert.equal(reasons[0], 'connect');
  assert.equal(reasons.at(-1), 'expired');
  assert.ok(reasons.slice(1, -1).every((reason) => reason === 'reconnect'), String(reasons));
  await client.close();
});

test('refreshBeforeExpiryMs calls getTokens ahead of the expiry of the tokens in use', { timeout: 5000 }, async () => {
  const handedOut: string[] = [];
  let refreshed: (at: number) => void = () => {};
  const refreshedAt = new Promise<number>((resolve) => (refreshed = resolve));
  const getTokens = async ({ reason }: { reason: TokenReason }) => {
    if (reason === 'refresh') refreshed(Date.now());
    handedOut.push(await freshToken());
    return { apiToken: handedOut.at(-1) ?? '' };
  };
  const client = await HeraldClient.connect({ url: node.ws, getTokens, refreshBeforeExpiryMs: 300, ...FAST });
  const firstExpiry = expiresAt(handedOut[0] ?? '');
  const at = await refreshedAt;
  assert.ok(at < firstExpiry, `refreshed ${firstExpiry - at} ms after expiry`);
  assert.ok(at >= firstExpiry - 300 - 20, `refreshed ${firstExpiry - at} ms before expiry, asked for 300`);
  await client.close();
});
