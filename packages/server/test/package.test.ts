/**
 * The published @herald/server as a stranger gets it: built (scripts/build.ts), packed with `npm pack`, installed from
 * the tarball into a new project with `npm install --offline` (it has no dependencies), then used as ESM against a
 * real node, required as CommonJS, and type-checked as a consumer would (a wrong use refused).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { DEFAULT_CONFIG_FILE, Gateway, loadConfigFile } from '@herald/gateway';
import { installedFromTarball } from '../../protocol/scripts/package.ts';
import { buildServer } from '../scripts/build.ts';

const run = promisify(execFile);
const TSC = new URL('../../../node_modules/typescript/bin/tsc', import.meta.url).pathname;
let project: string;
let gateway: Gateway;
let url: string;

before(async () => {
  const dist = await buildServer(mkdtempSync(join(tmpdir(), 'herald-server-build-')));
  project = await installedFromTarball(dist);
  gateway = await Gateway.create(loadConfigFile(DEFAULT_CONFIG_FILE, { port: 0, host: '127.0.0.1' }));
  url = `http://127.0.0.1:${await gateway.listen()}`;
});
after(() => gateway?.close());

test('the installed package has no dependencies, and its manifest points at what it holds', () => {
  const installed = join(project, 'node_modules/@herald/server');
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(manifest.dependencies, undefined);
  for (const file of ['index.js', 'index.cjs', 'types/server/src/index.d.ts', 'README.md', 'LICENSE']) readFileSync(join(installed, file));
});

test('ESM: import it and emit to a node, twice under one key: published once', async () => {
  writeFileSync(
    join(project, 'emit.mjs'),
    `import { HeraldServer } from '@herald/server';
const herald = new HeraldServer({ url: process.env.URL, userPath: 'bench', credentials: { u: 'bench', p: 'bench' } });
const first = await herald.emit('announcements', { from: 'the package' }, { idempotencyKey: 'package-test' });
const again = await herald.emit('announcements', { from: 'the package' }, { idempotencyKey: 'package-test' });
console.log(JSON.stringify([first.replayed, again.replayed]));
`,
  );
  const { stdout } = await run(process.execPath, ['emit.mjs'], { cwd: project, env: { ...process.env, URL: url } });
  assert.equal(stdout.trim(), '[false,true]');
});

test('CommonJS: require it', async () => {
  writeFileSync(join(project, 'require.cjs'), "const s = require('@herald/server'); console.log([typeof s.HeraldServer, typeof s.verifyWebhook, typeof s.xadd].join(' '));");
  const { stdout } = await run(process.execPath, ['require.cjs'], { cwd: project });
  assert.equal(stdout.trim(), 'function function function');
});

test('types: a typed consumer checks (ESM and CommonJS), and a wrong use is refused', async () => {
  const compilerOptions = { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2024'], types: [], skipLibCheck: false };
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['consumer.ts', 'consumer.cts'] }));
  writeFileSync(
    join(project, 'consumer.ts'),
    `import { HeraldServer, HeraldServerError, verifyWebhook, type BatchResult } from '@herald/server';
const herald = new HeraldServer({ url: 'http://gateway', userPath: 'bench', credentials: { u: 'app', p: 'secret' }, retry: { attempts: 3 } });
const { nodes, replayed }: { nodes: number; replayed: boolean } = await herald.emit('order-updates', { recipientId: '2' });
const results: BatchResult[] = await herald.emitBatch([{ name: 'announcements', eventData: {} }]);
export const refusals = results.flatMap((result) => (result.ok ? [] : [[result.status, result.errors[0]?.code]]));
export const ok = (e: unknown) => e instanceof HeraldServerError && e.status === 503;
export const genuine = verifyWebhook('[]', 'sha256=00', 'secret');
export const taken = [nodes, replayed];
`,
  );
  writeFileSync(join(project, 'consumer.cts'), "import { HeraldServer } from '@herald/server';\nexport const make = (url: string) => new HeraldServer({ url, userPath: 'bench', apiToken: 't' });\n");
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project });
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['wrong.ts'] }));
  writeFileSync(join(project, 'wrong.ts'), "import { HeraldServer } from '@herald/server';\nconst h = new HeraldServer({ url: 'x', userPath: 'bench', apiToken: 't' });\nawait h.emit('x', 'not an object');\n");
  const refused = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project }).then(() => '', (error: { stdout: string }) => error.stdout);
  assert.match(refused, /wrong\.ts\(3,\d+\): error TS2345/);
});
