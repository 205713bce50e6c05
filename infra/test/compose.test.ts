/**
 * The deployment files, checked without a Docker engine: docker-compose.yml, the gateway's Dockerfile and
 * config, Traefik's static config, and the local fleet's HAProxy config (rendered by infra/local/cluster.sh
 * and checked by `haproxy -c`). What needs a tool that is absent is skipped with the reason.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { loadConfigFile } from '../../packages/gateway/src/config/load.ts';

const root = resolve(import.meta.dirname, '../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  container_name?: string;
  ports?: string[];
  volumes?: string[];
  environment?: Record<string, string>;
  labels?: string[] | Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  command?: string[];
  healthcheck?: { test: string[] };
}

const compose = parse(read('docker-compose.yml')) as { services: Record<string, Service> };
const services = compose.services;

function service(name: string): Service {
  const found = services[name];
  assert.ok(found, `docker-compose.yml has no service ${name}`);
  return found;
}

/** Labels as a map, whichever of the two compose forms (list of k=v, or mapping) is used. */
function labels(svc: Service): Record<string, string> {
  if (!Array.isArray(svc.labels)) return svc.labels ?? {};
  return Object.fromEntries(
    svc.labels.map((label) => {
      const at = label.indexOf('=');
      return [label.slice(0, at), label.slice(at + 1)];
    }),
  );
}

/** Where a program is, or undefined: PATH first, then where Debian puts it. */
function which(program: string, ...extra: string[]): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), ...extra];
  return dirs.map((dir) => join(dir, program)).find((path) => existsSync(path));
}

test('docker-compose.yml has redis, mongodb, traefik and gateway', () => {
  for (const name of ['redis', 'mongodb', 'traefik', 'gateway']) service(name);
  assert.match(service('redis').image ?? '', /^redis:7/);
  assert.deepEqual(service('redis').command, ['redis-server', '--save', '', '--appendonly', 'no']);
  assert.match(service('mongodb').image ?? '', /^mongo:7/);
  assert.ok(service('mongodb').healthcheck, 'mongodb has a healthcheck');
  assert.match(service('traefik').image ?? '', /^traefik:v3\./);
});

test('the gateway service scales: no container_name, no published port', () => {
  const gateway = service('gateway');
  assert.equal(gateway.container_name, undefined);
  assert.equal(gateway.ports, undefined);
  assert.deepEqual(gateway.build, { context: '.', dockerfile: 'infra/docker/Dockerfile' });
});

test('the gateway is routed by Traefik labels, checked on /readyz', () => {
  const l = labels(service('gateway'));
  assert.equal(l['traefik.enable'], 'true');
  const routers = Object.keys(l).filter((k) => /^traefik\.http\.routers\.[^.]+\.rule$/.test(k));
  assert.equal(routers.length, 1, 'one router');
  const router = routers[0]!.split('.')[3]!;
  assert.match(l[`traefik.http.routers.${router}.rule`]!, /PathPrefix\(`\/`\)/);
  assert.equal(l[`traefik.http.routers.${router}.entrypoints`], 'web');
  const svc = l[`traefik.http.routers.${router}.service`]!;
  assert.ok(svc, 'the router names its service');
  assert.equal(l[`traefik.http.services.${svc}.loadbalancer.server.port`], '38246');
  assert.equal(l[`traefik.http.services.${svc}.loadbalancer.healthcheck.path`], '/readyz');
  assert.equal(l[`traefik.http.services.${svc}.loadbalancer.healthcheck.interval`], '2s');
  assert.equal(
    Object.keys(l).filter((k) => k.includes('.sticky')).length,
    0,
    'no sticky sessions: any node serves any client',
  );
});

test('the gateway reaches Redis and MongoDB by service name and needs its secret from the environment', () => {
  const gateway = service('gateway');
  const env = gateway.environment ?? {};
  const redis = new URL(env.REDIS_URL ?? '');
  assert.equal(redis.protocol, 'redis:');
  assert.equal(redis.hostname, 'redis');
  assert.ok(services[redis.hostname], 'REDIS_URL names a service');
  const mongo = new URL(env.MONGODB_URL ?? '');
  assert.equal(mongo.protocol, 'mongodb:');
  assert.equal(mongo.hostname, 'mongodb');
  assert.ok(services[mongo.hostname], 'MONGODB_URL names a service');
  assert.match(env.HERALD_JWT_SECRET ?? '', /^\$\{HERALD_JWT_SECRET:\?.+\}$/, 'a required variable, no default');
  assert.equal(env.HERALD_CONFIG, '/app/infra/docker/config.yaml');
  assert.ok(
    gateway.volumes?.some((v) => v.endsWith(':/app/infra/docker/config.yaml:ro') && v.includes('./infra/docker/config.yaml')),
    'infra/docker/config.yaml is mounted read-only where HERALD_CONFIG points',
  );
  assert.deepEqual(gateway.depends_on, {
    redis: { condition: 'service_healthy' },
    mongodb: { condition: 'service_healthy' },
  });
});

