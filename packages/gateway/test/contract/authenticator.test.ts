/** The Authenticator contract on JwtAuthenticator, signing with an HS256 secret and with an ES256 key pair. */
import { generateKeyPairSync } from 'node:crypto';
import { JwtAuthenticator } from '../../src/auth/jwt.ts';
import { parseConfig } from '../../src/config/load.ts';
import { MemoryDataSource } from '../../src/data/memory.ts';
import { API_USER, GENERATOR, PEOPLE, SetRevocations, authenticatorContract } from './authenticator.contract.ts';

type AuthKeys = { secret: string } | { privateKey: string; publicKey: string };

function jwtAuthenticator(keys: AuthKeys, revocations = new SetRevocations()): JwtAuthenticator {
  const { name, instance, database, collection, ...generator } = GENERATOR;
  const config = parseConfig(
    {
      userPath: 'contract',
      auth: keys,
      apiUsers: { [API_USER.name]: { password: API_USER.password, groups: [...API_USER.groups] } },
      instances: { [instance]: { databases: { [database]: { collections: { [collection]: {} } } } } },
      tokenGenerators: { [name]: { instance, database, collection, ...generator, select: [...generator.select] } },
      events: {},
    },
    import.meta.dirname,
  );
  const source = new MemoryDataSource({ [`${database}/${collection}`]: PEOPLE });
  return new JwtAuthenticator({ config, dataSources: new Map([[instance, source]]), revocations });
}

function es256Keys(): AuthKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return {
    privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKey: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}

authenticatorContract('JwtAuthenticator HS256', async () => {
  const revocations = new SetRevocations();
  return {
    authenticator: jwtAuthenticator({ secret: 'contract-secret-of-some-length' }, revocations),
    stranger: jwtAuthenticator({ secret: 'another-secret-of-some-length' }),
    revocations,
  };
});

const es256 = es256Keys();
authenticatorContract('JwtAuthenticator ES256', async () => {
  const revocations = new SetRevocations();
  return { authenticator: jwtAuthenticator(es256, revocations), stranger: jwtAuthenticator(es256Keys()), revocations };
});
