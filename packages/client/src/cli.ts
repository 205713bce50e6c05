#!/usr/bin/env node
/**
 * herald-ws: a tiny command-line client for the walk-through and for poking at a node. USAGE below is its manual
 * (`herald-ws --help`).
 */
import { parseArgs } from 'node:util';
import { EventType, SCHEMA_POST_BULK_INSERT, tokenPath, type Criteria } from '@herald/protocol';
import { HeraldClient, HeraldError, type OnEventInput } from './client.ts';

const env = process.env;

const USAGE = `usage: herald-ws <command> [options]      herald-ws --help

Commands:
  tokens    get an API user token and a person token; prints \`export API_TOKEN=... PERSON_TOKEN=...\` for a shell to eval
    --http URL           the node's HTTP address (default: $HERALD_HTTP_URL, else http://localhost:38246)
    --user-path NAME     the config's userPath (default bench)
    --user U:P           the API user (default bench:bench)
    --person U:P         the person, by their token generator's columns (default NICK:WAHLBERG)
    --generator NAME     the person's token generator (default customers)

  listen    connect, register, and print each frame as a JSON line; after a close that is not final it connects
            and registers again (reported on stderr)
    --url URL            the node's WebSocket address (default: $HERALD_WS_URL, else ws://localhost:38246)
    --api-token T        the API user token (default: $API_TOKEN); required
    --person-token P     the person token (default: $PERSON_TOKEN)
    --register EVENT     register a CUSTOM_WS_EVENTS event; repeatable
    --table I/D/C        register the INSTANCES event (${SCHEMA_POST_BULK_INSERT}) of instance I, database D,
                         collection C: a notification per row saved through the table API; repeatable
    --criteria F=V       a criteria field and value for every entry registered; repeatable
    --select A,B         keep only these fields of eventData
    --count N            exit after N notifications
    --no-reconnect       exit at the first close instead

Environment: HERALD_HTTP_URL, HERALD_WS_URL, API_TOKEN, PERSON_TOKEN as above. For wss:// with a certificate
Node does not trust (Traefik's self-signed default), NODE_EXTRA_CA_CERTS=<its certificate file>.`;

async function token(http: string, userPath: string, body: object): Promise<string> {
  const response = await fetch(`${http}${tokenPath(userPath)}`, {
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
      http: { type: 'string', default: env.HERALD_HTTP_URL || 'http://localhost:38246' },
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

/** --table I/D/C: the INSTANCES entry of that collection. */
function tableEntry(table: string): OnEventInput {
  const [instance, database, collection, ...rest] = table.split('/');
  if (!instance || !database || !collection || rest.length > 0) throw new Error(`--table takes INSTANCE/DATABASE/COLLECTION, got ${table}`);
  return { eventType: EventType.INSTANCES, apiName: SCHEMA_POST_BULK_INSERT, instance, database, collection };
}

async function listen(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    allowNegative: true,
    options: {
      url: { type: 'string', default: env.HERALD_WS_URL || 'ws://localhost:38246' },
      'api-token': { type: 'string', default: env.API_TOKEN || undefined },
      'person-token': { type: 'string', default: env.PERSON_TOKEN || undefined },
      register: { type: 'string', multiple: true, default: [] },
      table: { type: 'string', multiple: true, default: [] },
      criteria: { type: 'string', multiple: true, default: [] },
      select: { type: 'string' },
      count: { type: 'string' },
      reconnect: { type: 'boolean', default: true },
    },
  });
  if (!values['api-token']) throw new Error('--api-token is required');
  // Checked before connecting: a mistyped entry is the caller's to fix, not the node's to refuse.
  const criteria = criteriaOf(values.criteria);
  const select = values.select?.split(',');
  const entries: OnEventInput[] = [...values.register.map((apiName) => ({ apiName })), ...values.table.map(tableEntry)];
  const onEvents = entries.map((entry) => ({
    ...entry,
    ...(criteria && { condition: { conditionType: 'RESPONSE' as const, criteria } }),
    ...(select && { select }),
  }));
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
  if (onEvents.length > 0) print({ type: 'REGISTER', response: await client.register(onEvents) });
  const { code, reason } = await client.closed;
  if (seen < limit) process.stderr.write(`closed: ${code} ${reason}\n`);
}

const [command, ...rest] = process.argv.slice(2);
if (command === '--help' || command === '-h' || rest.includes('--help') || rest.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
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
