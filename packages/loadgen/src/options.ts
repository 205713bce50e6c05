/** The command line of wsload, turned into checked options for each command. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { DEFAULT_MAX_DELAY_MS, DEFAULT_MIN_DELAY_MS } from '@herald/client';
import { SOURCE_ADDRESSES } from './source-addresses.ts';
import type { ClientKind } from './load-client.ts';
import type { ReconnectPolicy } from './reconnect.ts';
import type { CriteriaMode, TokenMode } from './roster.ts';
import type { TokenApi } from './tokens.ts';
import { CLIENT_KINDS } from './ws-client.ts';

export const USAGE = `usage:
  wsload fill   <ws-url> --clients N [--first I] [--rate R] [--max-pending P] [--register EVENT [--per-client]] [--hold S] [--http URL]
  wsload listen <ws-url> --clients N [--rate R] [--max-pending P] [--register EVENT [--per-client]] [--hold S] [--http URL]
  wsload churn  <ws-url> [-c 100] [-d 10] [-w 0] [--register EVENT [--per-client]] [--tokens api|both]
  wsload notify <http-url> [--clients 1000] [--connect-rate 2000] [-c 100] [-d 10] [-R RATE] [-w 0] [--grace 5]
                [--broadcast] [--register EVENT] [--ws URL] [--await-return S] [--resume] [--keep-within MS]
                [--idempotent] [--batch N]
  wsload channels <http-url> [--clients 1500] [--channels 5] [--senders 0.5] [--send-rate 0.7] [--history 80]
                [--session 40] [--connect-rate 500] [-w 5] [-d 30] [--grace 3] [--register announcements-kept] [--ws URL]
  channels: clients on --channels routes (criteria recipientId = i mod channels) of an event with history; the
          --senders share of them each emit to their own channel --send-rate times a second over an HTTP connection of
          their own; each client joins with REGISTER since --history notifications behind its channel's latest known
          position (0: no since), and leaves and joins again after about --session seconds (0: stays); -w seconds of
          that before the -d seconds measured
  notify --idempotent: each emit with an Idempotency-Key of its own; --batch N: N emits a call (emit-events-ws), each
          to the next listener
  notify --keep-within MS: the emitter holds its calls while what its answered calls promised and the listeners have
          not read would take them longer than MS to read at their pace of the last second (a back end that paces itself)

  dropped clients come back (fill, listen, notify): [--reconnect] each after a random wait of
          [--reconnect-min ${DEFAULT_MIN_DELAY_MS / 1000}] to [--reconnect-max ${DEFAULT_MAX_DELAY_MS / 1000}] seconds, as the client SDK does; notify --await-return S
          (implies --reconnect) waits up to S seconds for listeners to be dropped and all back before emitting;
          notify --resume (implies --reconnect): an event with history is resumed from each client's last position,
          as the SDK does (REGISTER since), repeats are dropped and counted

  <ws-url> may be several, separated by commas (a fleet's nodes): client i connects to the (i mod n)-th
  common: [--tokens api|both] [--criteria person|client|none] [--json FILE] [--quiet] [--timeout S]
          [--client raw|ws] raw (default): plain TCP clients that read frames in place; ws: clients on the \`ws\`
          library (masked frames, a close handshake, every message parsed as JSON), as Node back ends and browsers
          [--read-rate N] ws clients: each reads at most N messages a second, pausing its socket between them (a
          client slower than the node; default: as fast as it can)
          [--user-path bench] [--api-user bench] [--api-password bench] [--generator customers] [--people FILE]
  fill, listen: [--max-pending P] at most P clients connecting (or waiting to try again) at once: past it the
          fill slows to what the nodes take rather than pile up attempts that time out (default: no cap)
  many clients (fill, listen, notify): [--per-worker 19000] clients per process, beyond it worker processes;
          [--per-address 5000] clients per source address (127.0.0.2, .3, ...) once there are more than that
          (1000 by default with --reconnect: each client binds its address a second time)`;

/** --timeout when none is given: a client's start to ready, an emit's write to answer. */
export const DEFAULT_TIMEOUT_S = 30;

