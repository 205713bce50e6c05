/**
 * Secrets in docker-compose.yml: files, never values; each secret made by infra/docker/init-secrets.sh (run here for
 * real, openssl included), handed to the services that read it, read where they read it (the gateway's *_FILE
 * variables, MongoDB's init and health scripts, Grafana's __FILE); kept out of the image. And infra/docker/rollout.sh
 * against a stand-in `docker` that records what it is asked (no Docker engine here: the script's order of steps is
 * what is checked, not Docker).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { compose, composeGatewayConfig, read, root, service, withDefaults } from './support.ts';

const SECRETS_DIR = './infra/docker/secrets';
const RUN_SECRETS = '/run/secrets/';

/** Environment variables that carry a secret by name. */
const SECRET_NAME = /PASSWORD|SECRET|TOKEN|PRIVATE|CREDENTIAL/i;

describe('secrets in docker-compose.yml', () => {
  test('every top-level secret is a file in the secrets directory, and used by some service', () => {
    const used = new Set(Object.values(compose.services).flatMap((svc) => svc.secrets ?? []));
    for (const [name, { file }] of Object.entries(compose.secrets)) {
      assert.equal(withDefaults(file), `${SECRETS_DIR}/${name}`, name);
      assert.ok(used.has(name), `${name} is handed to a service`);
    }
    for (const [name, svc] of Object.entries(compose.services)) {
      for (const secret of svc.secrets ?? []) assert.ok(compose.secrets[secret], `${name}: secret ${secret} is defined`);
    }
  });

  test('no secret value in the YAML: secret variables are *_FILE paths to a secret the service is given', () => {
    for (const [name, svc] of Object.entries(compose.services)) {
      for (const [key, value] of Object.entries(svc.environment ?? {})) {
        if (/_FILE$/.test(key)) {
          assert.ok(value.startsWith(RUN_SECRETS), `${name}: ${key} points into ${RUN_SECRETS}`);
          assert.ok(svc.secrets?.includes(value.slice(RUN_SECRETS.length)), `${name}: ${key} names a secret it is given`);
          continue;
        }
        assert.doesNotMatch(key, SECRET_NAME, `${name}: ${key} holds a secret in the YAML; use ${key}_FILE`);
        // A URL with a password in it is a secret too.
        if (/^\w+:\/\//.test(value)) assert.equal(new URL(value).password, '', `${name}: ${key} has a password`);
      }
    }
    const yaml = read('docker-compose.yml').replace(/^\s*#.*$/gm, '');
    assert.doesNotMatch(yaml, /password:[ \t]+\S|:\/\/[^/\s:@]+:[^@\s]+@/i, 'no password anywhere in the file');
  });

  test('the gateway reads its JWT secret and MongoDB URL from files, as main.ts supports', () => {
    const env = service('gateway').environment!;
    assert.equal(env.HERALD_JWT_SECRET_FILE, `${RUN_SECRETS}jwt_secret`);
    assert.equal(env.MONGODB_URL_FILE, `${RUN_SECRETS}mongodb_url`);
    assert.equal(env.HERALD_JWT_SECRET, undefined);
    assert.equal(env.MONGODB_URL, undefined);
    const main = read('packages/gateway/src/main.ts');
    for (const name of ['HERALD_JWT_SECRET', 'MONGODB_URL', 'REDIS_URL']) assert.ok(main.includes(`secretFromEnv('${name}')`), name);
  });

  test('MongoDB: root from a secret file; the init script makes the app user readWrite on the gateway\'s database', () => {
    const mongodb = service('mongodb');
    assert.equal(mongodb.environment?.MONGO_INITDB_ROOT_PASSWORD_FILE, `${RUN_SECRETS}mongodb_root_password`);
    const init = read('infra/docker/mongo-init/seed-customers.js');
    const health = read('infra/docker/mongo-health.js');
    for (const script of [init, health]) {
      for (const [, secret] of script.matchAll(/\/run\/secrets\/(\w+)/g)) {
        assert.ok(mongodb.secrets?.includes(secret!), `mongodb is given ${secret}`);
      }
    }
    const database = Object.keys(composeGatewayConfig().instances.mongodb!.databases);
    assert.deepEqual(database, ['am_bench']);
    assert.match(init, /createUser\(\{ user: 'herald', pwd: appPassword, roles: \[\{ role: 'readWrite', db: 'am_bench' \}\] \}\)/);
    assert.deepEqual(mongodb.healthcheck?.test?.slice(-2), ['--file', '/herald/mongo-health.js']);
  });

  test('Grafana\'s admin password from a file (GF_*__FILE)', () => {
    assert.equal(service('grafana').environment?.GF_SECURITY_ADMIN_PASSWORD__FILE, `${RUN_SECRETS}grafana_admin_password`);
  });

  test('.dockerignore keeps the secrets and certificates out of the image\'s build context', () => {
    const ignored = read('.dockerignore').split('\n');
    for (const path of ['infra/docker/secrets', 'infra/traefik']) assert.ok(ignored.includes(path), path);
    const gitignore = read('.gitignore').split('\n');
    for (const path of ['infra/docker/secrets/', 'infra/traefik/certs/']) assert.ok(gitignore.includes(path), path);
  });
});

describe('infra/docker/init-secrets.sh', () => {
  let dir: string;
  const env = () => ({ ...process.env, HERALD_SECRETS_DIR: join(dir, 'secrets'), HERALD_CERTS_DIR: join(dir, 'certs') });
  const run = () => spawnSync('bash', [join(root, 'infra/docker/init-secrets.sh')], { env: env(), encoding: 'utf8' });
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-secrets-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('writes every secret docker-compose.yml names, the MongoDB URL from the app password, and a certificate for localhost', () => {
    const out = run();
    assert.equal(out.status, 0, out.stderr);
    const secrets = join(dir, 'secrets');
    assert.deepEqual(readdirSync(secrets).sort(), Object.keys(compose.secrets).sort());
    const secret = (name: string) => readFileSync(join(secrets, name), 'utf8');
    assert.ok(secret('jwt_secret').length >= 32, 'the JWT secret passes the schema (16 or more)');
    const url = new URL(secret('mongodb_url'));
    assert.deepEqual([url.username, url.password, url.hostname, url.pathname], ['herald', secret('mongodb_app_password'), 'mongodb', '/am_bench']);
    assert.equal(url.searchParams.get('authSource'), 'am_bench');
    assert.ok(compose.services[url.hostname], 'the URL names the mongodb service');
    assert.equal(statSync(secrets).mode & 0o777, 0o700);
    for (const name of readdirSync(secrets)) assert.equal(statSync(join(secrets, name)).mode & 0o777, 0o644, name);
    const san = spawnSync('openssl', ['x509', '-in', join(dir, 'certs/herald.crt'), '-noout', '-ext', 'subjectAltName'], { encoding: 'utf8' });
    assert.match(san.stdout, /DNS:localhost/);
    assert.match(san.stdout, /IP Address:127\.0\.0\.1/);
    assert.equal(statSync(join(dir, 'certs/herald.key')).mode & 0o777, 0o600);
  });

  test('keeps what exists: a second run changes nothing', () => {
    const before = readdirSync(join(dir, 'secrets')).map((name) => readFileSync(join(dir, 'secrets', name), 'utf8'));
    const out = run();
    assert.equal(out.status, 0, out.stderr);
    assert.doesNotMatch(out.stdout, /^created/m);
    assert.deepEqual(readdirSync(join(dir, 'secrets')).map((name) => readFileSync(join(dir, 'secrets', name), 'utf8')), before);
  });
});

describe('infra/docker/rollout.sh, with a stand-in docker', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-rollout-'));
    // Containers in a state file (id health); every call logged. New containers are `starting` at their first
    // inspect, then `healthy`, or stay `starting` with UNHEALTHY=1.
    const fake = `#!/usr/bin/env bash
set -euo pipefail
state=${dir}/state log=${dir}/log
echo "$*" >>"$log"
if [[ $1 == compose ]]; then
  shift
  case $1 in
    ps) cut -d' ' -f1 "$state" ;;
    build) ;;
    up) want=\${*: -2:1}; want=\${want#*=}; have=$(wc -l <"$state")
        for ((i = have; i < want; i++)); do echo "new$RANDOM$i new" >>"$state"; done ;;
  esac
  exit 0
fi
case $1 in
  inspect) id=\${*: -1}; h=$(grep "^$id " "$state" | cut -d' ' -f2)
    if [[ $h == new ]]; then sed -i "s/^$id new$/$id starting/" "$state"; echo starting
    elif [[ $h == starting && \${UNHEALTHY:-} != 1 ]]; then sed -i "s/^$id starting$/$id healthy/" "$state"; echo healthy
    else echo "$h"; fi ;;
  stop) ;;
  rm) shift; for id in "$@"; do sed -i "/^$id /d" "$state"; done ;;
esac
`;
    writeFileSync(join(dir, 'docker'), fake);
    chmodSync(join(dir, 'docker'), 0o755);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const rollout = (env: Record<string, string> = {}) => {
    writeFileSync(join(dir, 'state'), 'old1 healthy\nold2 healthy\n');
    writeFileSync(join(dir, 'log'), '');
    const out = spawnSync('bash', [join(root, 'infra/docker/rollout.sh')], {
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, ...env },
      encoding: 'utf8',
    });
    const calls = readFileSync(join(dir, 'log'), 'utf8').trim().split('\n');
    const left = readFileSync(join(dir, 'state'), 'utf8').trim().split('\n').map((line) => line.split(' ')[0]!);
    return { out, calls, left };
  };

  test('starts N new beside N old, waits for them to be healthy, then stops the old one at a time, and keeps N', () => {
    const { out, calls, left } = rollout();
    assert.equal(out.status, 0, out.stderr);
    const steps = calls.filter((call) => !call.startsWith('inspect') && call !== 'compose ps -q gateway');
    assert.deepEqual(steps, [
      'compose build gateway',
      'compose up -d --no-deps --no-recreate --scale gateway=4 gateway',
      'stop old1',
      'rm old1',
      'stop old2',
      'rm old2',
      'compose up -d --no-deps --no-recreate --scale gateway=2 gateway',
    ]);
    const lastInspect = calls.findLastIndex((call) => call.startsWith('inspect'));
    assert.ok(lastInspect < calls.indexOf('stop old1'), 'no old container stopped before every new one is healthy');
    assert.equal(left.length, 2);
    assert.ok(left.every((id) => id.startsWith('new')), 'the new ones remain');
  });

  test('a new container that does not become healthy: the new ones go, the old ones were never stopped', () => {
    const { out, calls, left } = rollout({ UNHEALTHY: '1', HEALTH_TIMEOUT: '1', NO_BUILD: '1' });
    assert.equal(out.status, 1);
    assert.match(out.stderr, /is not healthy after 1 s/);
    assert.ok(!calls.includes('compose build gateway'), 'NO_BUILD=1');
    assert.ok(!calls.some((call) => /^stop old/.test(call)), 'the old ones keep serving');
    assert.deepEqual(left, ['old1', 'old2']);
  });
});
