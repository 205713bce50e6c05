#!/usr/bin/env -S node --no-node-snapshot --max-semi-space-size=16
/**
 * The `herald-gateway` command: the composition root, and the only place that reads the environment.
 *
 *   PORT               listen port (default: the config's, 38246)
 *   HOST               listen address (default 0.0.0.0)
 *   HERALD_REUSE_PORT  1 or true: share the port with the next node process, for a restart without a gap
 *   HERALD_CONFIG      config file (default: packages/gateway/config/default.yaml)
 *   HERALD_JWT_SECRET  token signing secret (HS256)
 *   MONGODB_URL        use MongoDB for every instance instead of the in-memory data source
 *   REDIS_URL          join a fleet through one redis-server (redis://host:port)
 *   REDIS_CLUSTER_NODES  join a fleet through a Redis Cluster: masters as host:port,host:port,...
 *   HERALD_NODE_ID     this node's id in the fleet (default <hostname>-<pid>-<random>)
 *   NODE_ENV           "production" (in any case) refuses the shipped default secrets
 *   LOG_LEVEL          pino level (default info)
 *
 * `herald-gateway hash-password [--cost ln=15,r=8,p=3] [password]` prints the scrypt hash of a person's password,
 * for a token generator's passwordColumn; without the argument it reads the password from stdin (one line), which
 * keeps it out of the shell's history and the process list.
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { DEFAULT_COST, costOf, hashPassword } from './auth/password.ts';
import { DEFAULT_CONFIG_FILE, loadConfigFile } from './config/load.ts';
import { ConfigError } from './errors.ts';
import { Gateway } from './node.ts';

const env = process.env;

function portFromEnv(): number | undefined {
  if (env.PORT === undefined || env.PORT === '') return undefined;
  const port = Number(env.PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError(`PORT must be 0-65535, got ${env.PORT}`);
  return port;
}

function flagFromEnv(name: string): boolean | undefined {
  const value = env[name];
  if (value === undefined || value === '') return undefined;
  if (value === '1' || value === 'true') return true;
  if (value === '0' || value === 'false') return false;
  throw new ConfigError(`${name} must be 1, true, 0 or false, got ${value}`);
}

async function main(): Promise<void> {
  const config = loadConfigFile(env.HERALD_CONFIG || DEFAULT_CONFIG_FILE, {
    port: portFromEnv(),
    host: env.HOST || undefined,
    reusePort: flagFromEnv('HERALD_REUSE_PORT'),
    secret: env.HERALD_JWT_SECRET || undefined,
    mongodbUrl: env.MONGODB_URL || undefined,
    redisUrl: env.REDIS_URL || undefined,
    redisCluster: env.REDIS_CLUSTER_NODES ? env.REDIS_CLUSTER_NODES.split(',').map((node) => node.trim()) : undefined,
    production: env.NODE_ENV?.trim().toLowerCase() === 'production',
  });
  const gateway = await Gateway.create(config, {
    logger: { level: env.LOG_LEVEL || 'info' },
    nodeId: env.HERALD_NODE_ID || undefined,
  });
  const port = await gateway.listen();
  gateway.log.info(`herald gateway listening on ${config.server.host}:${port} (user path ${config.userPath})`);
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
