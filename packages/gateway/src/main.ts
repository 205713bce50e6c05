#!/usr/bin/env -S node --no-node-snapshot --max-semi-space-size=16
/**
 * The `herald-gateway` command: the composition root, and the only place that reads the environment. What it reads
 * is listed in USAGE (`herald-gateway --help`); docs/configuration.md says the same at length.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { DEFAULT_COST, costOf, hashPassword } from './auth/password.ts';
import { DEFAULT_CONFIG_FILE, loadConfigFile } from './config/load.ts';
import { ConfigError } from './errors.ts';
import { Gateway } from './node.ts';

const USAGE = `usage: herald-gateway [--help]
       herald-gateway hash-password [--cost ln=15,r=8,p=3] [password]

Runs one Herald gateway node: a WebSocket notification gateway (docs/configuration.md).
hash-password prints the scrypt hash of a person's password, for a token generator's passwordColumn; without the
argument it reads the password from stdin (one line), which keeps it out of the shell's history and the process list.
Settings come from a YAML config file; these environment variables override it (an empty value counts as unset):

  HERALD_CONFIG          the config file (default: packages/gateway/config/default.yaml)
  PORT                   the clients' port: WebSocket, token, health (default: server.port, 38246)
  HERALD_API_PORT        the back end's port: emit, tables, token, health, /metrics (default: server.apiPort;
                         unset there too: everything on PORT)
  HOST                   the address to listen on (default: server.host, 0.0.0.0)
  HERALD_REUSE_PORT      1 or true: share the ports with the next node process, for a restart without a gap
  HERALD_JWT_SECRET      the token signing secret (HS256), at least 16 characters
  MONGODB_URL            use MongoDB for every instance instead of the in-memory data source
  REDIS_URL              join a fleet through one redis-server (redis://host:port)
  REDIS_CLUSTER_NODES    join a fleet through a Redis Cluster: its masters as host:port,host:port,...
  HERALD_NODE_ID         this node's id in the fleet and in every log line (default <hostname>-<pid>-<random>)
  NODE_ENV               production (in any case): refuse the secrets shipped in default.yaml
  LOG_LEVEL              pino's level (default info)

  HERALD_JWT_SECRET_FILE, MONGODB_URL_FILE, REDIS_URL_FILE
                         a file holding the value instead (Docker secrets): set the variable or its _FILE, not both

SIGTERM or SIGINT drains the node (its clients are told to reconnect elsewhere), then it exits 0.`;

const env = process.env;

function portFromEnv(name: string): number | undefined {
  const value = env[name];
  if (value === undefined || value === '') return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError(`${name} must be 0-65535, got ${value}`);
  return port;
}

/** A secret from NAME, or from the file NAME_FILE names (Docker and Compose secrets), never both. */
function secretFromEnv(name: string): string | undefined {
  const value = env[name] || undefined;
  const file = env[`${name}_FILE`] || undefined;
  if (value !== undefined && file !== undefined) throw new ConfigError(`set ${name} or ${name}_FILE, not both`);
  if (file === undefined) return value;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`${name}_FILE: cannot read ${file}: ${(error as Error).message}`);
  }
  // Files written by `echo` or an editor end with a newline that is not part of the secret.
  const secret = text.replace(/[\r\n]+$/, '');
  if (secret === '') throw new ConfigError(`${name}_FILE: ${file} is empty`);
  return secret;
}

function flagFromEnv(name: string): boolean | undefined {
  const value = env[name];
  if (value === undefined || value === '') return undefined;
  if (value === '1' || value === 'true') return true;
  if (value === '0' || value === 'false') return false;
  throw new ConfigError(`${name} must be 1, true, 0 or false, got ${value}`);
}

/** --help prints USAGE and ends the process; anything else on the command line is refused. */
function readArguments(): void {
  let help: boolean | undefined;
  try {
    help = parseArgs({ options: { help: { type: 'boolean', short: 'h' } } }).values.help;
  } catch (error) {
    process.stderr.write(`herald-gateway: ${(error as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
}

async function main(): Promise<void> {
  readArguments();
  const config = loadConfigFile(env.HERALD_CONFIG || DEFAULT_CONFIG_FILE, {
    port: portFromEnv('PORT'),
    apiPort: portFromEnv('HERALD_API_PORT'),
    host: env.HOST || undefined,
    reusePort: flagFromEnv('HERALD_REUSE_PORT'),
    secret: secretFromEnv('HERALD_JWT_SECRET'),
    mongodbUrl: secretFromEnv('MONGODB_URL'),
    redisUrl: secretFromEnv('REDIS_URL'),
    redisCluster: env.REDIS_CLUSTER_NODES ? env.REDIS_CLUSTER_NODES.split(',').map((node) => node.trim()) : undefined,
    production: env.NODE_ENV?.trim().toLowerCase() === 'production',
  });
  const gateway = await Gateway.create(config, {
    logger: { level: env.LOG_LEVEL || 'info' },
    nodeId: env.HERALD_NODE_ID || undefined,
  });
  const port = await gateway.listen();
  collectStartGarbage();
  const api = gateway.ports?.api;
  const apiAt = api === undefined ? '' : `, its API on ${config.server.apiHost ?? config.server.host}:${api}`;
  gateway.log.info(`herald gateway listening on ${config.server.host}:${port}${apiAt} (user path ${config.userPath})`);
  const stop = (signal: string) => {
    gateway.log.info(`${signal}: draining`);
    setTimeout(() => {
      gateway.log.warn(`drain deadline (${config.drain.deadlineMs} ms) passed: exiting`);
      process.exit(0);
    }, config.drain.deadlineMs).unref();
    gateway.close().then(
      () => process.exit(0),
      (error: unknown) => {
        gateway.log.error({ err: error }, 'close failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

/**
 * One full collection once the node listens. Loading its modules, a start allocates much that lives a little while,
 * and V8 grows the young generation for it; nothing in an idle node starts V8's memory reducer, so it was kept for
 * good. After this collection the reducer gives it back within seconds; under load it grows again
 * (docs/architecture.md, "Measured costs"). gc is taken from a fresh context, and its flag turned off again, so that
 * no later context (the can-connect code's isolates) gets it.
 */
function collectStartGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc: unknown = runInNewContext('gc');
  setFlagsFromString('--no-expose-gc');
  if (typeof gc === 'function') gc();
}

async function hashPasswordCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { cost: { type: 'string' } } });
  if (positionals.length > 1) throw new ConfigError('usage: herald-gateway hash-password [--cost ln=15,r=8,p=3] [password]');
  const cost = values.cost === undefined ? DEFAULT_COST : costOf(values.cost);
  let password = positionals[0];
  if (password === undefined) {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      password = line;
      break;
    }
    lines.close();
  }
  if (!password) throw new ConfigError('hash-password: no password given (as its argument, or a line on stdin)');
  process.stdout.write(`${await hashPassword(password, cost)}\n`);
}

const [command, ...args] = process.argv.slice(2);
(command === 'hash-password' ? hashPasswordCommand(args) : main()).catch((error: unknown) => {
  process.stderr.write(`herald-gateway: ${error instanceof ConfigError ? error.message : (error as Error).stack}\n`);
  process.exit(1);
});
