/**
 * Builds the publishable @herald/client into dist/, which is the package itself (its own package.json): ESM and
 * CommonJS bundles (with @herald/protocol inside, as it is not published), type declarations, one browser file
 * that needs nothing else (global `Herald`), and the herald-ws command. `npm pack packages/client/dist` packs it.
 * Run: node packages/client/scripts/build.ts
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type BuildOptions } from 'esbuild';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
/** Where the package is made by default; tests build into folders of their own. */
const DIST = join(root, 'dist');
/** The browser file's name, also the package's `./browser` export. */
export const BROWSER_FILE = 'herald-client.browser.js';
const TYPES_ENTRY = './types/client/src/index.d.ts';

export async function buildClient(dist = DIST): Promise<string> {
  rmSync(dist, { recursive: true, force: true });
  const common: BuildOptions = { bundle: true, target: 'es2022', logLevel: 'warning', legalComments: 'none' };
  const index = join(root, 'src/index.ts');
  await Promise.all([
    build({ ...common, entryPoints: [index], format: 'esm', platform: 'neutral', outfile: join(dist, 'index.js') }),
    build({ ...common, entryPoints: [index], format: 'cjs', platform: 'neutral', outfile: join(dist, 'index.cjs') }),
    build({ ...common, entryPoints: [index], format: 'iife', globalName: 'Herald', platform: 'browser', minify: true, outfile: join(dist, BROWSER_FILE) }),
    // cli.ts's own #! line is kept by esbuild.
    build({ ...common, entryPoints: [join(root, 'src/cli.ts')], format: 'esm', platform: 'node', outfile: join(dist, 'cli.js') }),
  ]);
  declarations(dist);
  writeManifest(dist);
  copyFileSync(join(root, 'README.md'), join(dist, 'README.md'));
  copyFileSync(join(root, '../../LICENSE'), join(dist, 'LICENSE'));
  return dist;
}

/**
 * tsc's declarations, with the protocol's beside the SDK's and imported by relative path (it is not a dependency);
 * tsc keeps the sources' `.ts` specifiers in declarations, which name the `.js` files of a package.
 */
function declarations(dist: string): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', join(dist, 'types')], { stdio: 'inherit' });
  const protocolIndex = join(dist, 'types/protocol/src/index.js');
  for (const folder of ['client', 'protocol'].map((name) => join(dist, 'types', name, 'src'))) {
    for (const file of readdirSync(folder)) {
      const path = join(folder, file);
      const text = readFileSync(path, 'utf8')
        .replaceAll("'@herald/protocol'", `'./${relative(folder, protocolIndex)}'`)
        .replace(/(from '\.{1,2}\/[^']*)\.ts'/g, "$1.js'");
      writeFileSync(path, text);
    }
  }
}

/** dist/package.json: the source manifest's identity, pointing at the built files, with no dependencies. */
function writeManifest(dist: string): void {
  const source = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  const manifest = {
    name: source.name,
    version: source.version,
    description: source.description,
    license: 'MIT',
    type: 'module',
    engines: { node: '>=22' },
    main: './index.cjs',
    module: './index.js',
    types: TYPES_ENTRY,
    exports: {
      '.': { types: TYPES_ENTRY, import: './index.js', require: './index.cjs' },
      './browser': `./${BROWSER_FILE}`,
      './package.json': './package.json',
    },
    unpkg: `./${BROWSER_FILE}`,
    bin: { 'herald-ws': './cli.js' },
    files: ['index.js', 'index.cjs', BROWSER_FILE, 'cli.js', 'types', 'README.md', 'LICENSE'],
    sideEffects: false,
  };
  writeFileSync(join(dist, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildClient();
