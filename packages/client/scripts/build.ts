/**
 * Builds the publishable @herald/client into dist/, which is the package itself (its own package.json): ESM and
 * CommonJS bundles (with @herald/protocol inside, as it is not published), type declarations, one browser file
 * that needs nothing else (global `Herald`), and the herald-ws command. `npm pack packages/client/dist` packs it.
 * Run: node packages/client/scripts/build.ts
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { BUNDLE, bundleIndex, declarations, manifest, typesEntry } from '../../protocol/scripts/package.ts';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
/** Where the package is made by default; tests build into folders of their own. */
const DIST = join(root, 'dist');
/** The browser file's name, also the package's `./browser` export. */
export const BROWSER_FILE = 'herald-client.browser.js';

export async function buildClient(dist = DIST): Promise<string> {
  await bundleIndex(root, dist, 'neutral');
  await Promise.all([
    build({ ...BUNDLE, entryPoints: [join(root, 'src/index.ts')], format: 'iife', globalName: 'Herald', platform: 'browser', minify: true, outfile: join(dist, BROWSER_FILE) }),
    // cli.ts's own #! line is kept by esbuild.
    build({ ...BUNDLE, entryPoints: [join(root, 'src/cli.ts')], format: 'esm', platform: 'node', outfile: join(dist, 'cli.js') }),
  ]);
  declarations(root, dist, 'client');
  const types = typesEntry('client');
  manifest(root, dist, 'client', {
    exports: { '.': { types, import: './index.js', require: './index.cjs' }, './browser': `./${BROWSER_FILE}`, './package.json': './package.json' },
    unpkg: `./${BROWSER_FILE}`,
    bin: { 'herald-ws': './cli.js' },
    files: ['index.js', 'index.cjs', BROWSER_FILE, 'cli.js', 'types', 'README.md', 'LICENSE'],
  });
  return dist;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildClient();
