#!/usr/bin/env node
/**
 * herald-ws: a tiny command-line client for the walk-through and for poking at a node.
 *
 *   herald-ws tokens [--http http://localhost:38246] [--user bench:bench] [--person NICK:WAHLBERG]
 *       prints `export API_TOKEN=... PERSON_TOKEN=...` lines for a shell to eval
 *   herald-ws listen [--url ws://localhost:38246] --api-token T [--person-token P]
 *       --register <event> [--criteria field=value ...] [--select a,b] [--count N] [--no-reconnect]
 *       connects, registers, and prints each frame as a JSON line; exits after N notifications.
 *       After a close that is not final it reconnects and registers again (reported on stderr);
 *       with --no-reconnect it exits at the first close instead.
 */
import { parseArgs } from 'node:util';
import type { Criteria } from '@herald/protocol';
import { HeraldClient, HeraldError } from './client.ts';

const USAGE = 'usage: herald-ws tokens [--http URL] [--user U:P] [--person U:P] | herald-ws listen --api-token T --register EVENT [--no-reconnect] [...]';

async function token(http: string, userPath: string, body: object): Promise<string> {
  const response = await fetch(`${http}/api/system-api/${userPath}/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const envelope = (await response.json()) as { data?: { token: string }; errors?: { message: string }[] };
  if (!envelope.data) throw new Error(`token refused: ${envelope.errors?.map((e) => e.message).join('; ')}`);
  return envelope.data.token;
}

function pair(value: string, flag: string): [string, string] {
  const at = value.indexOf(':');
  if (at < 1) throw new Error(`${flag} takes NAME:PASSWORD`);
  return [value.slice(0, at), value.slice(at + 1)];
}

async function tokens(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      http: { type: 'string', default: 'http://localhost:38246' },
      'user-path': { type: 'string', default: 'bench' },
      user: { type: 'string', default: 'bench:bench' },
      person: { type: 'string', default: 'NICK:WAHLBERG' },
      generator: { type: 'string', default: 'customers' },
    },
  });
  const [u, p] = pair(values.user, '--user');
  const [pu, pp] = pair(values.person, '--person');
  const api = await token(values.http, values['user-path'], { authTokenType: 'AM', authTokenAM: { u, p } });
  const person = await token(values.http, values['user-path'], {
    authTokenType: 'AM_DB',
    authTokenAMDB: { generator: values.generator, u: pu, p: pp },
  });
  process.stdout.write(`export API_TOKEN=${api}\nexport PERSON_TOKEN=${person}\n`);
}

function criteriaOf(pairs: string[]): Criteria | undefined {
  if (pairs.length === 0) return undefined;
  return Object.fromEntries(pairs.map((entry) => pair(entry.replace('=', ':'), '--criteria')));
}

async function listen(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    allowNegative: true,
    options: {
      url: { type: 'string', default: 'ws://localhost:38246' },
      'api-token': { type: 'string' },
      'person-token': { type: 'string' },
      register: { type: 'string', multiple: true, default: [] },
      criteria: { type: 'string', multiple: true, default: [] },
      select: { type: 'string' },
      count: { type: 'string' },
      reconnect: { type: 'boolean', default: true },
    },
  });
  if (!values['api-token']) throw new Error('--api-token is required');
  const client = await HeraldClient.connect({
    url: values.url,
    apiToken: values['api-token'],
    personToken: values['person-token'],
    maxAttempts: values.reconnect ? Infinity : 0,
  });
  // stdout stays one JSON frame per line; the state of the connection goes to stderr.
  client.on('disconnected', ({ code, reason, willReconnect, delayMs }) => {
    if (willReconnect) process.stderr.write(`disconnected: ${code} ${reason}; reconnecting in ${delayMs} ms\n`);
  });
  client.on('reconnected', ({ registered, refused }) => {
    process.stderr.write(`reconnected: ${registered.length} registered again, ${refused.length} refused\n`);
  });
  const print = (frame: object) => process.stdout.write(`${JSON.stringify(frame)}\n`);
  print({ type: 'CONNECTED' });
  const limit = values.count === undefined ? Infinity : Number(values.count);
  let seen = 0;
  client.onNotification((response) => {
    print({ type: 'NOTIFICATION', response });
    if (++seen >= limit) void client.close();
  });
  const criteria = criteriaOf(values.criteria);
  const select = values.select?.split(',');
  const onEvents = values.register.map((apiName) => ({
    apiName,
    ...(criteria && { condition: { conditionType: 'RESPONSE' as const, criteria } }),
    ...(select && { select }),
  }));
  if (onEvents.length > 0) print({ type: 'REGISTER', response: await client.register(onEvents) });
  const { code, reason } = await client.closed;
  if (seen < limit) process.stderr.write(`closed: ${code} ${reason}\n`);
}

const [command, ...rest] = process.argv.slice(2);
const run = command === 'tokens' ? tokens : command === 'listen' ? listen : undefined;
if (!run) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}
run(rest).catch((error: unknown) => {
  const detail = error instanceof HeraldError ? ` ${JSON.stringify(error.errors)}` : '';
  process.stderr.write(`herald-ws: ${(error as Error).message}${detail}\n`);
  process.exit(1);
});