/** A command line wsload cannot run: the message, then the usage. */
export class UsageError extends Error {}

export interface CommonOptions {
  json: string | undefined;
  quiet: boolean;
  timeoutMs: number;
  tokenApi: TokenApi;
  peopleFile: string | undefined;
  /** What each client registers (undefined: nothing), with what criteria, with which tokens. */
  event: string | undefined;
  criteria: CriteriaMode;
  tokens: TokenMode;
  /** raw or ws (ws-client.ts). */
  client: ClientKind;
  /** --read-rate: each ws client reads at most this many messages a second (undefined: as fast as it can). */
  readRate: number | undefined;
}

export interface HoldOptions extends CommonOptions {
  command: 'fill' | 'listen';
  wsUrl: string;
  clients: number;
  /** Index of the first client (its identity: person, per-client recipientId), so fills can add up. */
  first: number;
  rate: number;
  /** Clients connecting or waiting to try again at most at once, over all workers (--max-pending); undefined: no cap. */
  maxPending: number | undefined;
  holdS: number;
  perWorker: number;
  /** Clients per source address; 0 when they all fit on the kernel's choice. */
  perAddress: number;
  reconnect: ReconnectPolicy | undefined;
}

export interface ChurnOptions extends CommonOptions {
  command: 'churn';
  wsUrl: string;
  connections: number;
  durationS: number;
  warmupS: number;
}

export interface NotifyOptions extends CommonOptions {
  command: 'notify';
  wsUrl: string;
  clients: number;
  /** Listeners connected per second before the emitter starts. */
  connectRate: number;
  connections: number;
  durationS: number;
  rate: number | undefined;
  broadcast: boolean;
  /** Each emit with an Idempotency-Key of its own. */
  idempotent: boolean;
  /** Emits per call (more than 1: emit-events-ws). */
  batch: number;
  warmupS: number;
  /** How long to wait after the emitter for notifications still on their way. */
  graceS: number;
  perWorker: number;
  /** Clients per source address; 0 when they all fit on the kernel's choice. */
  perAddress: number;
  reconnect: ReconnectPolicy | undefined;
  /** Before emitting, wait up to this long for listeners to be dropped and every one of them back; 0: do not. */
  awaitReturnS: number;
  /** Dropped listeners resume their event's history (since) and drop repeats. */
  resume: boolean;
  /** Hold calls while what the listeners have yet to read would take them longer than this (pace.ts); undefined: do not. */
  keepWithinMs: number | undefined;
}

export interface ChannelsOptions extends CommonOptions {
  command: 'channels';
  wsUrl: string;
  clients: number;
  channels: number;
  /** Share of the clients that send (client i sends when ⌊(i+1)·ratio⌋ > ⌊i·ratio⌋). */
  sendersRatio: number;
  /** Emits a second per sender while it is connected. */
  sendRate: number;
  /** Notifications behind the channel's latest known position a client joins from (REGISTER since); 0: no since. */
  history: number;
  /** A client's mean time connected before it leaves and joins again; 0: clients stay. */
  sessionS: number;
  connectRate: number;
  /** Seconds of broadcasts and sessions before the measured ones. */
  warmupS: number;
  durationS: number;
  graceS: number;
  perAddress: number;
}

export type CommandOptions = HoldOptions | ChurnOptions | NotifyOptions | ChannelsOptions;

const COMMON = {
  json: { type: 'string' },
  quiet: { type: 'boolean', short: 'q', default: false },
  timeout: { type: 'string', default: String(DEFAULT_TIMEOUT_S) },
  http: { type: 'string' },
  'user-path': { type: 'string', default: 'bench' },
  'api-user': { type: 'string', default: 'bench' },
  'api-password': { type: 'string', default: 'bench' },
  generator: { type: 'string', default: 'customers' },
  people: { type: 'string' },
  register: { type: 'string' },
  'per-client': { type: 'boolean', default: false },
  criteria: { type: 'string' },
  tokens: { type: 'string', default: 'both' },
  client: { type: 'string', default: 'raw' },
  'read-rate': { type: 'string' },
  'per-worker': { type: 'string', default: '19000' },
  'per-address': { type: 'string' },
} satisfies ParseArgsConfig['options'];

