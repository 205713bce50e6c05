/**
 * The Authenticator contract. An implementation under test must know the API user and token generator below,
 * over a data source holding PEOPLE; `stranger` knows the same but signs with a different key, and `forge` signs
 * any claims with the implementation's own key (what a leaked key, or a token of another fleet, would give).
 * Expiry is checked on node:test's mocked Date, which the JWT library reads for both signing and verifying.
 */
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { ErrorCode } from '@herald/protocol';
import type { Authenticator, PersonCredentials, RevocationList } from '../../src/auth/authenticator.ts';
import { hashPassword } from '../../src/auth/password.ts';
import type { Row } from '../../src/data/data-source.ts';
import { GatewayError } from '../../src/errors.ts';

export const API_USER = { name: 'app', password: 'app-password', groups: ['orders', 'ops'] } as const;

export const GENERATOR = {
  name: 'customers',
  instance: 'shop',
  database: 'crm',
  collection: 'customers',
  usernameColumn: 'first_name',
  passwordColumn: 'password_hash',
  select: ['customer_id', 'country'],
} as const;

/** A cheap cost: the contract is about what is compared, not how hard it is to guess. */
const hashed = (password: string) => hashPassword(password, { ln: 10, r: 8, p: 1 });

export const PEOPLE: Row[] = [
  { customer_id: 1, first_name: 'PENELOPE', password_hash: await hashed('GUINESS'), country: 'India', phone: 1123456788 },
  { customer_id: 2, first_name: 'NICK', password_hash: await hashed('WAHLBERG'), country: 'India', phone: 1123456789 },
  { customer_id: 3, first_name: 'ED', password_hash: await hashed('CHASE'), country: 'Peru', phone: 1123456790 },
  // Stored before passwords were hashed: the text itself must not log anyone in.
  { customer_id: 4, first_name: 'PLAIN', password_hash: 'STORED-AS-TEXT', country: 'India', phone: 1123456791 },
];

/** Revocations a test sets by hand; the authenticator under test must read these. */
export class SetRevocations implements RevocationList {
  readonly apiUsers = new Map<string, number>();
  readonly persons = new Map<string, number>();

  apiUserRevokedAt(name: string): number | undefined {
    return this.apiUsers.get(name);
  }

  personRevokedAt(key: string): number | undefined {
    return this.persons.get(key);
  }
}

export interface AuthenticatorFixture {
  authenticator: Authenticator;
  stranger: Authenticator;
  /** What `authenticator` checks tokens against. */
  revocations: SetRevocations;
  /** Signs `claims` as they are (no iss or exp added) with the authenticator's own key. */
  forge: (claims: Record<string, unknown>) => string;
}

const rejectsWith = (code: ErrorCode) => (error: unknown) => {
  assert.ok(error instanceof GatewayError, `expected a GatewayError, got ${String(error)}`);
  assert.equal(error.code, code);
  return true;
};

/** Flip one character in the middle of the signature (the last one may only carry padding bits). */
function tamper(token: string): string {
  const at = token.lastIndexOf('.') + 10;
  const flipped = token[at] === 'A' ? 'B' : 'A';
  return token.slice(0, at) + flipped + token.slice(at + 1);
}

