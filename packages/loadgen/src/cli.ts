#!/usr/bin/env node
/**
 * wsload: load for a Herald node (or a fleet behind a load balancer), in the manner of autocannon: a progress
 * line while it runs, then latency and per-second tables, the command line and the machine; `--json FILE`
 * writes every figure. Usage: `wsload` with no arguments, or packages/loadgen/README.md.
 */
import { channels } from './commands/channels.ts';
import { churn } from './commands/churn.ts';
import { hold } from './commands/hold.ts';
import { notify } from './commands/notify.ts';
import { parseCommand, USAGE, UsageError, type CommandOptions } from './options.ts';
import { completeReport, formatReport, writeJson, type CommandResult, type RunReport } from './report.ts';

export function runCommand(options: CommandOptions, signal?: AbortSignal): Promise<CommandResult> {
  switch (options.command) {
    case 'fill':
    case 'listen':
      return hold(options, signal);
    case 'churn':
      return churn(options, signal);
    case 'notify':
      return notify(options, signal);
    case 'channels':
      return channels(options, signal);
  }
}

/** Parse, run, print, write the JSON: the whole command line. Answers the report. */
export async function wsload(argv: readonly string[], signal?: AbortSignal): Promise<RunReport> {
  const options = parseCommand(argv);
  const startedAt = new Date();
  const { body, summary } = await runCommand(options, signal);
  const report = completeReport(body, argv, startedAt);
  process.stdout.write(formatReport(report, summary));
  if (options.json) writeJson(options.json, report);
  return report;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  // The first Ctrl-C ends the run early, and it still reports; a second one leaves at once.
  const interrupted = new AbortController();
  process.once('SIGINT', () => {
    interrupted.abort();
    process.once('SIGINT', () => process.exit(130));
  });
  await wsload(argv, interrupted.signal);
  // Sockets closed by terminate() may still be winding down: the run is over.
  process.exit(0);
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    process.stderr.write(`wsload: ${(error as Error).message}\n${error instanceof UsageError ? `${USAGE}\n` : ''}`);
    process.exit(1);
  });
}
