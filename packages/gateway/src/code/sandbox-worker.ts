/**
 * A sandbox worker: runs can-connect code that is not isolate-safe, as plain Node would, one call at a time (a batch's
 * calls in order, each answered as it settles), in a process the node started with Node's permission model
 * locked down (sandbox-process.ts) or in a container (sandbox-docker.ts). The node enforces the time limit by
 * killing it; the heap limit is --max-old-space-size. Code modules are imported once per version and keep their
 * state between calls. Before any code loads, the worker takes from it what the permission model leaves open to act on
 * other processes: signals and priorities (sandbox-lockdown.ts).
 *
 * Options: --code-dir=<dir> (where the node writes code files), --packages=<url> (bare imports in code
 * files resolve as if from there: the gateway's node_modules), --lines (JSON lines on stdin/stdout
 * instead of the IPC channel).
 */
import { Console } from 'node:console';
import { registerHooks } from 'node:module';
import { pathToFileURL } from 'node:url';
import { lockDown } from './sandbox-lockdown.ts';
import { encodeLine, lineSplitter, WORKER_OPTIONS, type FromWorker, type ToWorker, type WorkerCall } from './sandbox-protocol.ts';
import { outcomeOf } from './verdict.ts';

lockDown();

const option = (prefix: string): string | undefined =>
  process.argv.find((arg) => arg.startsWith(prefix))?.slice(prefix.length);

interface Channel {
  send(message: FromWorker): void;
  listen(handler: (message: unknown) => void): void;
}

function ipcChannel(): Channel {
  // The node is gone: nothing left to answer to.
  process.on('disconnect', () => process.exit(0));
  return {
    send: (message) => process.send?.(message),
    listen: (handler) => process.on('message', handler),
  };
}

/** stdout carries the protocol, so the code's console output goes to stderr. */
function lineChannel(): Channel {
  const write = process.stdout.write.bind(process.stdout);
  globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr });
  process.stdin.on('end', () => process.exit(0));
  return {
    send: (message) => write(encodeLine(message)),
    listen: (handler) => {
      process.stdin.on(
        'data',
        lineSplitter((line) => {
          try {
            handler(JSON.parse(line));
          } catch {
            // Not a protocol line: nothing to answer.
          }
        }),
      );
    },
  };
}

/** Bare imports in code files resolve from the gateway's node_modules, not from the code directory. */
function resolveFromPackages(codeDir: string, packagesUrl: string): void {
  const codeDirUrl = pathToFileURL(`${codeDir}/`).href;
  const isBare = (specifier: string): boolean => !/^(\.{0,2}\/|[a-z][a-z0-9+.-]*:)/i.test(specifier);
  registerHooks({
    resolve: (specifier, context, nextResolve) =>
      isBare(specifier) && context.parentURL?.startsWith(codeDirUrl)
        ? nextResolve(specifier, { ...context, parentURL: packagesUrl })
        : nextResolve(specifier, context),
  });
}

const channel = process.argv.includes(WORKER_OPTIONS.lines) ? lineChannel() : ipcChannel();
const codeDir = option(WORKER_OPTIONS.codeDir);
const packagesUrl = option(WORKER_OPTIONS.packages);
if (codeDir !== undefined && packagesUrl !== undefined) resolveFromPackages(codeDir, packagesUrl);

const queries = new Map<number, { resolve(rows: unknown[]): void; reject(error: Error): void }>();
let lastQuery = 0;

function getAll(call: number, params: unknown): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const query = ++lastQuery;
    queries.set(query, { resolve, reject });
    channel.send({ type: 'getAll', call, query, params } as FromWorker);
  });
}

/** Each code file's main, imported once: a file is one code version. */
const mains = new Map<string, Promise<unknown>>();

function mainOf(file: string): Promise<unknown> {
  let main = mains.get(file);
  if (main === undefined) {
    main = import(pathToFileURL(file).href).then(
      (module: { main?: unknown }) => module.main,
      (error: unknown) => {
        mains.delete(file); // tried again next call, as Node would
        // A module that fails to load (syntax, a missing package, a top-level throw) is the code throwing.
        return () => {
          throw error;
        };
      },
    );
    mains.set(file, main);
  }
  return main;
}

async function run(file: string, { call, request }: WorkerCall): Promise<void> {
  const main = await mainOf(file);
  const g = { req: request, sys: { db: { getAll: (params: unknown) => getAll(call, params) } } };
  channel.send({ type: 'outcome', call, outcome: await outcomeOf(main, g) });
}

/** One call at a time, as the node counts on: a batch that arrives while another runs waits for it. */
let running = Promise.resolve();

async function runAll(file: string, calls: WorkerCall[]): Promise<void> {
  for (const call of calls) await run(file, call);
}

channel.listen((message) => {
  const received = message as ToWorker;
  if (received.type === 'calls') running = running.then(() => runAll(received.file, received.calls));
  if (received.type !== 'rows') return;
  const waiting = queries.get(received.query);
  queries.delete(received.query);
  if ('error' in received) waiting?.reject(new Error(received.error));
  else waiting?.resolve(received.rows);
});
channel.send({ type: 'ready' });
