/**
 * The `herald-gateway` command's own surface, as a real process: --help names every variable main.ts reads (and so
 * does docs/configuration.md), secrets from *_FILE, HERALD_API_PORT, and the node's id in every log line.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
const CONFIGURATION_MD = new URL('../../../../docs/configuration.md', import.meta.url).pathname;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, ['--no-node-snapshot', MAIN, ...args], { env: { ...process.env, LOG_LEVEL: 'info', ...env } });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk) => (out.stdout += chunk));
  child.stderr.on('data', (chunk) => (out.stderr += chunk));
  const done: Promise<Run> = once(child, 'exit').then(([code]) => ({ code: code as number | null, ...out }));
  return { child, out, done };
}

const run = (args: string[], env: Record<string, string> = {}) => start(args, env).done;

/** The variables main.ts reads: env.NAME, and the names given to its readers (secrets also as NAME_FILE). */
function variablesRead(): string[] {
  const source = readFileSync(MAIN, 'utf8');
  const names = new Set([...source.matchAll(/\benv\.([A-Z_]+)/g)].map(([, name]) => name!));
  for (const [, reader, name] of source.matchAll(/\b(portFromEnv|flagFromEnv|secretFromEnv)\('([A-Z_]+)'\)/g)) {
    names.add(name!);
    if (reader === 'secretFromEnv') names.add(`${name}_FILE`);
  }
  return [...names].sort();
}

test('--help lists every environment variable main.ts reads; docs/configuration.md documents each', async () => {
  const { code, stdout } = await run(['--help']);
  assert.equal(code, 0);
  assert.match(stdout, /^usage: herald-gateway/);
  const variables = variablesRead();
  assert.ok(variables.length >= 14, variables.join(' '));
  const docs = readFileSync(CONFIGURATION_MD, 'utf8');
  for (const name of variables) {
    assert.match(stdout, new RegExp(`\\b${name}\\b`), `--help names ${name}`);
    assert.match(docs, new RegExp(`\`${name}\``), `docs/configuration.md names ${name}`);
  }
});

test('an unknown argument: usage on stderr, exit 2', async () => {
  const { code, stderr } = await run(['--port', '1']);
  assert.equal(code, 2);
  assert.match(stderr, /Unknown option '--port'[\s\S]*usage: herald-gateway/);
});

test('secrets from *_FILE: read (a trailing newline dropped); both, an empty or an unreadable file refused, naming it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-secret-'));
  const secret = join(dir, 'jwt_secret');
  writeFileSync(secret, 'short\n');
  // Read and used: too short for the schema, which says so (the value came through, newline dropped).
  let result = await run([], { HERALD_JWT_SECRET_FILE: secret, PORT: '0' });
  assert.equal(result.code, 1);
  assert.match(result.stderr, /auth\.secret: Too small: expected string to have >=16 characters/);
  result = await run([], { HERALD_JWT_SECRET_FILE: secret, HERALD_JWT_SECRET: 'another-secret-of-16+', PORT: '0' });
  assert.match(result.stderr, /^herald-gateway: set HERALD_JWT_SECRET or HERALD_JWT_SECRET_FILE, not both$/m);
  result = await run([], { MONGODB_URL_FILE: join(dir, 'missing'), PORT: '0' });
  assert.match(result.stderr, /MONGODB_URL_FILE: cannot read .*missing: ENOENT/);
  writeFileSync(join(dir, 'empty'), '\n');
  result = await run([], { REDIS_URL_FILE: join(dir, 'empty'), PORT: '0' });
  assert.match(result.stderr, /REDIS_URL_FILE: .*empty is empty/);
  assert.equal(result.code, 1);
});

test('HERALD_API_PORT opens the API port; the JWT secret from a file signs; every log line carries the node id', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-secret-'));
  writeFileSync(join(dir, 'jwt_secret'), 'a-secret-read-from-a-file\n');
  const node = start([], {
    PORT: '0',
    HERALD_API_PORT: '0',
    HOST: '127.0.0.1',
    HERALD_NODE_ID: 'node-under-test',
    HERALD_JWT_SECRET_FILE: join(dir, 'jwt_secret'),
  });
  let ports: RegExpExecArray | null = null;
  while (!ports) {
    await Promise.race([once(node.child.stdout, 'data'), node.done]);
    assert.equal(node.child.exitCode, null, node.out.stderr);
    ports = /listening on [\d.]+:(\d+), its API on [\d.]+:(\d+)/.exec(node.out.stdout);
  }
  const [, clients, api] = ports;
  const token = await fetch(`http://127.0.0.1:${api}/api/system-api/bench/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } }),
  });
  assert.equal(token.status, 200);
  assert.equal((await fetch(`http://127.0.0.1:${clients}/metrics`)).status, 404);
  assert.equal((await fetch(`http://127.0.0.1:${api}/metrics`)).status, 200);
  node.child.kill('SIGTERM');
  assert.equal((await node.done).code, 0);
  const lines = node.out.stdout.trim().split('\n').map((line) => JSON.parse(line) as { nodeId?: string; msg: string });
  assert.ok(lines.length >= 2);
  for (const line of lines) assert.equal(line.nodeId, 'node-under-test', line.msg);
});
