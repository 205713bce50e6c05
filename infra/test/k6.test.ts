/**
 * The k6 scripts. No k6 binary runs here, so each is only parsed: `node --check` on an ES module parses it
 * without resolving its imports (k6/ws, k6/http, ... exist only inside k6). Plus what every script must
 * share: tokens from setup() and the URLs from k6/lib.js.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

const dir = resolve(import.meta.dirname, '../../k6');
const scripts = ['connect-register.js', 'churn.js', 'notify.js'];

function nodeCheck(file: string) {
  return spawnSync(process.execPath, ['--check', file], { encoding: 'utf8', timeout: 30_000 });
}

test('k6/ has the three scenarios, their shared lib and a README', () => {
  const files = readdirSync(dir);
  for (const file of [...scripts, 'lib.js', 'README.md']) assert.ok(files.includes(file), `k6/${file}`);
});

test('every k6 script parses as an ES module', () => {
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.js'))) {
    const out = nodeCheck(join(dir, file));
    assert.equal(out.status, 0, `k6/${file}: ${out.stderr}`);
  }
});

test('the parse check fails on a broken script (so it can catch one)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'herald-k6-'));
  try {
    // .mjs: an ES module wherever it sits, like k6/*.js under the root package.json's "type": "module".
    const broken = join(tmp, 'broken.mjs');
    writeFileSync(broken, `${readFileSync(join(dir, 'churn.js'), 'utf8')}\nexport function oops( {\n`);
    assert.notEqual(nodeCheck(broken).status, 0);
    const fine = join(tmp, 'fine.mjs');
    writeFileSync(fine, readFileSync(join(dir, 'churn.js'), 'utf8'));
    assert.equal(nodeCheck(fine).status, 0, 'imports of k6 modules are not resolved by --check');
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test('each scenario takes tokens in setup() from k6/lib.js and declares its options', () => {
  const lib = readFileSync(join(dir, 'lib.js'), 'utf8');
  assert.match(lib, /__ENV\.BASE_URL \|\| 'http:\/\/localhost:38246'/);
  assert.match(lib, /__ENV\.WS_URL/);
  assert.match(lib, /packages\/gateway\/data\/customers\.json/);
  for (const file of scripts) {
    const text = readFileSync(join(dir, file), 'utf8');
    assert.match(text, /from '\.\/lib\.js'/, file);
    assert.match(text, /export function setup\(\) \{\s*return fetchTokens\(\);\s*\}/, file);
    assert.match(text, /export const options = \{/, file);
    assert.match(text, /from 'k6\/ws'/, file);
  }
  assert.match(readFileSync(join(dir, 'notify.js'), 'utf8'), /new Trend\('herald_delivery_ms'/);
});