export function authenticatorContract(name: string, make: () => Promise<AuthenticatorFixture>): void {
  describe(`Authenticator contract: ${name}`, () => {
    const nick: PersonCredentials = { generator: GENERATOR.name, u: 'NICK', p: 'WAHLBERG' };
    const am = { kind: 'AM', u: API_USER.name, p: API_USER.password } as const;

    it('AM with good credentials grants a token, a refresh token and its lifetime', async () => {
      const { authenticator } = await make();
      const grant = await authenticator.issue(am);
      assert.equal(typeof grant.token, 'string');
      assert.equal(typeof grant.refresh_token, 'string');
      assert.notEqual(grant.token, grant.refresh_token);
      assert.ok(Number.isInteger(grant.expires_in) && grant.expires_in > 0);
    });

    it('AM with a wrong password or an unknown user is BAD_CREDENTIALS', async () => {
      const { authenticator } = await make();
      await assert.rejects(authenticator.issue({ ...am, p: 'wrong' }), rejectsWith('BAD_CREDENTIALS'));
      await assert.rejects(authenticator.issue({ ...am, p: '' }), rejectsWith('BAD_CREDENTIALS'));
      await assert.rejects(authenticator.issue({ ...am, u: 'nobody' }), rejectsWith('BAD_CREDENTIALS'));
    });

    it('an API user token verifies to its name and groups', async () => {
      const { authenticator } = await make();
      const user = authenticator.verifyApiUser((await authenticator.issue(am)).token);
      assert.equal(user.name, API_USER.name);
      assert.deepEqual([...user.groups].sort(), [...API_USER.groups].sort());
    });

    it('AM_DB naming a generator grants a person token carrying exactly the selected columns', async () => {
      const { authenticator } = await make();
      const person = authenticator.verifyPerson((await authenticator.issue({ kind: 'AM_DB', credentials: nick })).token);
      assert.equal(person.generator, GENERATOR.name);
      assert.deepEqual(person.fields, { customer_id: 2, country: 'India' });
    });

    it('AM_DB spelling out a generator in full works like naming it', async () => {
      const { authenticator } = await make();
      const { instance, database, collection, usernameColumn, passwordColumn } = GENERATOR;
      const credentials = { instance, database, collection, usernameColumn, passwordColumn, u: 'ED', p: 'CHASE' };
      const person = authenticator.verifyPerson((await authenticator.issue({ kind: 'AM_DB', credentials })).token);
      assert.equal(person.generator, GENERATOR.name);
      assert.deepEqual(person.fields, { customer_id: 3, country: 'Peru' });
    });

    it('AM_DB matching no generator is NOT_FOUND', async () => {
      const { authenticator } = await make();
      const { instance, database, collection, usernameColumn } = GENERATOR;
      const spelled = { instance, database, collection, usernameColumn, passwordColumn: 'phone', u: 'NICK', p: '1123456789' };
      await assert.rejects(authenticator.issue({ kind: 'AM_DB', credentials: spelled }), rejectsWith('NOT_FOUND'));
      const named = { ...nick, generator: 'no-such-generator' };
      await assert.rejects(authenticator.issue({ kind: 'AM_DB', credentials: named }), rejectsWith('NOT_FOUND'));
    });

    it('AM_DB with a wrong password or an unknown person is BAD_CREDENTIALS', async () => {
      const { authenticator } = await make();
      const wrong = { ...nick, p: 'CHASE' };
      await assert.rejects(authenticator.issue({ kind: 'AM_DB', credentials: wrong }), rejectsWith('BAD_CREDENTIALS'));
      const unknown = { ...nick, u: 'NOBODY' };
      await assert.rejects(authenticator.issue({ kind: 'AM_DB', credentials: unknown }), rejectsWith('BAD_CREDENTIALS'));
    });

    it('a password stored as plain text logs nobody in, even given that very text', async () => {
      const { authenticator } = await make();
      const plain = { ...nick, u: 'PLAIN', p: 'STORED-AS-TEXT' };
      await assert.rejects(authenticator.issue({ kind: 'AM_DB', credentials: plain }), rejectsWith('BAD_CREDENTIALS'));
    });

    it('a token signed with the right key but lacking iss or exp, or from another issuer, is TOKEN_INVALID', async () => {
      const { authenticator, forge } = await make();
      const now = Math.floor(Date.now() / 1000);
      const { token } = await authenticator.issue(am);
      const own = authenticator.verifyApiUser(token);
      const { iss } = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as { iss: string };
      assert.equal(authenticator.verifyApiUser(forge({ typ: 'api', sub: API_USER.name, iss, exp: now + 60 })), own);
      const refused = [
        { typ: 'api', sub: API_USER.name, exp: now + 60 },
        { typ: 'api', sub: API_USER.name, iss },
        { typ: 'api', sub: API_USER.name, iss: `${iss}-other`, exp: now + 60 },
        { typ: 'api', sub: API_USER.name, iss: [iss], exp: now + 60 },
      ];
      for (const claims of refused) assert.throws(() => authenticator.verifyApiUser(forge(claims)), rejectsWith('TOKEN_INVALID'), JSON.stringify(claims));
      const person = { typ: 'person', sub: 'NICK', gen: GENERATOR.name, usr: { customer_id: 2 } };
      assert.throws(() => authenticator.verifyPerson(forge({ ...person, iss })), rejectsWith('TOKEN_INVALID'));
      assert.throws(() => authenticator.verifyPerson(forge({ ...person, exp: now + 60 })), rejectsWith('TOKEN_INVALID'));
      const refresh = forge({ typ: 'refresh', for: 'api', sub: API_USER.name, iss });
      await assert.rejects(authenticator.issue({ kind: 'REFRESH', refreshToken: refresh }), rejectsWith('TOKEN_INVALID'));
    });

    it('a token of one kind is TOKEN_INVALID as the other', async () => {
      const { authenticator } = await make();
      const api = await authenticator.issue(am);
      const person = await authenticator.issue({ kind: 'AM_DB', credentials: nick });
      assert.throws(() => authenticator.verifyApiUser(person.token), rejectsWith('TOKEN_INVALID'));
      assert.throws(() => authenticator.verifyPerson(api.token), rejectsWith('TOKEN_INVALID'));
    });

    it('a refresh token is not an access token, and an access token does not refresh', async () => {
      const { authenticator } = await make();
      const api = await authenticator.issue(am);
      const person = await authenticator.issue({ kind: 'AM_DB', credentials: nick });
      assert.throws(() => authenticator.verifyApiUser(api.refresh_token), rejectsWith('TOKEN_INVALID'));
      assert.throws(() => authenticator.verifyPerson(person.refresh_token), rejectsWith('TOKEN_INVALID'));
      await assert.rejects(authenticator.issue({ kind: 'REFRESH', refreshToken: api.token }), rejectsWith('TOKEN_INVALID'));
    });

    it('a tampered token, garbage, or a token signed with another key is TOKEN_INVALID', async () => {
      const { authenticator, stranger } = await make();
      const api = await authenticator.issue(am);
      const person = await authenticator.issue({ kind: 'AM_DB', credentials: nick });
      assert.throws(() => authenticator.verifyApiUser(tamper(api.token)), rejectsWith('TOKEN_INVALID'));
      assert.throws(() => authenticator.verifyPerson(tamper(person.token)), rejectsWith('TOKEN_INVALID'));
      for (const garbage of ['garbage', '', 'a.b.c', `${api.token}x`]) {
        assert.throws(() => authenticator.verifyApiUser(garbage), rejectsWith('TOKEN_INVALID'));
      }
      const foreign = await stranger.issue(am);
      assert.throws(() => authenticator.verifyApiUser(foreign.token), rejectsWith('TOKEN_INVALID'));
      const refresh = { kind: 'REFRESH', refreshToken: foreign.refresh_token } as const;
      await assert.rejects(authenticator.issue(refresh), rejectsWith('TOKEN_INVALID'));
    });

    it('an expired token is TOKEN_EXPIRED, and its refresh token grants a fresh one of the same kind', async (t: TestContext) => {
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      const { authenticator } = await make();
      const api = await authenticator.issue(am);
      const person = await authenticator.issue({ kind: 'AM_DB', credentials: nick });
      // A verified token may be kept: expiry must still win.
      authenticator.verifyApiUser(api.token);
      authenticator.verifyPerson(person.token);
      t.mock.timers.tick((api.expires_in + 1) * 1000);
      assert.throws(() => authenticator.verifyApiUser(api.token), rejectsWith('TOKEN_EXPIRED'));
      assert.throws(() => authenticator.verifyPerson(person.token), rejectsWith('TOKEN_EXPIRED'));

      const renewedApi = await authenticator.issue({ kind: 'REFRESH', refreshToken: api.refresh_token });
      assert.equal(authenticator.verifyApiUser(renewedApi.token).name, API_USER.name);
      assert.throws(() => authenticator.verifyPerson(renewedApi.token), rejectsWith('TOKEN_INVALID'));
      const renewedPerson = await authenticator.issue({ kind: 'REFRESH', refreshToken: person.refresh_token });
      assert.deepEqual(authenticator.verifyPerson(renewedPerson.token), {
        generator: GENERATOR.name,
        id: 'NICK',
        key: `${GENERATOR.name}:NICK`,
        fields: { customer_id: 2, country: 'India' },
      });
      assert.throws(() => authenticator.verifyApiUser(renewedPerson.token), rejectsWith('TOKEN_INVALID'));
    });

    it('a verified token says who, when it was issued and when it expires (ms, to the second)', async () => {
      const { authenticator } = await make();
      const before = Math.floor(Date.now() / 1000) * 1000;
      const api = await authenticator.issue(am);
      const person = await authenticator.issue({ kind: 'AM_DB', credentials: nick });
      const after = Date.now();
      const verifiedApi = authenticator.verifyApiToken(api.token);
      assert.equal(verifiedApi.user.name, API_USER.name);
      const verifiedPerson = authenticator.verifyPersonToken(person.token);
      assert.deepEqual(verifiedPerson.person, { generator: GENERATOR.name, id: 'NICK', key: `${GENERATOR.name}:NICK`, fields: { customer_id: 2, country: 'India' } });
      for (const [verified, grant] of [[verifiedApi, api], [verifiedPerson, person]] as const) {
        assert.ok(verified.issuedAt >= before && verified.issuedAt <= after, `issued at ${verified.issuedAt}`);
        assert.equal(verified.issuedAt % 1000, 0);
        assert.equal(verified.expiresAt, verified.issuedAt + grant.expires_in * 1000);
      }
      assert.equal(authenticator.verifyApiToken(api.token), verifiedApi, 'one object per token while it is kept');
    });

    it('tokens issued at or before their subject was revoked are TOKEN_REVOKED everywhere; later ones pass', async (t: TestContext) => {
      t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
      const { authenticator, revocations } = await make();
      const api = await authenticator.issue(am);
      const person = await authenticator.issue({ kind: 'AM_DB', credentials: nick });
      const ed = await authenticator.issue({ kind: 'AM_DB', credentials: { ...nick, u: 'ED', p: 'CHASE' } });
      authenticator.verifyApiToken(api.token); // kept: revocation must still win
      revocations.persons.set(`${GENERATOR.name}:NICK`, Date.now());
      assert.throws(() => authenticator.verifyPerson(person.token), rejectsWith('TOKEN_REVOKED'));
      assert.throws(() => authenticator.verifyPersonToken(person.token), rejectsWith('TOKEN_REVOKED'));
      await assert.rejects(authenticator.issue({ kind: 'REFRESH', refreshToken: person.refresh_token }), rejectsWith('TOKEN_REVOKED'));
      assert.equal(authenticator.verifyPerson(ed.token).id, 'ED', 'another person is not touched');
      revocations.apiUsers.set(API_USER.name, Date.now());
      assert.throws(() => authenticator.verifyApiUser(api.token), rejectsWith('TOKEN_REVOKED'));
      assert.throws(() => authenticator.verifyApiToken(api.token), rejectsWith('TOKEN_REVOKED'));
      await assert.rejects(authenticator.issue({ kind: 'REFRESH', refreshToken: api.refresh_token }), rejectsWith('TOKEN_REVOKED'));
      // iat has whole seconds: a token of the next second is after the revocation.
      t.mock.timers.tick(1000);
      assert.equal(authenticator.verifyApiUser((await authenticator.issue(am)).token).name, API_USER.name);
      assert.equal(authenticator.verifyPerson((await authenticator.issue({ kind: 'AM_DB', credentials: nick })).token).id, 'NICK');
    });
  });
}
