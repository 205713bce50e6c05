/**
 * Sandbox workers as child processes of the node, locked down by Node's permission model (--permission,
 * stable in Node 24): the worker may read only its own scripts, the code files, and the node_modules
 * directories the gateway's packages come from; it may not write files, start processes or worker
 * threads, load addons or use WASI; its heap is capped by --max-old-space-size; it gets no environment
 * (the node's secrets stay in the node); it runs in a session and process group of its own, and the worker denies
 * code the signals and priorities the permission model leaves open (sandbox-lockdown.ts). Node 24's permission model
 * does not cover the network, and memory outside the heap (Buffers) is not capped: a container (sandbox-docker.ts)
 * bounds both.
 */
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { RunnerLimits } from './code-runner.ts';
import { WORKER_OPTIONS } from './sandbox-protocol.ts';
import { codeDirName, SandboxRunner, type WorkerEvents, type WorkerHandle, type WorkerLauncher } from './sandbox.ts';

export const WORKER_SCRIPT = fileURLToPath(new URL('./sandbox-worker.ts', import.meta.url));
const GATEWAY_DIR = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Where code files' bare imports (`import x from 'lodash'`) resolve from: packages/gateway/node_modules,
 * then each ancestor's node_modules, as Node's own lookup goes. Under pnpm the packages' files live in
 * the workspace root's node_modules/.pnpm, which this list includes.
 */
export function packageDirs(from: string = GATEWAY_DIR): string[] {
  const dirs: string[] = [];
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'node_modules'))) dirs.push(join(dir, 'node_modules'));
    if (dirname(dir) === dir) return dirs;
  }
}

/** A module URL inside the gateway's node_modules that bare imports are resolved against. */
export const PACKAGES_URL = pathToFileURL(join(GATEWAY_DIR, 'node_modules', 'herald-can-connect.mjs')).href;

/** The worker's command line: options for sandbox-worker.ts, shared with the container launcher. */
export const workerArgs = (codeDir: string): string[] => [
  `${WORKER_OPTIONS.codeDir}${codeDir}`,
  `${WORKER_OPTIONS.packages}${PACKAGES_URL}`,
];

/** Node's flags for a worker: the permission model, reading only what it needs, and the heap limit. */
export const workerNodeFlags = (codeDir: string, memoryMb: number): string[] => [
  '--permission',
  ...[dirname(WORKER_SCRIPT), codeDir, ...packageDirs()].map((dir) => `--allow-fs-read=${dir}`),
  `--max-old-space-size=${memoryMb}`,
];

/** What is kept of a worker's stderr: enough to see V8's "heap out of memory" when it dies. */
const STDERR_TAIL = 4096;

export class ProcessLauncher implements WorkerLauncher {
  readonly where = 'sandbox worker process';
  readonly #codeDir: string;
  readonly #memoryMb: number;

  constructor(codeDir: string, memoryMb: number) {
    this.#codeDir = codeDir;
    this.#memoryMb = memoryMb;
  }

  async start(events: WorkerEvents): Promise<WorkerHandle> {
    const child = fork(WORKER_SCRIPT, workerArgs(this.#codeDir), {
      execArgv: workerNodeFlags(this.#codeDir, this.#memoryMb),
      env: process.env.TZ === undefined ? {} : { TZ: process.env.TZ },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      serialization: 'json',
      // A session and process group of its own: a signal to "my group" (kill(0), a terminal's Ctrl-C) is the worker's
      // alone. Defence in depth: the worker denies code every signal (sandbox-lockdown.ts).
      detached: true,
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL);
    });
    child.on('message', (message) => events.message(message));
    // 'close' rather than 'exit': stderr is read to its end, so a dying V8's last words are there.
    child.on('close', (code, signal) => {
      const lastLine = stderr.trim().split('\n').at(-1) ?? '';
      events.exit(`${signal ?? `code ${code}`}${lastLine ? `: ${lastLine}` : ''}`, /heap out of memory/i.test(stderr));
    });
    // A failed spawn or a send to a worker that just died: its close event tells the slot.
    child.on('error', () => {});
    return {
      send: (message) => {
        if (child.connected) child.send(message);
      },
      kill: () => child.kill('SIGKILL'),
    };
  }
}

/** The process sandbox: `size` workers, each code version written once to a private directory. */
export function processSandbox(limits: RunnerLimits): SandboxRunner {
  const codeDir = codeDirName();
  return new SandboxRunner(new ProcessLauncher(codeDir, limits.memoryMb), limits, codeDir);
}
