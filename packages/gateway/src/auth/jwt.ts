/**
 * The Authenticator over signed JWTs: HS256 with a secret, or ES256 with a key pair.
 * API users come from the config; people from a token generator's collection in a DataSource.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createSigner, createVerifier, TokenError } from 'fast-jwt';
import type { TokenGrant } from '@herald/protocol';
import type { Config, TokenGeneratorConfig } from '../config/schema.ts';
import type { DataSource } from '../data/data-source.ts';
import { GatewayError } from '../errors.ts';
import {
  isRevoked,
  personKeyOf,
  type ApiUser,
  type Authenticator,
  type Person,
  type PersonCredentials,
  type RevocationList,
  type TokenRequest,
  type TokenTimes,
  type VerifiedApiToken,
  type VerifiedPersonToken,
} from './authenticator.ts';
import { DECOY_HASH, PasswordChecks } from './password.ts';

type TokenKind = 'api' | 'person';

interface Claims {
  typ: TokenKind | 'refresh';
  /** The kind a refresh token renews. */
  for?: TokenKind;
  sub: string;
  /** A person's generator and selected columns. */
  gen?: string;
  usr?: Record<string, unknown>;
  /** Issue time and expiry, s since the epoch (set by the signer). */
  iat?: number;
  exp?: number;
}

/**
 * Tokens verified, by their exact text, each until it must be verified again: at its expiry, or after `keptMs` (as
 * fast-jwt's cacheTTL). fast-jwt's own cache keys each token by a SHA-256 of it, which every emit and every handshake
 * paid; a lookup by the text itself costs nothing, and cannot collide. Only verified tokens enter. At most `max` are
 * kept, in two generations: once the newer holds half, the older is dropped whole. Dropping the oldest one at a time
 * (`keys().next()`) made V8 scan the holes the deletes leave (docs/architecture.md, "Measured costs").
 */
export class VerifiedTokens<T> {
  #current = new Map<string, { value: T; until: number }>();
  #older = new Map<string, { value: T; until: number }>();
  readonly #half: number;
  readonly #keptMs: number;

  constructor(max: number, keptMs: number) {
    this.#half = Math.max(1, Math.floor(max / 2));
    this.#keptMs = keptMs;
  }

  get(token: string, now: number): T | undefined {
    const kept = this.#current.get(token) ?? this.#older.get(token);
    return kept !== undefined && now < kept.until ? kept.value : undefined;
  }

  /** `exp`: the token's expiry, s since the epoch. */
  set(token: string, value: T, now: number, exp: number | undefined): void {
    if (this.#current.size >= this.#half) {
      this.#older = this.#current;
      this.#current = new Map();
    }
    this.#current.set(token, { value, until: Math.min(now + this.#keptMs, exp === undefined ? Infinity : exp * 1000) });
  }
}

/** A node sees a handful of API-user tokens (one per back end), and one comes with every emit. */
const API_TOKENS_KEPT = 64;
/** A person's token comes with each of their connections: kept, a reconnect skips the signature check. */
const PERSON_TOKENS_KEPT = 10_000;
const TOKEN_KEPT_MS = 600_000;
/** Password checks at once: half of libuv's default pool, so that DNS and file work keep threads through a login flood. */
const PASSWORD_CHECKS_AT_ONCE = 2;
/** Logins waiting for a check; past it, UNAVAILABLE: a bounded wait, at the default cost (docs/architecture.md). */
const PASSWORD_CHECKS_WAITING = 64;

export type PersonLoginResult = 'ok' | 'wrong_password' | 'unknown_person' | 'not_hashed' | 'busy';

/** What the authenticator tells the node about logins: counted, and logged once where the config needs mending. */
export interface AuthObserver {
  personLogin(generator: string, result: PersonLoginResult): void;
  /** Once per generator: a person's passwordColumn holds no hash (plain text?), so nobody logs in with it. */
  passwordNotHashed(generator: string, column: string): void;
}

export interface JwtAuthenticatorOptions {
  config: Pick<Config, 'auth' | 'apiUsers' | 'tokenGenerators' | 'userPath'>;
  /** Data sources by instance name, for token generators. */
  dataSources: ReadonlyMap<string, DataSource>;
  /** Revoked subjects (the control API's revoke); none without it. */
  revocations?: RevocationList | undefined;
  observer?: AuthObserver | undefined;
}

/** A token without `iat` counts as issued at the epoch (before any revocation), one without `exp` as never expiring. */
function timesOf({ iat, exp }: Claims): TokenTimes {
  return { issuedAt: (iat ?? 0) * 1000, expiresAt: exp === undefined ? Infinity : exp * 1000 };
}

