/**
 * The deployment files, checked without a Docker engine: docker-compose.yml (services, networks, what is published,
 * Traefik's routing, limits, restart, drain), the gateway's Dockerfile and config, Traefik's static and dynamic
 * config, and the local fleet's HAProxy config (rendered by infra/local/cluster.sh and checked by `haproxy -c`).
 * Secrets: secrets.test.ts; monitoring: monitoring.test.ts. What needs a tool that is absent is skipped with the reason.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { loadConfigFile } from '../../packages/gateway/src/config/load.ts';
import {
  compose,
  composeGatewayConfig,
  durationMs,
  labels,
  published,
  read,
  readYaml,
  root,
  service,
  traefik,
  which,
  withDefaults,
} from './support.ts';

const services = compose.services;
const gatewayConfig = composeGatewayConfig();
const CLIENT_ENTRY_POINTS = ['web', 'websecure'];

/** The gateway's Traefik routers and services, from its labels. */
function traefikRouting() {
  const l = labels(service('gateway'));
  const names = (kind: string, field: string) =>
    Object.keys(l)
      .map((key) => new RegExp(`^traefik\\.http\\.${kind}\\.([^.]+)\\.${field}$`).exec(key)?.[1])
      .filter((name): name is string => name !== undefined);
  const routers = names('routers', 'rule').map((name) => ({
    name,
    entryPoints: (l[`traefik.http.routers.${name}.entrypoints`] ?? '').split(','),
    service: l[`traefik.http.routers.${name}.service`]!,
    tls: l[`traefik.http.routers.${name}.tls`] === 'true',
  }));
  const lbServices = names('services', 'loadbalancer\\.server\\.port').map((name) => ({
    name,
    port: Number(l[`traefik.http.services.${name}.loadbalancer.server.port`]),
    healthPath: l[`traefik.http.services.${name}.loadbalancer.healthcheck.path`],
  }));
  return { l, routers, lbServices };
}

test('docker-compose.yml: redis, mongodb, traefik and the gateway; prometheus and grafana under the monitoring profile', () => {
  for (const name of ['redis', 'mongodb', 'traefik', 'gateway']) assert.equal(service(name).profiles, undefined, name);
  for (const name of ['prometheus', 'grafana']) assert.deepEqual(service(name).profiles, ['monitoring'], name);
  assert.match(service('redis').image ?? '', /^redis:7/);
  assert.match(service('mongodb').image ?? '', /^mongo:7/);
  assert.match(service('traefik').image ?? '', /^traefik:v3\./);
  assert.match(service('prometheus').image ?? '', /^prom\/prometheus:v3\./);
  assert.match(service('grafana').image ?? '', /^grafana\/grafana:\d+\./);
});

test('Redis persists on purpose: an append-only file fsynced every second, no eviction, on a named volume', () => {
  const command = service('redis').command!;
  const option = (name: string) => command[command.indexOf(`--${name}`) + 1];
  assert.equal(option('appendonly'), 'yes');
  assert.equal(option('appendfsync'), 'everysec');
  assert.equal(option('maxmemory-policy'), 'noeviction');
  assert.ok(service('redis').volumes?.some((v) => v.endsWith(':/data') && v.split(':')[0]! in compose.volumes), 'a named volume at /data');
  assert.match(read('docker-compose.yml'), /history kept for recovery/, 'the reason is written beside it');
});

test('the gateway service scales: no container_name, no published port', () => {
  const gateway = service('gateway');
  assert.equal(gateway.container_name, undefined);
  assert.equal(gateway.ports, undefined);
  assert.deepEqual(gateway.build, { context: '.', dockerfile: 'infra/docker/Dockerfile' });
});

test('only the clients\' entry points are published to the world; everything else on loopback only', () => {
  const { routers, lbServices } = traefikRouting();
  const entryPointPort = (name: string) => Number(traefik.entryPoints[name]!.address.split(':').at(-1));
  for (const [name, svc] of Object.entries(services)) {
    for (const port of published(svc)) {
      if (port.host === '127.0.0.1') continue;
      assert.equal(name, 'traefik', `${name} publishes ${port.containerPort} beyond loopback`);
      const entryPoint = Object.keys(traefik.entryPoints).find((ep) => entryPointPort(ep) === port.containerPort);
      assert.ok(entryPoint && CLIENT_ENTRY_POINTS.includes(entryPoint), `${port.containerPort} is a clients' entry point`);
      // What is routed there is the gateway's clients' port, never its API port.
      for (const router of routers.filter((r) => r.entryPoints.includes(entryPoint))) {
        assert.equal(lbServices.find((s) => s.name === router.service)?.port, gatewayConfig.server.port, router.name);
      }
    }
  }
  assert.ok(gatewayConfig.server.apiPort !== undefined, 'the compose config has an API port');
  const apiRouted = routers.filter((r) => lbServices.find((s) => s.name === r.service)?.port === gatewayConfig.server.apiPort);
  for (const router of apiRouted) {
    for (const ep of router.entryPoints) {
      const port = published(service('traefik')).find((p) => p.containerPort === entryPointPort(ep));
      assert.equal(port?.host, '127.0.0.1', `the API port's entry point ${ep} is on loopback only`);
    }
  }
});

