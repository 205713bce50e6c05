/** Test support for session control: the control API's calls, and waiting out the second a revocation was made in. */
import { setTimeout as sleep } from 'node:timers/promises';
import { post, type HttpReply, type HttpTarget } from './gateway.ts';

const base = (node: HttpTarget) => `${node.http}/api/system-api/bench`;

/** POST .../disconnect or .../revoke with an API user token. */
export function control(node: HttpTarget, action: 'disconnect' | 'revoke', body: unknown, token: string): Promise<HttpReply> {
  return post(`${base(node)}/${action}`, body, { 'x-am-authorization': token });
}

/** GET .../presence?<query>. */
export async function presence(node: HttpTarget, query: Record<string, string>, token: string): Promise<HttpReply> {
  const response = await fetch(`${base(node)}/presence?${new URLSearchParams(query)}`, { headers: { 'x-am-authorization': token } });
  return { status: response.status, body: await response.json() };
}

/**
 * Tokens carry their issue time in whole seconds, so a token issued in the second of a revocation counts as issued
 * before it: wait for the next second, after which new tokens are accepted.
 */
export async function pastSecondOf(ms: number): Promise<void> {
  const wait = (Math.floor(ms / 1000) + 1) * 1000 - Date.now() + 5;
  if (wait > 0) await sleep(wait);
}