function refuseRevoked(revokedAt: number | undefined, issuedAt: number, whose: string): void {
  if (isRevoked(revokedAt, issuedAt)) {
    throw new GatewayError('TOKEN_REVOKED', `the tokens of ${whose} issued until ${new Date(revokedAt!).toISOString()} were revoked`);
  }
}

export class JwtAuthenticator implements Authenticator {
  readonly #apiUsers = new Map<string, { user: ApiUser; password: string }>();
  readonly #verifiedApiTokens = new VerifiedTokens<VerifiedApiToken>(API_TOKENS_KEPT, TOKEN_KEPT_MS);
  readonly #verifiedPersons = new VerifiedTokens<VerifiedPersonToken>(PERSON_TOKENS_KEPT, TOKEN_KEPT_MS);
  readonly #revocations: RevocationList | undefined;
  readonly #config: JwtAuthenticatorOptions['config'];
  readonly #dataSources: ReadonlyMap<string, DataSource>;
  readonly #sign: (claims: Claims) => string;
  readonly #signRefresh: (claims: Claims) => string;
  readonly #verify: (token: string) => Claims;
  readonly #passwords = new PasswordChecks(PASSWORD_CHECKS_AT_ONCE, PASSWORD_CHECKS_WAITING);
  /** Per generator, a stored hash seen: an unknown person's login is checked against it, to take as long as a known one's. */
  readonly #decoys = new Map<string, string>();
  readonly #notHashedTold = new Set<string>();
  readonly #observer: AuthObserver | undefined;

  constructor({ config, dataSources, revocations, observer }: JwtAuthenticatorOptions) {
    this.#config = config;
    this.#revocations = revocations;
    this.#dataSources = dataSources;
    this.#observer = observer;
    for (const [name, { password, groups }] of Object.entries(config.apiUsers)) {
      this.#apiUsers.set(name, { user: Object.freeze({ name, groups: new Set(groups) }), password });
    }
    const { auth } = config;
    const algorithm = auth.privateKey ? 'ES256' : 'HS256';
    const signKey = auth.privateKey ?? auth.secret;
    const verifyKey = auth.publicKey ?? auth.secret;
    const common = { algorithm, key: signKey, iss: `herald/${config.userPath}` } as const;
    this.#sign = createSigner({ ...common, expiresIn: auth.tokenTtlSeconds * 1000 });
    this.#signRefresh = createSigner({ ...common, expiresIn: auth.refreshTtlSeconds * 1000 });
    // Every token this node signs has both: one without either was not signed by a node of this fleet's config.
    const requiredClaims = ['iss', 'exp'];
    this.#verify = createVerifier({ key: verifyKey, algorithms: [algorithm], allowedIss: `herald/${config.userPath}`, requiredClaims });
  }

  async issue(request: TokenRequest): Promise<TokenGrant> {
    if (request.kind === 'AM') return this.#grant(this.#checkApiUser(request.u, request.p));
    if (request.kind === 'AM_DB') return this.#grant(await this.#checkPerson(request.credentials));
    const claims = this.#claims(request.refreshToken, 'refresh');
    const { issuedAt } = timesOf(claims);
    if (claims.for === 'person') this.#refusePersonRevoked(personKeyOf(claims.gen ?? '', claims.sub), issuedAt);
    else this.#refuseApiUserRevoked(claims.sub, issuedAt);
    return this.#grant({ ...claims, typ: claims.for ?? 'api' });
  }

  verifyApiUser(token: string): ApiUser {
    return this.verifyApiToken(token).user;
  }

  verifyPerson(token: string): Person {
    return this.verifyPersonToken(token).person;
  }

  verifyApiToken(token: string): VerifiedApiToken {
    const now = Date.now();
    let verified = this.#verifiedApiTokens.get(token, now);
    if (verified === undefined) {
      const claims = this.#claims(token, 'api');
      const known = this.#apiUsers.get(claims.sub);
      if (!known) throw new GatewayError('TOKEN_INVALID', `API user ${claims.sub} no longer exists`);
      verified = { user: known.user, ...timesOf(claims) };
      this.#verifiedApiTokens.set(token, verified, now, claims.exp);
    }
    this.#refuseApiUserRevoked(verified.user.name, verified.issuedAt);
    return verified;
  }

  verifyPersonToken(token: string): VerifiedPersonToken {
    const now = Date.now();
    let verified = this.#verifiedPersons.get(token, now);
    if (verified === undefined) {
      const claims = this.#claims(token, 'person');
      const generator = claims.gen ?? '';
      const person: Person = { generator, id: claims.sub, key: personKeyOf(generator, claims.sub), fields: claims.usr ?? {} };
      verified = { person, ...timesOf(claims) };
      this.#verifiedPersons.set(token, verified, now, claims.exp);
    }
    this.#refusePersonRevoked(verified.person.key, verified.issuedAt);
    return verified;
  }

