/**
 * Builds the publishable @herald/server into dist/, which is the package itself (its own package.json): ESM and
 * CommonJS bundles for Node (with @herald/protocol inside, as it is not published) and type declarations.
 * `npm pack packages/server/dist` packs it. Run: node packages/server/scripts/build.ts
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleIndex, declarations, manifest } from '../../protocol/scripts/package.ts';

const root = dirname(dirname(fileURLToPath(import.meta.url)));

export async function buildServer(dist = join(root, 'dist')): Promise<string> {
  await bundleIndex(root, dist, 'node');
  declarations(root, dist, 'server');
  manifest(root, dist, 'server', {});
  return dist;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildServer();
