/**
 * What a sandbox worker takes from can-connect code before any of it loads: the ways to act on other processes that
 * Node 24's permission model leaves open. --permission denies files, child processes (process.execve too), worker
 * threads, addons, WASI, the inspector and process.binding; it does not deny signals, which reach any process of the
 * same user (every process, as root): `process.kill(process.ppid, 'SIGTERM')` drained the node, and
 * `process._debugProcess(pid)` sends SIGUSR1, which opens a Node process's inspector to anything that can connect to
 * it, the worker included (the permission model does not cover the network). Nor os.setPriority, which can slow any
 * such process down. So each of these, and the worker's own abort (a core file), throws ERR_ACCESS_DENIED as the
 * permission model's denials do; the properties cannot be written or redefined, and the originals are kept nowhere
 * code can reach (process.binding, which holds the raw ones, is denied by --permission).
 */
import os from 'node:os';
import { syncBuiltinESMExports } from 'node:module';

/** process's methods that signal a process: any pid, a process group (negative), or the worker's own group (0). */
const PROCESS_METHODS = ['kill', '_kill', '_debugProcess', 'abort'] as const;

function denied(name: string): () => never {
  return () => {
    const error = new Error(`Access to this API has been restricted: ${name} (can-connect code may not signal or reprioritise processes)`);
    throw Object.assign(error, { code: 'ERR_ACCESS_DENIED' });
  };
}

function replace(owner: object, key: string, name: string): void {
  Object.defineProperty(owner, key, { value: denied(name), writable: false, configurable: false, enumerable: true });
}

export function lockDown(): void {
  for (const method of PROCESS_METHODS) replace(process, method, `process.${method}`);
  replace(os, 'setPriority', 'os.setPriority');
  // `import { setPriority } from 'node:os'` reads the module's named exports, copied from its object: copy again.
  syncBuiltinESMExports();
}
