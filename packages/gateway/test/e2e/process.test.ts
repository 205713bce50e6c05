/** The `herald-gateway` command as a real process: it refuses bad config and shipped secrets, and stops on SIGTERM. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { PasswordChecks } from '../../src/auth/password.ts';
import { defaultRawConfig } from '../support/gateway.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;

interface Run {
  code: number | null;
  stderr: string;
}

function run(env: Record<string, string>): { child: ReturnType<typeof spawn>; done: Promise<Run>; stdout: () => string } {
  const child = spawn(process.execPath, ['--no-node-snapshot', MAIN], { env: { ...process.env, LOG_LEVEL: 'info', ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  // A node that should have refused to start, and did not, would keep the test waiting: it is killed (code null).
  const deadline = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const done = once(child, 'exit').then(([code]) => {
    clearTimeout(deadline);
    return { code: code as number | null, stderr };
  });
  return { child, done, stdout: () => stdout };
}

test('NODE_ENV=production, in any case, with the shipped secrets: refuses to start, naming them', async () => {
  for (const NODE_ENV of ['production', 'Production', 'PRODUCTION']) {
    const { code, stderr } = await run({ NODE_ENV, PORT: '0' }).done;
    assert.equal(code, 1, NODE_ENV);
    assert.match(stderr, /refusing to start.*auth\.secret.*apiUsers\.bench\.password/, NODE_ENV);
  }
});

test('hash-password prints a scrypt hash of the password given, or read from stdin, that logs the person in', async () => {
  const hashOf = async (args: string[], stdin?: string) => {
    const child = spawn(process.execPath, ['--no-node-snapshot', MAIN, 'hash-password', ...args]);
    let stdout = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stdin.end(stdin);
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    return stdout;
  };
  const given = await hashOf(['--cost', 'ln=10,r=8,p=1', 'WAHLBERG']);
  assert.match(given, /^\$scrypt\$ln=10,r=8,p=1\$\S+\$\S+\n$/);
  const piped = await hashOf(['--cost', 'ln=10,r=8,p=1'], 'WAHLBERG\n');
  const checks = new PasswordChecks(1, 0);
  for (const hash of [given.trim(), piped.trim()]) assert.equal(await checks.check('WAHLBERG', hash, hash), 'ok');
  assert.match(await hashOf([], 'x'), /^\$scrypt\$ln=15,r=8,p=3\$/);
});

test('a bad field in the config file: refuses to start, naming the field', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
  const raw = defaultRawConfig();
  raw.websocket = { maxPayload: 'big' };
  writeFileSync(join(dir, 'bad.yaml'), stringify(raw));
  const { code, stderr } = await run({ HERALD_CONFIG: join(dir, 'bad.yaml') }).done;
  assert.equal(code, 1);
  assert.match(stderr, /websocket\.maxPayload/);
});

test('HERALD_REUSE_PORT other than 1, true, 0 or false: refuses to start, naming it', async () => {
  const { code, stderr } = await run({ HERALD_REUSE_PORT: 'yes', PORT: '0' }).done;
  assert.equal(code, 1);
  assert.match(stderr, /HERALD_REUSE_PORT must be 1, true, 0 or false, got yes/);
});

test('starts on PORT, answers /readyz, and exits 0 on SIGTERM', async () => {
  const node = run({ PORT: '0', HOST: '127.0.0.1' });
  let port: number | undefined;
  while (port === undefined) {
    await once(node.child.stdout!, 'data');
    port = Number(/listening on [\d.]+:(\d+)/.exec(node.stdout())?.[1]) || undefined;
  }
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  assert.deepEqual([ready.status, await ready.json()], [200, { ready: true }]);
  node.child.kill('SIGTERM');
  assert.equal((await node.done).code, 0);
});
