/**
 * The child process prepare-apart.ts starts: reads the events with code (JSON) from stdin, prepares them
 * (prepare.ts) and writes a PrepareAnswer on stdout. A ConfigError is an answer; anything else ends it with code 1.
 */
import { text } from 'node:stream/consumers';
import { ConfigError } from '../errors.ts';
import type { PrepareAnswer } from './prepare-apart.ts';
import { prepareEvents, type CanConnectConfig } from './prepare.ts';

const events = JSON.parse(await text(process.stdin)) as Record<string, { canConnect: CanConnectConfig }>;
let answer: PrepareAnswer;
try {
  answer = { prepared: [...prepareEvents(events)] };
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  answer = { configError: error.message };
}
process.stdout.write(JSON.stringify(answer));