test('networks: Redis, MongoDB and the gateways only on the internal network, which has no route out', () => {
  assert.equal(compose.networks.internal?.internal, true);
  for (const name of ['redis', 'mongodb', 'gateway']) assert.deepEqual(service(name).networks, ['internal'], name);
  for (const name of ['traefik', 'prometheus', 'grafana']) assert.ok(service(name).networks?.includes('internal'), name);
  assert.equal(traefik.providers.docker?.network, `${compose.name}_internal`, 'Traefik reaches the gateways on it');
});

test('Traefik routes: every router names an entry point and a service that exist; each service checks /readyz on a port the gateway listens on', () => {
  const { l, routers, lbServices } = traefikRouting();
  assert.equal(l['traefik.enable'], 'true');
  assert.ok(routers.length >= 3, 'plain, TLS and API routers');
  for (const router of routers) {
    for (const ep of router.entryPoints) assert.ok(traefik.entryPoints[ep], `${router.name}: entry point ${ep} exists`);
    assert.ok(lbServices.some((s) => s.name === router.service), `${router.name}: service ${router.service} is defined`);
  }
  assert.ok(routers.some((r) => r.entryPoints.includes('websecure') && r.tls), 'a TLS router on websecure');
  const ports = [gatewayConfig.server.port, gatewayConfig.server.apiPort];
  for (const svc of lbServices) {
    assert.ok(ports.includes(svc.port), `${svc.name} targets ${svc.port}, a port of the gateway config`);
    assert.equal(svc.healthPath, '/readyz', svc.name);
    assert.equal(l[`traefik.http.services.${svc.name}.loadbalancer.healthcheck.interval`], '2s');
  }
  assert.equal(l['traefik.http.services.herald.loadbalancer.strategy'], 'p2c');
  assert.equal(Object.keys(l).filter((k) => k.includes('.sticky')).length, 0, 'no sticky sessions: any node serves any client');
});

test('Traefik: TLS entry point, its default certificate mounted, the dynamic config parsed', () => {
  assert.ok(traefik.entryPoints.websecure, 'a websecure entry point');
  assert.equal(traefik.entryPoints.web?.address, ':38246');
  for (const ep of CLIENT_ENTRY_POINTS) {
    // A finite read timeout could cut long-lived WebSocket connections.
    assert.equal(traefik.entryPoints[ep]?.transport?.respondingTimeouts?.readTimeout, '0s', ep);
  }
  assert.equal(traefik.providers.docker?.exposedByDefault, false);
  const mounts = service('traefik').volumes!.map((v) => withDefaults(v).split(':'));
  const mountedAt = (target: string) => mounts.find(([, at]) => at === target)?.[0];
  assert.equal(mountedAt('/etc/traefik/traefik.yml'), './infra/traefik/traefik.yml');
  assert.equal(mountedAt('/var/run/docker.sock'), '/var/run/docker.sock');
  const dynamicDir = traefik.providers.file?.directory;
  assert.ok(dynamicDir, 'a file provider');
  const dynamicSource = mountedAt(dynamicDir)!;
  const dynamic = readYaml<{ tls: { options: Record<string, { minVersion: string }>; stores: Record<string, any> } }>(
    join(dynamicSource, 'tls.yml'),
  );
  assert.equal(dynamic.tls.options.default?.minVersion, 'VersionTLS12');
  const { certFile, keyFile } = dynamic.tls.stores.default.defaultCertificate;
  for (const file of [certFile, keyFile]) {
    const dir = file.slice(0, file.lastIndexOf('/'));
    assert.ok(mountedAt(dir), `${file}: its directory is mounted into traefik`);
  }
  assert.equal(mountedAt('/certs'), './infra/traefik/certs', 'where init-secrets.sh writes the certificate');
  assert.equal(traefik.ping?.entryPoint, 'traefik', 'the traefik service healthcheck uses ping');
  const dashboard = published(service('traefik')).find((p) => p.containerPort === 8080);
  assert.equal(dashboard?.host, '127.0.0.1', 'the insecure dashboard on loopback only');
});

