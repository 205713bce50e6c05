import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { prepareCode, prepareEvents } from '../../src/code/prepare.ts';
import { ConfigError } from '../../src/errors.ts';
import { code, SOURCES } from './fixtures.ts';

const configError = (pattern: RegExp) => (error: unknown) => error instanceof ConfigError && pattern.test(error.message);

describe('prepareCode', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-prepare-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('strips TypeScript types, keeping positions, and digests the result', () => {
    const prepared = code(SOURCES.indiaOnly);
    assert.doesNotMatch(prepared.source, /interface|: Globals|Promise</);
    assert.equal(prepared.source.length, SOURCES.indiaOnly.length);
    assert.match(prepared.id, /^[0-9a-f]{64}$/);
    assert.equal(code(SOURCES.indiaOnly, 'auto', 'another-event').id, prepared.id);
    assert.notEqual(code(SOURCES.allow).id, prepared.id);
  });

  it('loads a file relative to the config directory', () => {
    writeFileSync(join(dir, 'india.ts'), SOURCES.indiaOnly);
    const prepared = prepareCode('order-updates', { file: join(dir, 'india.ts') });
    assert.equal(prepared.id, code(SOURCES.indiaOnly).id);
    assert.equal(prepared.inIsolate, true);
  });

  it('refuses, naming the event: no main, both or neither of code and file, a missing file, bad syntax', () => {
    assert.throws(() => code('async function mian(g) {}'), configError(/^events\.order-updates\.canConnect: the code must declare a top-level function main/));
    assert.throws(() => code('function outer() { function main() {} }'), configError(/declare a top-level function main/));
    assert.throws(() => prepareCode('e', { code: SOURCES.allow, file: 'x.ts' }), configError(/^events\.e\.canConnect: set exactly one of code and file/));
    assert.throws(() => prepareCode('e', {}), configError(/set exactly one of code and file/));
    assert.throws(() => prepareCode('e', { file: join(dir, 'missing.ts') }), configError(/^events\.e\.canConnect: cannot read .*missing\.ts/));
    assert.throws(() => code('function main( {'), configError(/syntax error/));
    assert.throws(() => code('enum Level { Low } function main() {}'), configError(/enum is not supported.*types are stripped, not compiled/));
  });

  it('accepts main declared as a constant or exported', () => {
    assert.equal(code('const main = async (g) => ({ canConnect: true })').exportsMain, false);
    assert.equal(code('export async function main(g) { return { canConnect: true } }').exportsMain, true);
    assert.equal(code('function check(g) { return { canConnect: true } } export { check as main }').exportsMain, true);
  });

  it('prepares every event that has canConnect, and only those', () => {
    const prepared = prepareEvents({ a: { canConnect: { code: SOURCES.allow } }, b: {} });
    assert.deepEqual([...prepared.keys()], ['a']);
    assert.equal(prepared.get('a')?.event, 'a');
  });
});

describe('isolate-safe or sandbox', () => {
  const isolateSafe = (source: string): boolean => code(source).inIsolate;
  const reasons = (source: string): string[] => code(source).reasons;

  it('code that only reads g and calls g.sys is isolate-safe, whatever ECMAScript built-ins it uses', () => {
    for (const source of [SOURCES.allow, SOURCES.indiaOnly, SOURCES.fromDatabase, SOURCES.throws]) assert.equal(isolateSafe(source), true, source);
    assert.equal(isolateSafe(`
      'use strict';
      const LIMIT = 5, NAME = \`india\`, BELOW = -1;
      const lower = (text) => text.toLowerCase();
      async function main({ req: { auth } }) {
        const seen = new Map(Object.entries(auth.person ?? {}));
        label: for (const [key] of seen) { if (key) break label; }
        try { JSON.parse('{') } catch ({ message }) { void message }
        return { canConnect: lower(String(seen.get('country'))) === NAME && Math.max(LIMIT, BELOW) > 0 };
      }`), true);
  });

  it('reading the clock is isolate-safe: Date.now() and new Date() keep nothing', () => {
    assert.equal(isolateSafe('function main(g) { return { canConnect: Date.now() > 0 && new Date().getUTCHours() < 24 } }'), true);
  });

  it('module syntax goes to the sandbox: import, export, import(), import.meta', () => {
    assert.deepEqual(reasons("import os from 'node:os'; function main() { return { canConnect: os.cpus().length > 0 } }"), ['line 1: module syntax (import or export)']);
    assert.equal(isolateSafe('export function main() { return { canConnect: true } }'), false);
    assert.equal(isolateSafe("async function main() { await import('node:os'); return { canConnect: true } }"), false);
    assert.deepEqual(reasons('function main() { return { canConnect: import.meta.url !== "" } }'), ['line 1: import.meta']);
  });

  it('timers, process, require and the other host names go to the sandbox, even declared by the code', () => {
    for (const name of ['setTimeout', 'setInterval', 'setImmediate', 'queueMicrotask', 'process', 'require', 'globalThis', 'eval', 'Function']) {
      assert.deepEqual(reasons(`function main() { return { canConnect: typeof ${name} === 'function' } }`), [`line 1: uses ${name}`], name);
    }
    assert.deepEqual(reasons('function main() { const process = 1; return { canConnect: process === 1 } }'), ['line 1: uses process']);
  });

  it('host APIs an isolate lacks go to the sandbox: console, fetch, Buffer', () => {
    for (const name of ['console', 'fetch', 'Buffer']) {
      assert.deepEqual(reasons(`function main() { return { canConnect: Boolean(${name}) } }`), [`line 1: uses ${name}, which an isolate does not have`]);
    }
  });

  it('top-level state or work at load goes to the sandbox', () => {
    for (const source of [
      'let calls = 0; function main() { calls++; return { canConnect: true } }',
      'const cache = new Map(); function main() { return { canConnect: cache.size === 0 } }',
      'const pattern = /india/g; function main(g) { return { canConnect: pattern.test(g.req.auth.person.country) } }',
      'var seen = 1; function main() { return { canConnect: true } }',
      'class Gate {} function main() { return { canConnect: true } }',
    ]) {
      assert.equal(isolateSafe(source), false, source);
      assert.match(code(source).reasons[0] ?? '', /^line 1: top-level \w+ \(runs at load or keeps state between calls\)$/);
    }
  });

  it('changing a built-in goes to the sandbox', () => {
    assert.deepEqual(reasons('function main() { Array.prototype.last = 1; delete Math.PI; return { canConnect: true } }'), [
      'line 1: changes the built-in Array',
      'line 1: changes the built-in Math',
    ]);
  });

  it('the config forces either: sandbox for isolate-safe code, isolate for code without module syntax', () => {
    const clock = 'function main() { return { canConnect: Date.now() > 0 } }';
    assert.equal(code(clock, 'sandbox').inIsolate, false);
    assert.equal(code('function main() { console.log(1); return { canConnect: true } }', 'isolate').inIsolate, true);
    assert.throws(() => code("import os from 'node:os'; function main() {}", 'isolate'), configError(/runner 'isolate' cannot run module code/));
  });
});

