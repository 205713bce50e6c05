/**
 * Messages between the node and a sandbox worker (sandbox-worker.ts): over the IPC channel of a forked
 * process, or as JSON lines over a container's stdin/stdout. The node sends a batch of calls in one message;
 * the worker runs them one at a time, in order, and answers each as it settles, so the node always knows
 * which call is running. `call` numbers let the node drop late answers from a call it has already given up on.
 */
import { StringDecoder } from 'node:string_decoder';
import type { CanConnectRequest, GetAllQuery } from './code-runner.ts';
import type { Outcome } from './verdict.ts';

export type ToWorker =
  /** A batch of one code: import `file` (cached per file: one file per code version), run main per call, in order. */
  | { type: 'calls'; file: string; calls: WorkerCall[] }
  | { type: 'rows'; call: number; query: number; rows: unknown[] }
  | { type: 'rows'; call: number; query: number; error: string };

export interface WorkerCall {
  call: number;
  request: CanConnectRequest;
}

export type FromWorker =
  | { type: 'ready' }
  | { type: 'getAll'; call: number; query: number; params: GetAllQuery }
  | { type: 'outcome'; call: number; outcome: Outcome };

/** The worker's command-line options, set by the node. */
export const WORKER_OPTIONS = {
  /** JSON lines on stdin/stdout instead of the IPC channel (containers). */
  lines: '--lines',
  /** Where the node writes code files. */
  codeDir: '--code-dir=',
  /** Bare imports in code files resolve as if from this URL: the gateway's node_modules. */
  packages: '--packages=',
} as const;

/** A protocol line starts on a line of its own, whatever the code printed before it without a newline. */
export const encodeLine = (message: ToWorker | FromWorker): string => `\n${JSON.stringify(message)}\n`;

/** Longer lines are dropped: code that prints without end must not grow the node's memory. */
const MAX_LINE = 64 * 1024 * 1024;

/** Splits a byte stream into lines; `onLine` gets each complete, non-empty line. */
export function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  return (chunk) => {
    pending += decoder.write(chunk);
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    if (pending.length > MAX_LINE) pending = '';
    for (const line of lines) if (line.trim() !== '') onLine(line);
  };
}