test('every service restarts on its own, has CPU and memory limits, and its log is rotated', () => {
  for (const [name, svc] of Object.entries(services)) {
    assert.ok(['unless-stopped', 'always'].includes(svc.restart ?? ''), `${name}: restart`);
    const limits = svc.deploy?.resources?.limits;
    assert.ok(limits?.cpus && limits.memory, `${name}: cpus and memory limits`);
  }
  assert.match(read('docker-compose.yml'), /max-size/);
});

test('many sockets: nofile ulimits and sysctls where connections pile up', () => {
  for (const name of ['traefik', 'gateway']) {
    const nofile = service(name).ulimits?.nofile;
    assert.ok(nofile && nofile.soft >= 200_000 && nofile.hard >= nofile.soft, `${name}: nofile`);
  }
  for (const name of ['redis', 'mongodb']) assert.ok((service(name).ulimits?.nofile?.soft ?? 0) >= 64_000, `${name}: nofile`);
  const sysctls = service('traefik').sysctls ?? {};
  assert.ok(Number(sysctls['net.core.somaxconn']) >= 4096);
  const [low, high] = String(sysctls['net.ipv4.ip_local_port_range']).split(' ').map(Number);
  assert.ok(high! - low! > 60_000, 'a wide range of local ports for Traefik\'s connections to the nodes');
  assert.equal(Number(sysctls['net.ipv4.tcp_tw_reuse']), 1);
  const gateway = service('gateway').sysctls ?? {};
  assert.ok(Number(gateway['net.core.somaxconn']) >= gatewayConfig.server.backlog, 'the listen backlog is not capped below server.backlog');
});

test('rolling updates drain: SIGTERM, and a stop grace period longer than the drain deadline', () => {
  const gateway = service('gateway');
  assert.equal(gateway.stop_signal, 'SIGTERM');
  assert.ok(durationMs(gateway.stop_grace_period!) > gatewayConfig.drain.deadlineMs, 'Docker waits for the drain to end');
  assert.ok(read('infra/docker/Dockerfile').split('\n').includes('STOPSIGNAL SIGTERM'));
  // Traefik's graceTimeOut fits in its own grace period.
  assert.ok(durationMs(service('traefik').stop_grace_period!) > 30_000);
});

test('healthchecks: every service has one (the gateway\'s is the image\'s /readyz), and depends_on waits for them', () => {
  for (const [name, svc] of Object.entries(services)) {
    if (name === 'gateway') {
      assert.equal(svc.healthcheck, undefined, 'the gateway inherits the Dockerfile HEALTHCHECK (checked below)');
      continue;
    }
    assert.ok(svc.healthcheck?.test && !svc.healthcheck.disable, `${name}: healthcheck`);
  }
  for (const [name, svc] of Object.entries(services)) {
    for (const [dependency, { condition }] of Object.entries(svc.depends_on ?? {})) {
      assert.equal(condition, 'service_healthy', `${name} waits for ${dependency}`);
      assert.ok(services[dependency], `${name} depends on a service that exists`);
    }
  }
});