/** For the commands that hold clients (fill, listen, notify). */
const RECONNECT = {
  reconnect: { type: 'boolean', default: false },
  // The SDK's own defaults: the clients come back as an application's would.
  'reconnect-min': { type: 'string', default: String(DEFAULT_MIN_DELAY_MS / 1000) },
  'reconnect-max': { type: 'string', default: String(DEFAULT_MAX_DELAY_MS / 1000) },
} satisfies ParseArgsConfig['options'];

const EXTRA = {
  fill: {
    ...RECONNECT,
    clients: { type: 'string', short: 'n' },
    first: { type: 'string', default: '0' },
    rate: { type: 'string', short: 'r', default: '1000' },
    'max-pending': { type: 'string' },
    hold: { type: 'string', default: '10' },
  },
  churn: { connections: { type: 'string', short: 'c', default: '100' }, duration: { type: 'string', short: 'd', default: '10' }, warmup: { type: 'string', short: 'w', default: '0' } },
  notify: {
    ...RECONNECT,
    'await-return': { type: 'string', default: '0' },
    'keep-within': { type: 'string' },
    resume: { type: 'boolean', default: false },
    clients: { type: 'string', short: 'n', default: '1000' },
    'connect-rate': { type: 'string', default: '2000' },
    connections: { type: 'string', short: 'c', default: '100' },
    duration: { type: 'string', short: 'd', default: '10' },
    rate: { type: 'string', short: 'R' },
    broadcast: { type: 'boolean', default: false },
    idempotent: { type: 'boolean', default: false },
    batch: { type: 'string', default: '1' },
    warmup: { type: 'string', short: 'w', default: '0' },
    grace: { type: 'string', default: '5' },
    ws: { type: 'string' },
  },
  // The defaults are the scenario of AnyCable's broker benchmark (docs/benchmarks/fleet.md).
  channels: {
    clients: { type: 'string', short: 'n', default: '1500' },
    channels: { type: 'string', default: '5' },
    senders: { type: 'string', default: '0.5' },
    'send-rate': { type: 'string', default: '0.7' },
    history: { type: 'string', default: '80' },
    session: { type: 'string', default: '40' },
    'connect-rate': { type: 'string', default: '500' },
    warmup: { type: 'string', short: 'w', default: '5' },
    duration: { type: 'string', short: 'd', default: '30' },
    grace: { type: 'string', default: '3' },
    ws: { type: 'string' },
  },
} satisfies Record<string, ParseArgsConfig['options']>;

type Values = Record<string, string | boolean | undefined>;

function number(values: Values, name: string, min: number): number {
  const value = Number(values[name]);
  if (!Number.isFinite(value) || value < min) throw new UsageError(`--${name} must be a number >= ${min}, got ${values[name]}`);
  return value;
}

function oneOf<T extends string>(value: unknown, name: string, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) throw new UsageError(`--${name} must be one of ${allowed.join(', ')}, got ${String(value)}`);
  return value as T;
}

/**
 * ws:// from http:// and back: the token API and emits are HTTP on the same port as WebSocket. Of a list of URLs
 * (a fleet's nodes, separated by commas), the first one's: tokens are good on every node of a fleet.
 */
export function swapScheme(url: string, to: 'http' | 'ws'): string {
  const parsed = new URL(url.split(',')[0]!);
  const secure = parsed.protocol === 'https:' || parsed.protocol === 'wss:';
  return `${to}${secure ? 's' : ''}://${parsed.host}`;
}

function readRateOf(values: Values): number | undefined {
  if (values['read-rate'] === undefined) return undefined;
  if (values.client !== 'ws') throw new UsageError('--read-rate needs --client ws');
  return number(values, 'read-rate', 0.001);
}