test('traefik publishes 38246, reads the docker socket read-only, and loads infra/traefik/traefik.yml', () => {
  const traefik = service('traefik');
  assert.ok(traefik.ports?.includes('38246:38246'), 'publishes 38246');
  assert.ok(traefik.volumes?.includes('/var/run/docker.sock:/var/run/docker.sock:ro'), 'docker socket read-only');
  assert.ok(traefik.volumes?.includes('./infra/traefik/traefik.yml:/etc/traefik/traefik.yml:ro'));
  // The dashboard (insecure API) is published on loopback only.
  const dashboard = traefik.ports?.find((p) => p.endsWith(':8080'));
  assert.match(dashboard ?? '', /^127\.0\.0\.1:\d+:8080$/);
});

test('what docker-compose.yml mounts exists', () => {
  for (const svc of Object.values(services)) {
    for (const volume of svc.volumes ?? []) {
      const source = volume.split(':')[0]!.replace(/^\$\{HERALD_CONFIG_FILE:-(.*)\}$/, '$1');
      if (source.startsWith('./')) assert.ok(existsSync(join(root, source)), `${source} exists`);
    }
  }
});

test('infra/traefik/traefik.yml: web entry point on :38246, docker provider not exposing by default, ping', () => {
  const traefik = parse(read('infra/traefik/traefik.yml')) as {
    entryPoints: Record<string, { address: string; transport?: { respondingTimeouts?: Record<string, string> } }>;
    providers: { docker?: { exposedByDefault?: boolean } };
    ping?: unknown;
  };
  assert.equal(traefik.entryPoints.web?.address, ':38246');
  assert.equal(traefik.providers.docker?.exposedByDefault, false);
  assert.ok(traefik.ping !== undefined, 'ping is enabled (the traefik service healthcheck uses it)');
  // A finite read timeout could cut long-lived WebSocket connections.
  assert.equal(traefik.entryPoints.web?.transport?.respondingTimeouts?.readTimeout, '0s');
});

test('the Dockerfile: node:24-slim, every workspace manifest, non-root, EXPOSE 38246, CMD main.ts, HEALTHCHECK /readyz', () => {
  const dockerfile = read('infra/docker/Dockerfile');
  const lines = dockerfile.replace(/\\\n\s*/g, ' ').split('\n');
  assert.ok(lines.includes('FROM node:24-slim'));
  assert.ok(lines.includes('RUN pnpm install --frozen-lockfile --prod=false'));
  assert.ok(lines.some((line) => /^RUN npm install -g pnpm@12\.4\.2\b/.test(line)));
  for (const pkg of readdirSync(join(root, 'packages'))) {
    if (!existsSync(join(root, 'packages', pkg, 'package.json'))) continue;
    assert.ok(
      lines.includes(`COPY packages/${pkg}/package.json packages/${pkg}/`),
      `the Dockerfile copies packages/${pkg}/package.json before pnpm install`,
    );
  }
  const user = lines.filter((line) => line.startsWith('USER ')).at(-1);
  assert.ok(user && user !== 'USER root' && user !== 'USER 0', 'runs as a non-root user');
  assert.ok(lines.includes('EXPOSE 38246'));
  const cmd = lines.find((line) => line.startsWith('CMD '));
  // --no-node-snapshot: isolated-vm (can-connect code) asks for it on Node 20 and later; --max-semi-space-size:
  // a bounded young generation (docs/architecture.md).
  assert.deepEqual(JSON.parse(cmd!.slice(4)), ['node', '--no-node-snapshot', '--max-semi-space-size=16', 'packages/gateway/src/main.ts']);
  const healthcheck = lines.find((line) => line.startsWith('HEALTHCHECK '));
  assert.ok(healthcheck, 'has a HEALTHCHECK');
  const check = JSON.parse(healthcheck.slice(healthcheck.indexOf('CMD ') + 4)) as string[];
  assert.equal(check[0], 'node', 'uses node (node:24-slim has no curl)');
  assert.match(check.join(' '), /\/readyz/);
});