test('the gateway reaches Redis by service name, and mounts its config where HERALD_CONFIG points', () => {
  const gateway = service('gateway');
  const env = gateway.environment ?? {};
  const redis = new URL(env.REDIS_URL ?? '');
  assert.equal(redis.protocol, 'redis:');
  assert.ok(services[redis.hostname], 'REDIS_URL names a service');
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

test('what docker-compose.yml mounts exists', () => {
  for (const svc of Object.values(services)) {
    for (const volume of svc.volumes ?? []) {
      const source = withDefaults(volume).split(':')[0]!;
      // The certificate directory is written by init-secrets.sh (git ignores it): secrets.test.ts runs the script.
      if (source.startsWith('./') && source !== './infra/traefik/certs') assert.ok(existsSync(join(root, source)), `${source} exists`);
    }
  }
});

test('the Dockerfile: node:24-slim, every workspace manifest, non-root, EXPOSE both ports, CMD main.ts, HEALTHCHECK /readyz', () => {
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
  assert.ok(lines.includes(`EXPOSE ${gatewayConfig.server.port} ${gatewayConfig.server.apiPort}`));
  const cmd = lines.find((line) => line.startsWith('CMD '));
  // --no-node-snapshot: isolated-vm (can-connect code) asks for it on Node 20 and later; --max-semi-space-size:
  // a bounded young generation (docs/architecture.md).
  assert.deepEqual(JSON.parse(cmd!.slice(4)), ['node', '--no-node-snapshot', '--max-semi-space-size=16', 'packages/gateway/src/main.ts']);
  const healthcheck = lines.find((line) => line.startsWith('HEALTHCHECK '));
  assert.ok(healthcheck, 'has a HEALTHCHECK');
  const check = JSON.parse(healthcheck.slice(healthcheck.indexOf('CMD ') + 4)) as string[];
  assert.equal(check[0], 'node', 'uses node (node:24-slim has no curl)');
  assert.match(check.join(' '), /\/readyz/);
  assert.match(check.join(' '), new RegExp(`process\\.env\\.PORT \\|\\| ${gatewayConfig.server.port}`), 'on the clients\' port');
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
  assert.equal(raw.auth.secret, undefined, 'no auth.secret: HERALD_JWT_SECRET_FILE provides it');
  assert.throws(() => loadConfigFile(file, {}), /auth\.secret: set either secret/);
  const config = loadConfigFile(file, { secret: 'a-secret-of-sixteen-or-more', mongodbUrl: 'mongodb://mongodb:27017' });
  assert.equal(config.server.port, 38246);
  assert.equal(config.server.apiPort, 38247);
  assert.equal(config.instances.mongodb?.url, 'mongodb://mongodb:27017');
  assert.throws(
    () => loadConfigFile(file, { secret: 'a-secret-of-sixteen-or-more', production: true }),
    /default secrets in: apiUsers\.bench\.password/,
  );
});

test('infra/docker/config.yaml has the tables, events, people and API users of the default config', () => {
  const compose = composeGatewayConfig();
  const local = loadConfigFile(join(root, 'packages/gateway/config/default.yaml'));
  assert.deepEqual(Object.keys(compose.events).sort(), Object.keys(local.events).sort());
  for (const [name, event] of Object.entries(local.events)) {
    assert.deepEqual({ ...compose.events[name], canConnect: undefined }, { ...event, canConnect: undefined }, name);
    assert.equal(compose.events[name]?.canConnect?.file, event.canConnect?.file, `${name}: the same code file`);
  }
  const collections = (config: typeof local) =>
    Object.fromEntries(Object.entries(config.instances.mongodb!.databases.am_bench!.collections).map(([n, c]) => [n, c.access]));
  assert.deepEqual(collections(compose), collections(local));
  assert.deepEqual(compose.tokenGenerators, local.tokenGenerators);
  assert.deepEqual(compose.apiUsers, local.apiUsers);
});

test('docker compose config accepts the file', (t) => {
  const version = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8', timeout: 10_000 });
  if (version.status !== 0) {
    t.skip('`docker compose` (the compose plugin) is not installed here');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'herald-compose-'));
  const env = { ...process.env, HERALD_SECRETS_DIR: join(dir, 'secrets'), HERALD_CERTS_DIR: join(dir, 'certs') };
  try {
    assert.equal(spawnSync('bash', [join(root, 'infra/docker/init-secrets.sh')], { env }).status, 0);
    const out = spawnSync('docker', ['compose', '--profile', 'monitoring', 'config', '--quiet'], { cwd: root, encoding: 'utf8', timeout: 30_000, env });
    assert.equal(out.status, 0, out.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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

// --- docs/operations.md's ACME steps -------------------------------------------------------------------

test('docs/operations.md\'s ACME snippets: a resolver stored on Traefik\'s volume, named by an existing TLS router', () => {
  const blocks = [...read('docs/operations.md').matchAll(/```yaml\n([\s\S]*?)```/g)].map(([, yaml]) => parse(yaml!));
  const resolvers = blocks.find((block) => block?.certificatesResolvers)?.certificatesResolvers as Record<string, { acme: { storage: string; tlsChallenge?: object } }>;
  assert.ok(resolvers, 'a certificatesResolvers snippet');
  const [[name, { acme }]] = Object.entries(resolvers) as [[string, { acme: { storage: string; tlsChallenge?: object } }]];
  const volume = service('traefik').volumes!.map((v) => v.split(':')).find(([, at]) => acme.storage.startsWith(`${at}/`));
  assert.ok(volume && volume[0]! in compose.volumes, `${acme.storage} is on a named volume`);
  assert.ok(acme.tlsChallenge, 'the TLS-ALPN challenge: websecure answers it');
  const override = blocks.find((block) => block?.services?.gateway)?.services.gateway.labels as string[];
  const routers = new Set(Object.keys(labels(service('gateway'))).map((key) => /^traefik\.http\.routers\.([^.]+)\./.exec(key)?.[1]));
  for (const label of override) {
    const router = /^traefik\.http\.routers\.([^.]+)\./.exec(label)?.[1];
    assert.ok(routers.has(router), `${label}: the router exists`);
    assert.equal(labels(service('gateway'))[`traefik.http.routers.${router}.tls`], 'true', 'the TLS router');
    if (label.includes('certresolver=')) assert.equal(label.split('=')[1], name);
  }
});
