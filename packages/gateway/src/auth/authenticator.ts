/**
 * An Authenticator turns credentials into signed tokens and tokens back into identities.
 * Verification is synchronous and allocation-light: it runs once per connection on the handshake path.
 */
import type { TokenGrant } from '@herald/protocol';

/** An API user (the application's back end, or its front end on behalf of people). Shared by its connections. */
export interface ApiUser {
  readonly name: string;
  readonly groups: ReadonlySet<string>;
}

/** A person, as their token's generator `select` gave them: `{ customer_id: 2, country: 'India' }`. */
export interface Person {
  readonly generator: string;
  /** Who they are within their generator: the token's `sub`, the `u` of their login. */
  readonly id: string;
  /** `<generator>:<id>`, built once per token: how the node finds a person's connections and revocations. */
  readonly key: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

/** When a verified token was issued and when it expires, ms since the epoch (Infinity: it does not). */
export interface TokenTimes {
  readonly issuedAt: number;
  readonly expiresAt: number;
}

/** An API user token, verified: one object per token text while it is kept, shared by its connections. */
export interface VerifiedApiToken extends TokenTimes {
  readonly user: ApiUser;
}

/** A person token, verified: one object per token text while it is kept, shared by its connections. */
export interface VerifiedPersonToken extends TokenTimes {
  readonly person: Person;
}

/** When a subject's tokens were revoked (ms since the epoch), if they were: tokens issued before then are refused. */
export interface RevocationList {
  apiUserRevokedAt(name: string): number | undefined;
  personRevokedAt(key: string): number | undefined;
}

/** The one rule: a token issued at or before its subject's revocation (both ms) is revoked. */
export const isRevoked = (revokedAt: number | undefined, issuedAt: number): boolean => revokedAt !== undefined && issuedAt <= revokedAt;

/** A person's key, as Person.key holds it. */
export const personKeyOf = (generator: string, id: string): string => `${generator}:${id}`;

/** A DB token request: names a generator, or spells out one generator's instance/database/collection/columns. */
export interface PersonCredentials {
  generator?: string | undefined;
  instance?: string | undefined;
  database?: string | undefined;
  collection?: string | undefined;
  usernameColumn?: string | undefined;
  passwordColumn?: string | undefined;
  u: string;
  p: string;
}

export type TokenRequest =
  | { kind: 'AM'; u: string; p: string }
  | { kind: 'AM_DB'; credentials: PersonCredentials }
  | { kind: 'REFRESH'; refreshToken: string };

/** Every verification also refuses a token issued before its subject's tokens were revoked (TOKEN_REVOKED). */
export interface Authenticator {
  /** Throws GatewayError BAD_CREDENTIALS, TOKEN_INVALID, TOKEN_EXPIRED, TOKEN_REVOKED or NOT_FOUND (no such generator). */
  issue(request: TokenRequest): Promise<TokenGrant>;
  /** Throws GatewayError TOKEN_INVALID, TOKEN_EXPIRED or TOKEN_REVOKED. */
  verifyApiUser(token: string): ApiUser;
  /** Throws GatewayError TOKEN_INVALID, TOKEN_EXPIRED or TOKEN_REVOKED. */
  verifyPerson(token: string): Person;
  /** verifyApiUser, with when the token was issued and when it expires (a connection is closed at its expiry). */
  verifyApiToken(token: string): VerifiedApiToken;
  /** verifyPerson, with when the token was issued and when it expires. */
  verifyPersonToken(token: string): VerifiedPersonToken;
}