test('the Dockerfile HEALTHCHECK command answers 0 for 200 and 1 for 503 or nothing listening', async () => {
  const dockerfile = read('infra/docker/Dockerfile').replace(/\\\n\s*/g, ' ');
  const line = dockerfile.split('\n').find((l) => l.startsWith('HEALTHCHECK '))!;
  const [, flag, script] = JSON.parse(line.slice(line.indexOf('CMD ') + 4)) as [string, string, string];
  let status = 200;
  const server = createServer((request, response) => {
    response.statusCode = request.url === '/readyz' ? status : 404;
    response.end();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const port = (server.address() as { port: number }).port;
  // Run asynchronously: this process serves the check's request.
  const run = (env: Record<string, string>) =>
    new Promise<number | null>((done) => {
      const child = spawn(process.execPath, [flag, script], { env: { ...process.env, ...env }, stdio: 'ignore' });
      child.on('exit', (code) => done(code));
    });
  try {
    assert.equal(await run({ PORT: String(port) }), 0);
    status = 503;
    assert.equal(await run({ PORT: String(port) }), 1);
  } finally {
    await new Promise((done) => server.close(done));
  }
  assert.equal(await run({ PORT: String(port) }), 1, 'nothing listening');
});

test('infra/docker/config.yaml is valid, has no secret, and is refused in production', () => {
  const file = join(root, 'infra/docker/config.yaml');
  const raw = parse(read('infra/docker/config.yaml')) as { auth: Record<string, unknown> };
  assert.equal(raw.auth.secret, undefined, 'no auth.secret: HERALD_JWT_SECRET provides it');
  assert.throws(() => loadConfigFile(file, {}), /auth\.secret: set either secret/);
  const config = loadConfigFile(file, { secret: 'a-secret-of-sixteen-or-more', mongodbUrl: 'mongodb://mongodb:27017' });
  assert.equal(config.server.port, 38246);
  assert.equal(config.instances.mongodb?.url, 'mongodb://mongodb:27017');
  assert.throws(
    () => loadConfigFile(file, { secret: 'a-secret-of-sixteen-or-more', production: true }),
    /default secrets in: apiUsers\.bench\.password/,
  );
});

test('docker compose config accepts the file', (t) => {
  const version = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8', timeout: 10_000 });
  if (version.status !== 0) {
    t.skip('`docker compose` (the compose plugin) is not installed here');
    return;
  }
  const run = (env: Record<string, string | undefined>) =>
    spawnSync('docker', ['compose', '-f', 'docker-compose.yml', 'config', '--quiet'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, ...env },
    });
  const ok = run({ HERALD_JWT_SECRET: 'a-secret-of-sixteen-or-more' });
  assert.equal(ok.status, 0, ok.stderr);
  const missing = run({ HERALD_JWT_SECRET: '' });
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, /HERALD_JWT_SECRET/);
});

// --- the local fleet's HAProxy ------------------------------------------------------------------------

const cluster = join(root, 'infra/local/cluster.sh');

function render(env: Record<string, string>) {
  return spawnSync('bash', [cluster, 'render-haproxy'], {
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, PORT: '38246', N: '3', STATS_PORT: '38346', LB_CLIENTS: '60000', ...env },
  });
}

test('the HAProxy template renders: checks /readyz, leastconn, WebSocket timeouts, one server per node', () => {
  const out = render({ N: '4' });
  assert.equal(out.status, 0, out.stderr);
  const cfg = out.stdout;
  assert.doesNotMatch(cfg, /@@/, 'every placeholder filled');
  for (const line of [
    'mode http',
    'option httpchk GET /readyz',
    'http-check expect status 200',
    'default-server check inter 1s fall 1 rise 1',
    'balance leastconn',
    'timeout tunnel 1h',
    'timeout connect 5s',
    'bind 127.0.0.1:38246',
    'bind 127.0.0.1:38346',
  ]) {
    assert.ok(cfg.split('\n').some((l) => l.trim() === line), `has "${line}"`);
  }
  assert.match(cfg, /^\s*timeout client-fin \d+s$/m);
  assert.match(cfg, /^\s*timeout server-fin \d+s$/m);
  const servers = cfg.split('\n').filter((l) => l.trim().startsWith('server '));
  assert.deepEqual(
    servers.map((l) => l.trim()),
    [1, 2, 3, 4].map((i) => `server node-${i} 127.0.0.1:${38246 + i}`),
  );
  const maxconn = cfg.match(/^\s*maxconn (\d+)$/m);
  assert.ok(maxconn && Number(maxconn[1]) >= 100, 'a per-process maxconn derived from the open-file limit');
});

test('cluster.sh refuses bad parameters before doing anything', () => {
  const bad: Record<string, string>[] = [{ N: 'x' }, { N: '0' }, { PORT: '80' }, { N: '1+1' }];
  for (const env of bad) {
    const out = render(env);
    assert.notEqual(out.status, 0, JSON.stringify(env));
    assert.match(out.stderr, /^cluster: /);
  }
});

test('haproxy -c accepts the rendered config', (t) => {
  const haproxy = which('haproxy', '/usr/sbin');
  if (haproxy === undefined) {
    t.skip('haproxy is not installed (make haproxy installs it)');
    return;
  }
  const bin: string = haproxy;
  const dir = mkdtempSync(join(tmpdir(), 'herald-haproxy-'));
  try {
    for (const n of ['1', '3']) {
      const out = render({ N: n });
      assert.equal(out.status, 0, out.stderr);
      const file = join(dir, `haproxy-${n}.cfg`);
      writeFileSync(file, out.stdout);
      const checked = spawnSync(bin, ['-c', '-f', file], { encoding: 'utf8', timeout: 30_000 });
      assert.equal(checked.status, 0, `${checked.stdout}${checked.stderr}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('shellcheck is clean on infra/local/cluster.sh', (t) => {
  const shellcheck = which('shellcheck');
  if (!shellcheck) {
    t.skip('shellcheck is not installed');
    return;
  }
  const out = spawnSync(shellcheck, [cluster], { encoding: 'utf8', timeout: 60_000 });
  assert.equal(out.status, 0, out.stdout);
});
