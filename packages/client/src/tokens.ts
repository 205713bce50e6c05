/**
 * Tokens for a connection, and reading when they expire. The client only plans with `exp`: it never checks
 * a signature (the gateway does, at the handshake), so a token it cannot read is simply "expiry unknown".
 */

export interface Tokens {
  /** The API user token (x-am-authorization). */
  apiToken: string;
  /** The person token (x-am-user-authorization), when events need one. */
  personToken?: string | undefined;
}

/**
 * Why the client asks for tokens, so that `getTokens` can answer from a cache or go to the token API:
 * - `connect`: the first connect;
 * - `reconnect`: before a later attempt;
 * - `expired`: the gateway refused a token as expired (close 4001): a cached token would fail again;
 * - `refresh`: ahead of expiry (`refreshBeforeExpiryMs`).
 */
export type TokenReason = 'connect' | 'reconnect' | 'expired' | 'refresh';

export type GetTokens = (context: { reason: TokenReason }) => Promise<Tokens>;

/** The `exp` claim of a JWT in ms since the epoch; undefined when the token is not a JWT with a numeric `exp`. */
export function jwtExpiresAt(token: string): number | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === undefined) return undefined;
  try {
    const binary = atob(parts[1].replace(/-/g, '+').replace(/_/g, '/'));
    const claims: unknown = JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0))));
    const exp = typeof claims === 'object' && claims !== null ? (claims as { exp?: unknown }).exp : undefined;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Milliseconds until the tokens should be refreshed (`marginMs` before the first of them expires; 0 or less:
 * due now). Undefined when the expiry of one of them cannot be read: then there is nothing to plan with.
 */
export function msUntilRefresh(tokens: Tokens, marginMs: number, now: number): number | undefined {
  const given = tokens.personToken ? [tokens.apiToken, tokens.personToken] : [tokens.apiToken];
  const expiries = given.map(jwtExpiresAt);
  if (expiries.some((exp) => exp === undefined)) return undefined;
  return Math.min(...(expiries as number[])) - marginMs - now;
}