function common(values: Values, httpBase: string, event: string | undefined, defaultCriteria: CriteriaMode): CommonOptions {
  const criteria = values.criteria === undefined ? defaultCriteria : oneOf(values.criteria, 'criteria', ['person', 'client', 'none'] as const);
  const tokens = oneOf(values.tokens, 'tokens', ['api', 'both'] as const);
  if (criteria === 'person' && tokens === 'api') throw new UsageError('--criteria person (order-updates) needs --tokens both');
  return {
    json: values.json as string | undefined,
    quiet: values.quiet === true,
    timeoutMs: number(values, 'timeout', 0.001) * 1000,
    tokenApi: {
      httpBase: (values.http as string | undefined) ?? httpBase,
      userPath: String(values['user-path']),
      apiUser: String(values['api-user']),
      apiPassword: String(values['api-password']),
      generator: String(values.generator),
    },
    peopleFile: values.people as string | undefined,
    event,
    criteria,
    tokens,
    client: oneOf(values.client, 'client', CLIENT_KINDS),
    readRate: readRateOf(values),
  };
}

/** The wait before each reconnect attempt, when clients reconnect (`on`) at all. */
function reconnectPolicy(values: Values, on: boolean): ReconnectPolicy | undefined {
  if (!on) return undefined;
  const minDelayMs = number(values, 'reconnect-min', 0) * 1000;
  const maxDelayMs = number(values, 'reconnect-max', 0) * 1000;
  if (maxDelayMs < minDelayMs) throw new UsageError(`--reconnect-max (${values['reconnect-max']}) must be >= --reconnect-min (${values['reconnect-min']})`);
  return { minDelayMs, maxDelayMs };
}

/** How held clients come back, if they do, and how many share a source address. */
function addressing(values: Values, clients: number, reconnects: boolean): { reconnect: ReconnectPolicy | undefined; perAddress: number } {
  const reconnect = reconnectPolicy(values, reconnects);
  return { reconnect, perAddress: perAddress(values, clients, reconnect) };
}


/**
 * Clients per source address. A connect from an address first binds it, and the kernel's search for a free port
 * grows costly with the ports the address already holds, and more so for a second round of binds while the first
 * round's ports are still held or in TIME_WAIT: clients that reconnect get fewer per address (README.md, "Many clients").
 */
function perAddress(values: Values, clients: number, reconnect: ReconnectPolicy | undefined): number {
  const per = values['per-address'] === undefined ? (reconnect ? 1000 : 5000) : Math.floor(number(values, 'per-address', 1));
  if (clients <= per) return 0;
  if (Math.ceil(clients / per) > SOURCE_ADDRESSES) throw new UsageError(`${clients} clients need more than ${SOURCE_ADDRESSES} source addresses: raise --per-address`);
  return per;
}

/** person for order-updates (its bind needs the person's own customer_id), client with --per-client, else none. */
function criteriaFor(event: string | undefined, values: Values): CriteriaMode {
  if (event === 'order-updates') return 'person';
  return values['per-client'] === true ? 'client' : 'none';
}

function parse(args: string[], options: ParseArgsConfig['options']): { url: string; values: Values } {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...COMMON, ...options }, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length !== 1) throw new UsageError(`expected one URL, got ${positionals.length === 0 ? 'none' : positionals.join(' ')}`);
  const ws = (values as Values).ws;
  for (const url of [positionals[0]!, ...(typeof ws === 'string' ? [ws] : [])].flatMap((list) => list.split(','))) {
    if (!URL.canParse(url)) throw new UsageError(`not a URL: ${url}`);
  }
  return { url: positionals[0]!, values: values as Values };
}

function hold(command: 'fill' | 'listen', args: string[]): HoldOptions {
  const { url, values } = parse(args, EXTRA.fill);
  if (values.clients === undefined) throw new UsageError('--clients N is required');
  const event = values.register as string | undefined;
  return {
    ...common(values, swapScheme(url, 'http'), event, criteriaFor(event, values)),
    command,
    wsUrl: url,
    clients: number(values, 'clients', 1),
    first: number(values, 'first', 0),
    rate: number(values, 'rate', 0.001),
    maxPending: values['max-pending'] === undefined ? undefined : Math.floor(number(values, 'max-pending', 1)),
    holdS: number(values, 'hold', 0),
    perWorker: number(values, 'per-worker', 1),
    // Source addresses go by the client's index, so a fill that adds to earlier ones spreads like one big fill.
    ...addressing(values, number(values, 'first', 0) + number(values, 'clients', 1), values.reconnect === true),
  };
}

