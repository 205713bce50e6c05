/**
 * The Authenticator contract on JwtAuthenticator, signing with an HS256 secret and with an ES256 key pair; and what
 * JwtAuthenticator tells its observer about logins.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { createSigner } from 'fast-jwt';
import { JwtAuthenticator, type AuthObserver, type PersonLoginResult } from '../../src/auth/jwt.ts';
import { parseConfig } from '../../src/config/load.ts';
import { MemoryDataSource } from '../../src/data/memory.ts';
import { API_USER, GENERATOR, PEOPLE, SetRevocations, authenticatorContract } from './authenticator.contract.ts';

type AuthKeys = { secret: string } | { privateKey: string; publicKey: string };

function jwtAuthenticator(keys: AuthKeys, revocations = new SetRevocations(), observer?: AuthObserver): JwtAuthenticator {
  const { name, instance, database, collection, ...generator } = GENERATOR;
  const config = parseConfig(
    {
      userPath: 'contract',
      auth: keys,
      apiUsers: { [API_USER.name]: { password: API_USER.password, groups: [...API_USER.groups] } },
      instances: { [instance]: { databases: { [database]: { collections: { [collection]: { access: { read: 'both', write: 'none' } } } } } } },
      tokenGenerators: { [name]: { instance, database, collection, ...generator, select: [...generator.select] } },
      events: {},
    },
    import.meta.dirname,
  );
  const source = new MemoryDataSource({ [`${database}/${collection}`]: PEOPLE });
  return new JwtAuthenticator({ config, dataSources: new Map([[instance, source]]), revocations, observer });
}

/** Signs claims exactly as given with the key of `keys`: fast-jwt adds no iss or exp unless told to. */
function forger(keys: AuthKeys) {
  return 'secret' in keys ? createSigner({ key: keys.secret }) : createSigner({ key: keys.privateKey, algorithm: 'ES256' });
}

function es256Keys(): AuthKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKey: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}

const hs256 = { secret: 'contract-secret-of-some-length' };
authenticatorContract('JwtAuthenticator HS256', async () => {
  const revocations = new SetRevocations();
  return {
    authenticator: jwtAuthenticator(hs256, revocations),
    stranger: jwtAuthenticator({ secret: 'another-secret-of-some-length' }),
    forge: forger(hs256),
    revocations,
  };
});

const es256 = es256Keys();
authenticatorContract('JwtAuthenticator ES256', async () => {
  const revocations = new SetRevocations();
  return { authenticator: jwtAuthenticator(es256, revocations), stranger: jwtAuthenticator(es256Keys()), forge: forger(es256), revocations };
});

test('JwtAuthenticator counts each login by result, and names a generator with a plain-text password once', async () => {
  const logins: PersonLoginResult[] = [];
  const notHashed: string[] = [];
  const authenticator = jwtAuthenticator(hs256, new SetRevocations(), {
    personLogin: (generator, result) => logins.push(result),
    passwordNotHashed: (generator, column) => notHashed.push(`${generator}.${column}`),
  });
  const login = (u: string, p: string) => authenticator.issue({ kind: 'AM_DB', credentials: { generator: GENERATOR.name, u, p } }).catch(() => undefined);
  await login('NICK', 'WAHLBERG');
  await login('NICK', 'nope');
  await login('NOBODY', 'x');
  await login('PLAIN', 'STORED-AS-TEXT');
  await login('PLAIN', 'STORED-AS-TEXT');
  assert.deepEqual(logins, ['ok', 'wrong_password', 'unknown_person', 'not_hashed', 'not_hashed']);
  assert.deepEqual(notHashed, [`${GENERATOR.name}.${GENERATOR.passwordColumn}`]);
});
