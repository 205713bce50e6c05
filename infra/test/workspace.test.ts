/** The workspace as a user meets it: no dependency cycle between its packages (pnpm warns of one on every install), a license. */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { read, readYaml, root } from './support.ts';

interface Manifest {
  name: string;
  license?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

test('no cycle among the workspace packages\' dependencies, devDependencies included', () => {
  const globs = readYaml<{ packages: string[] }>('pnpm-workspace.yaml').packages;
  const dirs = globs.flatMap((glob) =>
    glob.endsWith('/*') ? readdirSync(join(root, glob.slice(0, -2))).map((dir) => join(glob.slice(0, -2), dir)) : [glob],
  );
  const manifests = dirs
    .filter((dir) => existsSync(join(root, dir, 'package.json')))
    .map((dir) => JSON.parse(read(join(dir, 'package.json'))) as Manifest);
  const names = new Set(manifests.map((m) => m.name));
  const edges = new Map(
    manifests.map((m) => [m.name, Object.keys({ ...m.dependencies, ...m.devDependencies }).filter((dep) => names.has(dep))]),
  );
  assert.ok(edges.size >= 4, [...edges.keys()].join(' '));
  const visiting: string[] = [];
  const done = new Set<string>();
  const visit = (name: string): void => {
    assert.ok(!visiting.includes(name), `a cycle: ${[...visiting.slice(visiting.indexOf(name)), name].join(' -> ')}`);
    if (done.has(name)) return;
    visiting.push(name);
    for (const dep of edges.get(name) ?? []) visit(dep);
    visiting.pop();
    done.add(name);
  };
  for (const name of edges.keys()) visit(name);
});

test('LICENSE: MIT, The Herald authors; package.json says so', () => {
  const license = read('LICENSE');
  assert.match(license, /^MIT License\n\nCopyright \(c\) 2026 The Herald authors\n/);
  assert.equal((JSON.parse(read('package.json')) as Manifest).license, 'MIT');
});