  #refuseApiUserRevoked(name: string, issuedAt: number): void {
    const revocations = this.#revocations;
    if (revocations !== undefined) refuseRevoked(revocations.apiUserRevokedAt(name), issuedAt, `API user ${name}`);
  }

  #refusePersonRevoked(key: string, issuedAt: number): void {
    const revocations = this.#revocations;
    if (revocations !== undefined) refuseRevoked(revocations.personRevokedAt(key), issuedAt, `person ${key}`);
  }

  #grant(claims: Claims): TokenGrant {
    const { typ, sub, gen, usr } = claims;
    const body: Claims = gen === undefined ? { typ, sub } : { typ, sub, gen, usr: usr ?? {} };
    return {
      token: this.#sign(body),
      refresh_token: this.#signRefresh({ ...body, typ: 'refresh', for: typ as TokenKind }),
      expires_in: this.#config.auth.tokenTtlSeconds,
    };
  }

  #claims(token: string, typ: Claims['typ']): Claims {
    let claims: Claims;
    try {
      claims = this.#verify(token);
    } catch (error) {
      if (error instanceof TokenError && error.code === TokenError.codes.expired) {
        throw new GatewayError('TOKEN_EXPIRED', 'the token has expired');
      }
      if (error instanceof TokenError && CLAIM_ERRORS.has(error.code)) {
        throw new GatewayError('TOKEN_INVALID', `the token is not this node's: ${error.message}`);
      }
      throw new GatewayError('TOKEN_INVALID', 'the token is malformed or its signature does not match');
    }
    if (claims.typ !== typ) throw new GatewayError('TOKEN_INVALID', `expected a ${typ} token, got a ${claims.typ} token`);
    return claims;
  }

  #checkApiUser(u: string, p: string): Claims {
    const known = this.#apiUsers.get(u);
    if (!known || !sameSecret(p, known.password)) {
      throw new GatewayError('BAD_CREDENTIALS', 'unknown API user or wrong password');
    }
    return { typ: 'api', sub: u };
  }

  async #checkPerson(credentials: PersonCredentials): Promise<Claims> {
    const [name, generator] = this.#generatorFor(credentials);
    const source = this.#dataSources.get(generator.instance);
    if (!source) throw new GatewayError('INTERNAL', `no data source for instance ${generator.instance}`);
    const [row] = await source.getAll({
      database: generator.database,
      collection: generator.collection,
      find: { [generator.usernameColumn]: credentials.u },
      limit: 1,
    });
    const stored = row?.[generator.passwordColumn];
    const check = await this.#passwords.check(credentials.p, stored, this.#decoys.get(name) ?? DECOY_HASH).catch((error: unknown) => {
      this.#observer?.personLogin(name, 'busy');
      throw error;
    });
    if (check !== 'not_hashed') this.#decoys.set(name, stored as string);
    const result: PersonLoginResult = !row ? 'unknown_person' : check === 'ok' ? 'ok' : check === 'wrong' ? 'wrong_password' : 'not_hashed';
    this.#observer?.personLogin(name, result);
    if (result === 'not_hashed' && !this.#notHashedTold.has(name)) {
      this.#notHashedTold.add(name);
      this.#observer?.passwordNotHashed(name, generator.passwordColumn);
    }
    if (result !== 'ok') throw new GatewayError('BAD_CREDENTIALS', 'unknown person or wrong password');
    const usr = Object.fromEntries(generator.select.map((column) => [column, row?.[column]]));
    return { typ: 'person', sub: credentials.u, gen: name, usr };
  }

  /** Clients may only use a configured generator: naming it, or repeating its exact definition. */
  #generatorFor(credentials: PersonCredentials): [string, TokenGeneratorConfig] {
    const generators = Object.entries(this.#config.tokenGenerators);
    const found = credentials.generator
      ? generators.find(([name]) => name === credentials.generator)
      : generators.find(
          ([, g]) =>
            g.instance === credentials.instance &&
            g.database === credentials.database &&
            g.collection === credentials.collection &&
            g.usernameColumn === credentials.usernameColumn &&
            g.passwordColumn === credentials.passwordColumn,
        );
    if (!found) throw new GatewayError('NOT_FOUND', 'no token generator matches this request');
    return found;
  }
}

/** fast-jwt's refusals of a well-signed token whose claims are wrong: no iss or exp, another issuer, a claim of the wrong type. */
const CLAIM_ERRORS: ReadonlySet<string> = new Set([
  TokenError.codes.missingRequiredClaim,
  TokenError.codes.invalidClaimValue,
  TokenError.codes.invalidClaimType,
]);

/** Constant-time comparison, so a wrong password takes as long whatever its prefix. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}
