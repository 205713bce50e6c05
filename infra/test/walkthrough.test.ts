/**
 * README.md's walk-through, run as written: its `node packages/client/src/cli.ts` commands as real child processes and
 * its curl calls as the same HTTP requests, against a node of each config it is written for: the default config
 * (`make run`: one port) and the compose config (infra/docker/config.yaml: the clients' port and the API port). The
 * compose node is an in-process node here: no Traefik in front, and its MongoDB replaced by the in-memory data source
 * seeded with the same customers (no Docker engine and no MongoDB server on the build machine).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { DEFAULT_CONFIG_FILE, loadConfigFile } from '../../packages/gateway/src/config/load.ts';
import { Gateway } from '../../packages/gateway/src/node.ts';

const root = resolve(import.meta.dirname, '../..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The walk-through's commands: its sh block, continuation lines joined, comments and blank lines left out. */
function walkthroughCommands(): string[] {
  const section = readme.slice(readme.indexOf('## Two-minute walk-through'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, 'README.md has the walk-through in an sh block');
  return block
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** Shell words as sh splits them for these commands: quotes, `$NAME` expanded from `vars` (outside single quotes). */
function words(line: string, vars: Record<string, string>): string[] {
  const out: string[] = [];
  let word: string | undefined;
  const expand = (text: string) =>
    text.replace(/\$([A-Z_]+)/g, (_, name: string) => {
      assert.ok(name in vars, `$${name} is set by an earlier step`);
      return vars[name]!;
    });
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === ' ') {
      if (word !== undefined) out.push(word);
      word = undefined;
    } else if (c === "'" || c === '"') {
      const end = line.indexOf(c, i + 1);
      assert.ok(end > i, `unbalanced ${c} in: ${line}`);
      const quoted = line.slice(i + 1, end);
      word = (word ?? '') + (c === "'" ? quoted : expand(quoted));
      i = end;
    } else if (c === '$') {
      const name = /^\$[A-Z_]+/.exec(line.slice(i))![0];
      word = (word ?? '') + expand(name);
      i += name.length - 1;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (word !== undefined) out.push(word);
  return out;
}

interface Listener {
  child: ChildProcessWithoutNullStreams;
  /** Everything it printed. */
  stdout: string;
  /** Its frames so far (listen prints one JSON frame per line). */
  readonly lines: Array<{ type: string; response: any }>;
  /** Resolves at its next output, or its exit. */
  changed(): Promise<unknown>;
}

const CLI_PREFIX = ['node', 'packages/client/src/cli.ts'];

function startCli(args: string[], ws: string): Listener {
  const child = spawn(process.execPath, [join(root, CLI_PREFIX[1]!), ...args], {
    cwd: root,
    env: { ...process.env, HERALD_WS_URL: ws },
  });
  const listener: Listener = {
    child,
    stdout: '',
    get lines() {
      return this.stdout.split('\n').slice(0, -1).map((line) => JSON.parse(line));
    },
    changed: () => Promise.race([once(child.stdout, 'data'), once(child, 'exit')]),
  };
  child.stdout.on('data', (chunk: Buffer) => (listener.stdout += chunk));
  return listener;
}

async function until(listener: Listener, done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    assert.ok(listener.child.exitCode === null, `the listener exited before ${what}`);
    assert.ok(Date.now() < deadline, `no ${what} within 10 s: ${JSON.stringify(listener.lines)}`);
    await Promise.race([listener.changed(), new Promise((wake) => setTimeout(wake, 500))]);
  }
}

/** curl -s URL [-H 'name: value'] ... [-d BODY]: the same request through fetch (a body makes it a POST, as in curl). */
async function curl(args: string[]): Promise<{ status: number; body: any }> {
  let url: string | undefined;
  const headers: Record<string, string> = {};
  let body: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '-s') continue;
    if (arg === '-H') {
      const header = args[++i]!;
      const colon = header.indexOf(':');
      headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
    } else if (arg === '-d') body = args[++i];
    else url = arg;
  }
  assert.ok(url, `curl names a URL: ${args.join(' ')}`);
  const response = await fetch(url, { method: body === undefined ? 'GET' : 'POST', headers, ...(body !== undefined && { body }) });
  return { status: response.status, body: await response.json() };
}

/** What each listener of the walk-through registers, and the eventData of the notifications it must print. */
const EXPECTED = [
  { apiName: 'order-updates', notified: [{ orderId: 1001, status: 'shipped' }, { orderId: 1001, status: 'delivered' }] },
  { apiName: 'announcements', notified: [{ title: 'maintenance at 22:00' }] },
  { apiName: 'checked-token', notified: [] },
  { apiName: 'SCHEMA_POST_BULK_INSERT', notified: [{ sku: 'A-1', status: 'new' }] },
];

