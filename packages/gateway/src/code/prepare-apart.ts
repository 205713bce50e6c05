/**
 * Events' can-connect code prepared in a short-lived child process (prepare-child.ts runs prepare.ts), not in the
 * node: Node's type stripper, once loaded, stays in the process for good, and a node would carry it (and acorn) all its
 * life for one use at start (docs/architecture.md, "Measured costs"). A worker thread would not do: the process keeps
 * what its heap took. What the child refuses is the same ConfigError, naming the event, and the node does not start.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors.ts';
import type { PreparedCode } from './code-runner.ts';
import type { CanConnectConfig } from './prepare.ts';

const CHILD_SCRIPT = fileURLToPath(new URL('./prepare-child.ts', import.meta.url));

/** The child's one line on stdout: every event's prepared code, or the ConfigError that refuses it. */
export type PrepareAnswer = { prepared: [event: string, code: PreparedCode][] } | { configError: string };

/** Every event that has `canConnect`, prepared (prepare.ts's prepareEvents), by a child process. */
export async function prepareApart(events: Record<string, { canConnect?: CanConnectConfig | undefined }>): Promise<Map<string, PreparedCode>> {
  const withCode = Object.entries(events).flatMap(([event, { canConnect }]) => (canConnect ? [[event, { canConnect }] as const] : []));
  const answer = await runChild(JSON.stringify(Object.fromEntries(withCode)));
  if ('configError' in answer) throw new ConfigError(answer.configError);
  return new Map(answer.prepared);
}

/** Runs the child with `input` on its stdin; its stderr is the node's (a crash's stack shows there). */
function runChild(input: string): Promise<PrepareAnswer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD_SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', (error) => reject(new Error(`cannot start the process that prepares the events' code: ${error.message}`)));
    child.on('close', (code, signal) => {
      if (code !== 0) return reject(new Error(`the process that prepares the events' code ended with ${signal ?? `code ${code}`}`));
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as PrepareAnswer);
      } catch (error) {
        reject(new Error(`the process that prepares the events' code answered no JSON: ${(error as Error).message}`));
      }
    });
    child.stdin.end(input);
  });
}
