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
  readonly fields: Readonly<Record<string, unknown>>;
}

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

export interface Authenticator {
  /** Throws GatewayError BAD_CREDENTIALS, TOKEN_INVALID, TOKEN_EXPIRED or NOT_FOUND (no such generator). */
  issue(request: TokenRequest): Promise<TokenGrant>;
  /** Throws GatewayError TOKEN_INVALID or TOKEN_EXPIRED. */
  verifyApiUser(token: string): ApiUser;
  /** Throws GatewayError TOKEN_INVALID or TOKEN_EXPIRED. */
  verifyPerson(token: string): Person;
}