function churn(args: string[]): ChurnOptions {
  const { url, values } = parse(args, EXTRA.churn);
  const event = values.register as string | undefined;
  return {
    ...common(values, swapScheme(url, 'http'), event, criteriaFor(event, values)),
    command: 'churn',
    wsUrl: url,
    connections: number(values, 'connections', 1),
    durationS: number(values, 'duration', 0.001),
    warmupS: number(values, 'warmup', 0),
  };
}

function notify(args: string[]): NotifyOptions {
  const { url, values } = parse(args, EXTRA.notify);
  const broadcast = values.broadcast === true;
  const event = (values.register as string | undefined) ?? 'announcements';
  // Per-person emits need listeners with a recipientId of their own (or their person's); a broadcast needs none.
  const defaultCriteria = broadcast ? 'none' : event === 'order-updates' ? 'person' : 'client';
  const options = common(values, url, event, defaultCriteria);
  if (!broadcast && options.criteria === 'none') throw new UsageError('listeners without criteria get every emit: use --broadcast');
  if (broadcast && options.criteria !== 'none') throw new UsageError('--broadcast reaches only listeners without criteria (--criteria none)');
  const awaitReturnS = number(values, 'await-return', 0);
  return {
    ...options,
    command: 'notify',
    wsUrl: (values.ws as string | undefined) ?? swapScheme(url, 'ws'),
    clients: number(values, 'clients', 1),
    connectRate: number(values, 'connect-rate', 0.001),
    connections: number(values, 'connections', 1),
    durationS: number(values, 'duration', 0.001),
    rate: values.rate === undefined ? undefined : number(values, 'rate', 0.001),
    broadcast,
    idempotent: values.idempotent === true,
    batch: number(values, 'batch', 1),
    warmupS: number(values, 'warmup', 0),
    graceS: number(values, 'grace', 0),
    perWorker: number(values, 'per-worker', 1),
    ...addressing(values, number(values, 'clients', 1), values.reconnect === true || awaitReturnS > 0 || values.resume === true),
    awaitReturnS,
    resume: values.resume === true,
    keepWithinMs: values['keep-within'] === undefined ? undefined : number(values, 'keep-within', 1),
  };
}

function channels(args: string[]): ChannelsOptions {
  const { url, values } = parse(args, { ...EXTRA.channels, tokens: { type: 'string', default: 'api' } });
  const event = (values.register as string | undefined) ?? 'announcements-kept';
  const clients = Math.floor(number(values, 'clients', 1));
  const sendersRatio = number(values, 'senders', 0);
  if (sendersRatio > 1) throw new UsageError(`--senders must be a share from 0 to 1, got ${values.senders}`);
  return {
    // Each client's criteria are its channel's (channels.ts), not the roster's.
    ...common(values, url, event, 'client'),
    command: 'channels',
    wsUrl: (values.ws as string | undefined) ?? swapScheme(url, 'ws'),
    clients,
    channels: Math.floor(number(values, 'channels', 1)),
    sendersRatio,
    sendRate: number(values, 'send-rate', 0.001),
    history: Math.floor(number(values, 'history', 0)),
    sessionS: number(values, 'session', 0),
    connectRate: number(values, 'connect-rate', 0.001),
    warmupS: number(values, 'warmup', 0),
    durationS: number(values, 'duration', 0.001),
    graceS: number(values, 'grace', 0),
    perAddress: perAddress(values, clients, undefined),
  };
}

/** argv after the program name: the command, then its arguments. */
export function parseCommand(argv: readonly string[]): CommandOptions {
  const [command, ...args] = argv;
  switch (command) {
    case 'fill':
    case 'listen':
      return hold(command, args);
    case 'churn':
      return churn(args);
    case 'notify':
      return notify(args);
    case 'channels':
      return channels(args);
    default:
      throw new UsageError(command === undefined ? 'no command given' : `unknown command ${command}`);
  }
}
