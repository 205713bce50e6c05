/** Test support for the client: real gateway nodes in this process, restartable on the same port, and event waits. */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { DEFAULT_CONFIG_FILE, Gateway, loadConfigFile } from '@herald/gateway';
import type { ClientEvents, EventMap, HeraldClient } from '../src/index.ts';

export interface Node {
  gateway: Gateway;
  configFile: string;
  port: number;
  http: string;
  ws: string;
}

export async function startNode(configFile = DEFAULT_CONFIG_FILE, port = 0): Promise<Node> {
  const gateway = await Gateway.create(loadConfigFile(configFile, { port, host: '127.0.0.1' }));
  const bound = await gateway.listen();
  return { gateway, configFile, port: bound, http: `http://127.0.0.1:${bound}`, ws: `ws://127.0.0.1:${bound}` };
}

/** Stop the node (every socket is closed with 1001) and start a new one on the same port, as a deploy would. */
export async function restart(node: Node): Promise<Node> {
  await node.gateway.close();
  return startNode(node.configFile, node.port);
}

/**
 * A copy of the default config whose tokens live `ttlSeconds` (default one second), and whose connections are told
 * `noticeMs` before their tokens expire (default 0: not told, only closed with 4001); file paths made absolute, as
 * the copy lives elsewhere.
 */
export function shortLivedConfig(ttlSeconds = 1, noticeMs = 0): string {
  const text = readFileSync(DEFAULT_CONFIG_FILE, 'utf8');
  const adjusted = text
    .replace('tokenTtlSeconds: 3600', `tokenTtlSeconds: ${ttlSeconds}`)
    .replace('expiryNoticeMs: 60000', `expiryNoticeMs: ${noticeMs}`)
    .replace(/\b(seed|file): ([^\s,}]+)/g, (_, key: string, path: string) => `${key}: ${resolve(dirname(DEFAULT_CONFIG_FILE), path)}`);
  const changed = [`tokenTtlSeconds: ${ttlSeconds}`, `expiryNoticeMs: ${noticeMs}`, 'seed: /'].every((part) => adjusted.includes(part));
  assert.ok(changed, 'default.yaml changed shape');
  const file = join(mkdtempSync(join(tmpdir(), 'herald-client-')), 'short-lived.yaml');
  writeFileSync(file, adjusted);
  return file;
}

async function token(node: Node, body: object): Promise<string> {
  const response = await fetch(`${node.http}/api/system-api/bench/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const envelope = (await response.json()) as { data?: { token: string } };
  assert.ok(envelope.data, JSON.stringify(envelope));
  return envelope.data.token;
}

export const apiToken = (node: Node) => token(node, { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } });

/** A person's token: NICK's (customer_id 2) unless another is named. */
export const personToken = (node: Node, u = 'NICK', p = 'WAHLBERG') =>
  token(node, { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u, p } });

export async function emit(node: Node, name: string, eventData: object): Promise<void> {
  const response = await fetch(`${node.http}/api/system-api/bench/emit-event-ws`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-am-authorization': await apiToken(node) },
    body: JSON.stringify({ name, eventData }),
  });
  assert.equal(response.status, 200);
}

/** The next `type` event of the client that satisfies `accept`. */
export function next<K extends keyof ClientEvents, E extends object = EventMap>(
  client: HeraldClient<E>,
  type: K,
  accept: (event: ClientEvents<E>[K]) => boolean = () => true,
): Promise<ClientEvents<E>[K]> {
  return new Promise((resolve) => {
    const stop = client.on(type, (event) => {
      if (!accept(event)) return;
      stop();
      resolve(event);
    });
  });
}

/** Every `type` event of the client from now on. */
export function record<K extends keyof ClientEvents>(client: HeraldClient, type: K): ClientEvents[K][] {
  const events: ClientEvents[K][] = [];
  client.on(type, (event) => events.push(event));
  return events;
}

/** A JWT's exp in ms, read the way a test would check the client. */
export function expiresAt(jwt: string): number {
  const payload = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()) as { exp: number };
  return payload.exp * 1000;
}