describe("API Maker's code, as written", () => {
  const lines = (text: string): number => text.split('\n').length;

  it('its typings import and CommonJS export are blanked, keeping length and lines, and leave isolate-safe code isolate-safe', () => {
    const prepared = code(SOURCES.apiMaker);
    assert.deepEqual([prepared.inIsolate, prepared.reasons, prepared.exportsMain], [true, [], false]);
    assert.doesNotMatch(prepared.source, /types|module|exports/);
    assert.equal(prepared.source.length, SOURCES.apiMaker.length);
    assert.equal(lines(prepared.source), lines(SOURCES.apiMaker));
  });

  it('takes every documented form of the import and the export', () => {
    const body = '(g) { return { canConnect: g.req.auth.authAMDB?.country === "India" } }';
    for (const source of [
      `import * as T from 'types';\nasync function main${body}\nmodule.exports = main;`,
      `import { EType } from 'types';\nimport * as db from 'db-interfaces';\nfunction main${body}\nmodule.exports.main = main;`,
      `import type { IAMGlobal } from 'types';\nfunction main${body};\nexports.main = main;`,
      `import { type IAMGlobal } from 'types';\nimport 'types';\nmodule.exports = async function ${body};`,
      `function check${body}\nmodule.exports =\n  check;`,
      `module.exports = async ${body.replace(')', ') =>')};`,
    ]) {
      const prepared = code(source);
      assert.deepEqual([prepared.inIsolate, prepared.reasons], [true, []], source);
      assert.equal(lines(prepared.source), lines(source), source);
    }
  });

  it('code that needs the sandbox for other reasons still goes there, and keeps its other imports', () => {
    const prepared = code("import * as T from 'types';\nimport os from 'node:os';\nfunction main() { return { canConnect: os.cpus().length > 0 } }\nmodule.exports = main;");
    assert.equal(prepared.inIsolate, false);
    assert.deepEqual(prepared.reasons, ['line 2: module syntax (import or export)']);
    assert.match(prepared.source, /import os from 'node:os'/);
  });

  it("refuses, naming the line: a value of API Maker's typings, another CommonJS export", () => {
    assert.throws(
      () => code("import * as T from 'types';\nfunction main() { throw [{ code: T.EStatusCode.UNAUTHORIZED }] }\nmodule.exports = main;"),
      configError(/^events\.order-updates\.canConnect: line 2: T, from API Maker's 'types', is used as a value; its types are stripped, but Herald has no such module$/),
    );
    assert.throws(() => code('function main() {}\nmodule.exports.handler = main;'), configError(/line 2: module\.exports\.handler is not an export Herald reads/));
    assert.throws(() => code('function main() {}\nmodule.exports = { main };'), configError(/line 2: module\.exports must be main, a function, or a function's name/));
  });
});

describe('an async main that never awaits runs as a plain function', () => {
  const runnable = (source: string): string => code(source).source;

  it('blanks the keyword, keeping every position and line', () => {
    const source = 'async function main(g) {\n  return { canConnect: true };\n}';
    assert.equal(runnable(source), '      function main(g) {\n  return { canConnect: true };\n}');
    assert.equal(runnable('const main = async (g) => ({ canConnect: true });'), 'const main =       (g) => ({ canConnect: true });');
  });

  it('keeps async where main awaits, or where main is named again (a caller may expect the promise)', () => {
    for (const source of [
      'async function main(g) { const rows = await g.sys.db.getAll({}); return { canConnect: rows.length > 0 } }',
      'async function main(g) { for await (const x of []) {} return { canConnect: true } }',
      'async function main(g) { return g.again ? main({}) : { canConnect: true } }',
      'async function helper() {} function main(g) { return { canConnect: true } }',
    ]) {
      assert.equal(runnable(source), source);
    }
    // An await inside a nested function is that function's own.
    assert.match(runnable('async function main(g) { const f = async () => await 1; return { canConnect: true } }'), /^ {6}function main/);
  });
});
