/**
 * The published package as a stranger gets it: built (scripts/build.ts), packed with `npm pack`, installed from the
 * tarball into a new project with `npm install --offline` (it has no dependencies), then used as ESM against a real
 * node, required as CommonJS, type-checked as a consumer would (and a wrong use refused), and its browser file run
 * in a bare VM context where it defines the global `Herald` and nothing else.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { runInNewContext } from 'node:vm';
import { installedFromTarball } from '../../protocol/scripts/package.ts';
import { BROWSER_FILE, buildClient } from '../scripts/build.ts';
import { emit, startNode, apiToken, type Node } from './support.ts';

const run = promisify(execFile);
const TSC = new URL('../../../node_modules/typescript/bin/tsc', import.meta.url).pathname;
let project: string;
let node: Node;

before(async () => {
  const started = performance.now();
  const dist = await buildClient(mkdtempSync(join(tmpdir(), 'herald-build-')));
  const buildSeconds = (performance.now() - started) / 1000;
  assert.ok(buildSeconds < 20, `the build took ${buildSeconds.toFixed(1)} s`);
  project = await installedFromTarball(dist);
  node = await startNode();
});
after(() => node?.gateway.close());

test('the installed package is JavaScript with no dependencies, and its manifest points at what it holds', () => {
  const installed = join(project, 'node_modules/@herald/client');
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(manifest.dependencies, undefined);
  assert.deepEqual(Object.keys(manifest.exports as object), ['.', './browser', './package.json']);
  for (const file of ['index.js', 'index.cjs', BROWSER_FILE, 'cli.js', 'types/client/src/index.d.ts']) readFileSync(join(installed, file));
});

test('ESM: import it, connect to a node, subscribe, receive a notification', async () => {
  writeFileSync(
    join(project, 'listen.mjs'),
    `import { createClient } from '@herald/client';
const client = createClient({ url: process.env.URL, apiToken: process.env.TOKEN });
await client.connect();
await client.subscribe('announcements', undefined, async (n) => {
  console.log(JSON.stringify([n.apiName, n.eventData]));
  await client.close();
});
console.log('subscribed');
`,
  );
  const child = spawn(process.execPath, ['listen.mjs'], { cwd: project, env: { ...process.env, URL: node.ws, TOKEN: await apiToken(node) }, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  assert.equal((await lines.next()).value, 'subscribed');
  await emit(node, 'announcements', { title: 'from the package' });
  assert.equal((await lines.next()).value, JSON.stringify(['announcements', { title: 'from the package' }]));
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
});

test('CommonJS: require it', async () => {
  writeFileSync(join(project, 'require.cjs'), "const c = require('@herald/client'); console.log([typeof c.createClient, typeof c.HeraldClient, c.DEFAULT_CONNECT_TIMEOUT_MS].join(' '));");
  const { stdout } = await run(process.execPath, ['require.cjs'], { cwd: project });
  assert.equal(stdout.trim(), 'function function 10000');
});

test('the herald-ws command, from the package\'s bin', async () => {
  const { stdout } = await run(join(project, 'node_modules/.bin/herald-ws'), ['--help'], { cwd: project });
  assert.match(stdout, /^usage: herald-ws <command>/);
});

test('types: a typed consumer checks (ESM and CommonJS), and a wrong use of a payload is refused', async () => {
  const compilerOptions = { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2024', 'dom'], types: [] };
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['consumer.ts', 'consumer.cts'] }));
  writeFileSync(
    join(project, 'consumer.ts'),
    `import { createClient, HeraldError, type Notification } from '@herald/client';
type Events = { 'order-updates': { orderId: number; status: string } };
const client = createClient<Events>({ url: 'wss://example.invalid', apiToken: 't', connectTimeoutMs: 5000, livenessIdleMs: 20000 });
const sub = await client.subscribe('order-updates', { recipientId: 2 }, (n) => {
  const id: number = n.eventData.orderId;
  console.log(id, n.apiName === 'order-updates');
});
client.onNotification((n: Notification<Events>) => console.log(n.eventData.status.toUpperCase()));
await sub.unsubscribe();
export const refused = (e: unknown) => e instanceof HeraldError && e.errors.length > 0;
`,
  );
  writeFileSync(join(project, 'consumer.cts'), "import { HeraldClient } from '@herald/client';\nexport const make = (url: string) => new HeraldClient({ url, apiToken: 't' });\n");
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project });
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['wrong.ts'] }));
  writeFileSync(
    join(project, 'wrong.ts'),
    "import { createClient } from '@herald/client';\nconst c = createClient<{ 'order-updates': { orderId: number } }>({ url: 'ws://x', apiToken: 't' });\nawait c.subscribe('order-updates', undefined, (n) => { const s: string = n.eventData.orderId; console.log(s); });\n",
  );
  const refused = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project }).then(() => '', (error: { stdout: string }) => error.stdout);
  assert.match(refused, /wrong\.ts\(3,\d+\): error TS2322: Type 'number' is not assignable to type 'string'/);
});

test('the browser file runs alone: it defines the global Herald, on the page\'s WebSocket', async () => {
  const code = readFileSync(join(project, 'node_modules/@herald/client', BROWSER_FILE), 'utf8');
  assert.doesNotMatch(code, /\brequire\(|^import /m);
  const made = Promise.withResolvers<string>();
  // Only what a page has: the SDK must reach for the page's WebSocket, nothing of Node's.
  class WebSocket {
    constructor(url: URL) {
      made.resolve(String(url));
    }
    addEventListener(): void {}
    close(): void {}
  }
  const page: { Herald?: { createClient(options: object): { connect(): Promise<void> } }; [name: string]: unknown } = { WebSocket, URL, setTimeout, clearTimeout, queueMicrotask };
  runInNewContext(code, page);
  assert.equal(typeof page.Herald?.createClient, 'function');
  const connecting = page.Herald?.createClient({ url: 'wss://example.invalid/', apiToken: 'T', connectTimeoutMs: 1 }).connect();
  assert.equal(await made.promise, 'wss://example.invalid/?x-am-authorization=T');
  await assert.rejects(connecting ?? Promise.resolve(), /no CONNECTED within 1 ms/);
});
