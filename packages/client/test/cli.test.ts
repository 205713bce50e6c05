/** herald-ws's own surface: --help lists its commands, options and environment; --table refuses what is not I/D/C. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;
const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, API_TOKEN: 'x' } });

test('--help (also after a command) lists the commands, every option each parses, and the environment it reads', () => {
  for (const args of [['--help'], ['-h'], ['listen', '--help']]) {
    const { status, stdout } = run(...args);
    assert.equal(status, 0, args.join(' '));
    assert.match(stdout, /^usage: herald-ws/);
  }
  const { stdout } = run('--help');
  const source = readFileSync(CLI, 'utf8');
  const options = [...source.matchAll(/^\s+'?([a-z-]+)'?: \{ type: '(string|boolean)'/gm)].map(([, name]) => name!);
  assert.ok(options.length >= 13, options.join(' '));
  for (const option of options) {
    const flag = option === 'reconnect' ? '--no-reconnect' : `--${option}`;
    assert.match(stdout, new RegExp(`${flag}\\b`), flag);
  }
  for (const name of new Set([...source.matchAll(/\benv\.([A-Z_]+)/g)].map(([, n]) => n!))) assert.match(stdout, new RegExp(`\\b${name}\\b`), name);
  for (const command of ['tokens', 'listen']) assert.match(stdout, new RegExp(`^  ${command}\\b`, 'm'));
});

test('no command, or an unknown one: the usage on stderr, exit 2', () => {
  for (const args of [[], ['nope']]) {
    const { status, stderr } = run(...args);
    assert.equal(status, 2);
    assert.match(stderr, /^usage: herald-ws/);
  }
});

test('--table takes INSTANCE/DATABASE/COLLECTION', () => {
  for (const table of ['mongodb/am_bench', 'a/b/c/d', '/b/c']) {
    const { status, stderr } = run('listen', '--url', 'ws://127.0.0.1:9', '--no-reconnect', '--table', table);
    assert.equal(status, 1, table);
    assert.match(stderr, new RegExp(`--table takes INSTANCE/DATABASE/COLLECTION, got ${table}`));
  }
});