async function runWalkthrough(http: string, api: string): Promise<void> {
  const vars: Record<string, string> = {};
  const listeners: Listener[] = [];
  const ws = http.replace(/^http/, 'ws');
  try {
    for (const line of walkthroughCommands()) {
      if (/^HTTP=\S+ API=\S+$/.test(line)) {
        Object.assign(vars, { HTTP: http, API: api });
        continue;
      }
      const tokens = /^eval "\$\((.*)\)"$/.exec(line);
      const command = words(tokens ? tokens[1]! : line.replace(/ &$/, ''), vars);
      if (command[0] === 'curl') {
        const reply = await curl(command.slice(1));
        assert.equal(reply.status, 200, `${line}: ${JSON.stringify(reply.body)}`);
        continue;
      }
      assert.deepEqual(command.slice(0, 2), CLI_PREFIX, `a step the test knows: ${line}`);
      const cli = startCli(command.slice(2), ws);
      if (tokens) {
        assert.equal((await once(cli.child, 'exit'))[0], 0, line);
        for (const [, name, value] of cli.stdout.matchAll(/^export (\w+)=(\S+)$/gm)) vars[name!] = value!;
        assert.ok(vars.API_TOKEN && vars.PERSON_TOKEN, `${line} printed both tokens: ${cli.stdout}`);
        continue;
      }
      listeners.push(cli);
      // A listener in the background is ready once its REGISTER reply is printed; the next step relies on it.
      await until(cli, () => cli.lines.some((frame) => frame.type === 'REGISTER'), 'REGISTER reply');
    }
    assert.deepEqual(
      listeners.map((l) => l.lines.find((frame) => frame.type === 'REGISTER')?.response.validOnEvents.map((e: any) => e.apiName)),
      EXPECTED.map(({ apiName }) => [apiName]),
      'each listener registered what the walk-through says, and nothing was refused',
    );
    for (const [i, { notified }] of EXPECTED.entries()) {
      const listener = listeners[i]!;
      const notifications = () => listener.lines.filter((frame) => frame.type === 'NOTIFICATION');
      await until(listener, () => notifications().length >= notified.length, `${notified.length} notification(s)`);
      for (const [n, eventData] of notified.entries()) {
        const got = notifications()[n]!.response.eventData;
        for (const [field, value] of Object.entries(eventData)) assert.equal(got[field], value, `listener ${i + 1}, ${field}`);
      }
    }
    // Every emit was answered before this point, and a notification leaves before its emit's answer: the retried emit
    // (step 3b) was not delivered twice, and checked-token's listener got nothing.
    const notificationsOf = (i: number) => listeners[i]!.lines.filter((frame) => frame.type === 'NOTIFICATION').length;
    assert.equal(notificationsOf(0), EXPECTED[0]!.notified.length);
    assert.equal(notificationsOf(2), 0);
  } finally {
    for (const { child } of listeners) child.kill('SIGTERM');
    await Promise.all(listeners.map(({ child }) => (child.exitCode === null ? once(child, 'exit') : undefined)));
  }
}

describe('the README walk-through', () => {
  const nodes: Gateway[] = [];
  after(() => Promise.all(nodes.map((node) => node.close())));

  test('its first line names the port of `make run`, and docs/operations.md the compose API port', () => {
    const first = walkthroughCommands().find((line) => line.startsWith('HTTP='));
    const port = loadConfigFile(DEFAULT_CONFIG_FILE).server.port;
    assert.equal(first, `HTTP=http://localhost:${port} API=http://localhost:${port}`);
    const compose = loadConfigFile(join(root, 'infra/docker/config.yaml'), { secret: 'a-secret-of-sixteen-or-more' });
    const operations = readFileSync(join(root, 'docs/operations.md'), 'utf8');
    assert.ok(operations.includes(`API=http://localhost:${compose.server.apiPort}`), 'operations.md gives the API address');
  });

  test('against the default config (make run: one port)', async () => {
    const gateway = await Gateway.create(loadConfigFile(DEFAULT_CONFIG_FILE, { port: 0, host: '127.0.0.1' }));
    nodes.push(gateway);
    const port = await gateway.listen();
    await runWalkthrough(`http://127.0.0.1:${port}`, `http://127.0.0.1:${port}`);
  });

  test('against the compose config (infra/docker/config.yaml: two ports)', async () => {
    const file = join(root, 'infra/docker/config.yaml');
    const config = loadConfigFile(file, { port: 0, apiPort: 0, host: '127.0.0.1', secret: 'a-secret-of-sixteen-or-more' });
    const gateway = await Gateway.create(config);
    nodes.push(gateway);
    await gateway.listen();
    const { clients, api } = gateway.ports!;
    assert.ok(api !== undefined, 'the compose config has an API port');
    await runWalkthrough(`http://127.0.0.1:${clients}`, `http://127.0.0.1:${api}`);
  });
});
