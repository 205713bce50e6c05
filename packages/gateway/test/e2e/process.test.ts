/** The `herald-gateway` command as a real process: it refuses bad config and shipped secrets, and stops on SIGTERM. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
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
  const done = once(child, 'exit').then(([code]) => ({ code: code as number | null, stderr }));
  return { child, done, stdout: () => stdout };
}

test('NODE_ENV=production with the shipped secrets: refuses to start, naming them', async () => {
  const { code, stderr } = await run({ NODE_ENV: 'production', PORT: '0' }).done;
  assert.equal(code, 1);
  assert.match(stderr, /refusing to start.*auth\.secret.*apiUsers\.bench\.password/);
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
