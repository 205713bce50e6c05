/**
 * The steps the published packages share (@herald/client, @herald/server: their scripts/build.ts). Each is built into
 * a dist/ that is the package itself, with @herald/protocol bundled in (it is not published): ESM and CommonJS
 * bundles, type declarations with the protocol's beside its own, and a manifest pointing at them.
 */
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { build, type BuildOptions } from 'esbuild';

export const BUNDLE: BuildOptions = { bundle: true, target: 'es2022', logLevel: 'warning', legalComments: 'none' };

/** Where a package's declarations start, as its manifest names them. */
export const typesEntry = (folder: string): string => `./types/${folder}/src/index.d.ts`;

/** dist/ emptied, and src/index.ts bundled into it as index.js (ESM) and index.cjs (CommonJS). */
export async function bundleIndex(root: string, dist: string, platform: BuildOptions['platform']): Promise<void> {
  rmSync(dist, { recursive: true, force: true });
  const index = join(root, 'src/index.ts');
  await Promise.all([
    build({ ...BUNDLE, entryPoints: [index], format: 'esm', platform, outfile: join(dist, 'index.js') }),
    build({ ...BUNDLE, entryPoints: [index], format: 'cjs', platform, outfile: join(dist, 'index.cjs') }),
  ]);
}

/**
 * tsc's declarations (the package's tsconfig.build.json), with the protocol's beside the package's and imported by
 * relative path; tsc keeps the sources' `.ts` specifiers in declarations, which name the `.js` files of a package.
 */
export function declarations(root: string, dist: string, folder: string): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', join(dist, 'types')], { stdio: 'inherit' });
  const protocolIndex = join(dist, 'types/protocol/src/index.js');
  for (const types of [folder, 'protocol'].map((name) => join(dist, 'types', name, 'src'))) {
    for (const file of readdirSync(types)) {
      const path = join(types, file);
      const text = readFileSync(path, 'utf8')
        .replaceAll("'@herald/protocol'", `'./${relative(types, protocolIndex)}'`)
        .replace(/(from '\.{1,2}\/[^']*)\.ts'/g, "$1.js'");
      writeFileSync(path, text);
    }
  }
}

/**
 * dist/package.json (the source manifest's identity, pointing at the built files, with no dependencies), the
 * package's README and the project's LICENSE. `more` adds to or replaces the manifest's fields.
 */
export function manifest(root: string, dist: string, folder: string, more: Record<string, unknown>): void {
  const source = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  const types = typesEntry(folder);
  const written = {
    name: source.name,
    version: source.version,
    description: source.description,
    license: 'MIT',
    type: 'module',
    engines: { node: '>=22' },
    main: './index.cjs',
    module: './index.js',
    types,
    exports: { '.': { types, import: './index.js', require: './index.cjs' }, './package.json': './package.json' },
    files: ['index.js', 'index.cjs', 'types', 'README.md', 'LICENSE'],
    sideEffects: false,
    ...more,
  };
  writeFileSync(join(dist, 'package.json'), `${JSON.stringify(written, null, 2)}\n`);
  copyFileSync(join(root, 'README.md'), join(dist, 'README.md'));
  copyFileSync(join(root, '../../LICENSE'), join(dist, 'LICENSE'));
}

/**
 * The package built in `dist`, as a stranger gets it: packed with `npm pack`, installed from the tarball into a new
 * project (ESM) with `npm install --offline` (it has no dependencies). Answers the project's folder.
 */
export async function installedFromTarball(dist: string): Promise<string> {
  const run = promisify(execFile);
  const packs = mkdtempSync(join(tmpdir(), 'herald-pack-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packs], { cwd: dist });
  const [{ filename }] = JSON.parse(stdout) as [{ filename: string }];
  const project = mkdtempSync(join(tmpdir(), 'herald-consumer-'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(packs, filename)], { cwd: project });
  return project;
}
