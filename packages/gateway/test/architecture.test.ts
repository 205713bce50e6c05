/**
 * The gateway's import rule, read from the sources: its rooms (a directory of src/, or a file at its top) sit in
 * layers, and a module imports only its own room or a room of a lower layer. So no two rooms import each other, and
 * the ones named below never look up (the hub never imports the transport, wire/ imports no other room, config no
 * broker). The layers are docs/architecture.md's module map, top to bottom.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';

const SRC = resolve(import.meta.dirname, '../src');
const PACKAGES = resolve(import.meta.dirname, '../..');

const LAYERS: readonly (readonly string[])[] = [
  ['main', 'index'],
  ['node'],
  ['http', 'ingest'],
  ['emit'],
  ['transport'],
  ['session'],
  ['webhooks', 'canary', 'status'],
  ['hub'],
  ['broker', 'code'],
  ['events'],
  ['auth'],
  ['data'],
  ['config'],
  ['wire', 'metrics', 'errors', 'node-id'],
];
const LAYER_OF = new Map(LAYERS.flatMap((rooms, layer) => rooms.map((room) => [room, layer] as const)));

/** The one file allowed to reach into ws's (and Node's upgraded socket's) private fields. */
const WS_PRIVATE = 'wire/ws-private.ts';
const PRIVATE_FIELD = /\._(socket|events|extensions|receiver|sender|httpMessage|readyState|closeFrameSent|closeFrameReceived)\b/;

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts'))
    .map((path) => join(dir, path));
}

/** The specifiers a file imports or re-exports, type-only ones included: they are dependencies of its design too. */
function importsOf(file: string): string[] {
  return ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map(({ fileName }) => fileName);
}

/** `hub` for src/hub/hub.ts, `node` for src/node.ts. */
function roomOf(file: string): string {
  const [first, ...rest] = relative(SRC, file).split('/');
  return rest.length === 0 ? first!.replace(/\.ts$/, '') : first!;
}

/** Room -> the rooms it imports, each with one file that does it (for the message). */
function roomGraph(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sourcesUnder(SRC)) {
    const from = roomOf(file);
    const edges = graph.get(from) ?? new Map<string, string>();
    graph.set(from, edges);
    for (const specifier of importsOf(file)) {
      if (!specifier.startsWith('.')) continue;
      const to = roomOf(resolve(dirname(file), specifier));
      if (to !== from && !edges.has(to)) edges.set(to, relative(SRC, file));
    }
  }
  return graph;
}

/** A cycle of rooms, as the path that closes it, or undefined. */
function findCycle(graph: Map<string, Map<string, string>>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (room: string): string[] | undefined => {
    if (state.get(room) === 'done') return undefined;
    if (state.get(room) === 'open') return [...path.slice(path.indexOf(room)), room];
    state.set(room, 'open');
    path.push(room);
    for (const next of graph.get(room)?.keys() ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(room, 'done');
    return undefined;
  };
  for (const room of graph.keys()) {
    const cycle = visit(room);
    if (cycle) return cycle;
  }
  return undefined;
}

describe('the gateway imports down', () => {
  const graph = roomGraph();

  it('every room of src/ has a layer', () => {
    for (const room of graph.keys()) assert.ok(LAYER_OF.has(room), `src/${room} is in no layer: add it to LAYERS and to docs/architecture.md`);
  });

  it('no cycle between rooms', () => {
    const cycle = findCycle(graph);
    assert.equal(cycle, undefined, `rooms import each other: ${cycle?.join(' -> ')}`);
  });

  it('each room imports only rooms of lower layers', () => {
    const upward: string[] = [];
    for (const [from, edges] of graph) {
      for (const [to, file] of edges) {
        if (LAYER_OF.get(to)! <= LAYER_OF.get(from)!) upward.push(`${file} imports ${to}/, which is not below ${from}/`);
      }
    }
    assert.deepEqual(upward, []);
  });

  it('names the directions that matter: the hub never imports the transport, wire/ no other room, config no broker', () => {
    assert.ok(!graph.get('hub')?.has('transport'));
    assert.deepEqual([...(graph.get('wire')?.keys() ?? [])], []);
    assert.ok(!graph.get('config')?.has('broker'));
  });

  it(`only ${WS_PRIVATE} touches ws's private fields`, () => {
    const touching = sourcesUnder(SRC)
      .filter((file) => relative(SRC, file) !== WS_PRIVATE && PRIVATE_FIELD.test(readFileSync(file, 'utf8')))
      .map((file) => relative(SRC, file));
    assert.deepEqual(touching, []);
  });
});

/** File -> the files of its package it imports (relative specifiers), for a cycle between files. */
function fileGraph(dir: string): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sourcesUnder(dir)) {
    const edges = new Map<string, string>();
    for (const specifier of importsOf(file)) if (specifier.startsWith('.')) edges.set(relative(dir, resolve(dirname(file), specifier)), relative(dir, file));
    graph.set(relative(dir, file), edges);
  }
  return graph;
}

describe('the packages import down', () => {
  it('no two files of a package import each other, however far round', () => {
    for (const dir of ['protocol/src', 'client/src', 'gateway/src', 'loadgen/src']) {
      const cycle = findCycle(fileGraph(join(PACKAGES, dir)));
      assert.equal(cycle, undefined, `files of ${dir} import each other: ${cycle?.join(' -> ')}`);
    }
  });

  it('protocol imports nothing (no I/O, no other package); client imports only protocol', () => {
    const outside = (dir: string, allowed: (specifier: string) => boolean): string[] =>
      sourcesUnder(join(PACKAGES, dir)).flatMap((file) =>
        importsOf(file).filter((specifier) => !specifier.startsWith('.') && !allowed(specifier)).map((specifier) => `${relative(PACKAGES, file)}: ${specifier}`),
      );
    assert.deepEqual(outside('protocol/src', () => false), []);
    assert.deepEqual(outside('client/src', (specifier) => specifier === '@herald/protocol' || specifier.startsWith('node:')), []);
  });
});
