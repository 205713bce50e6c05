/** Load, validate and freeze the configuration. Errors name the field and say what is wrong with it. */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../errors.ts';
import { configSchema, type Config } from './schema.ts';

/** Values from the environment that the composition root passes in; each wins over the file. */
export interface ConfigOverrides {
  port?: number | undefined;
  /** HERALD_API_PORT: the back end's port (server.apiPort). */
  apiPort?: number | undefined;
  host?: string | undefined;
  /** HERALD_REUSE_PORT: share the port with the node's successor. */
  reusePort?: boolean | undefined;
  secret?: string | undefined;
  mongodbUrl?: string | undefined;
  /** REDIS_URL: one redis-server. */
  redisUrl?: string | undefined;
  /** REDIS_CLUSTER_NODES: Redis Cluster masters as host:port. */
  redisCluster?: string[] | undefined;
  /** NODE_ENV=production: shipped secrets are refused. */
  production?: boolean | undefined;
}

/** Secrets that ship in config/default.yaml: fine on a laptop, refused in production. */
const SHIPPED_SECRETS = new Set(['herald-development-secret-do-not-use-in-production', 'bench']);

export const DEFAULT_CONFIG_FILE = resolve(import.meta.dirname, '../../config/default.yaml');

export function loadConfigFile(file: string, overrides: ConfigOverrides = {}): Readonly<Config> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config file ${file}: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`config file ${file} is not valid YAML: ${(error as Error).message}`);
  }
  return parseConfig(raw, dirname(file), overrides);
}

/** Validate a raw config object, with the overrides applied first so that they are validated too. */
export function parseConfig(raw: unknown, baseDir: string, overrides: ConfigOverrides = {}): Readonly<Config> {
  const result = configSchema.safeParse(withOverrides(raw, overrides));
  if (!result.success) {
    throw ConfigError.forFields(result.error.issues.map((issue) => [issue.path.join('.') || '(root)', issue.message]));
  }
  const config = result.data;
  resolveFiles(config, baseDir);
  checkReferences(config);
  if (overrides.production) refuseShippedSecrets(config);
  return deepFreeze(config);
}

type RawSection = Record<string, unknown>;
const section = (value: unknown): RawSection =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as RawSection) : {};
const defined = (entries: RawSection): RawSection =>
  Object.fromEntries(Object.entries(entries).filter(([, value]) => value !== undefined));

function redisWithOverrides(redis: unknown, { redisUrl, redisCluster }: ConfigOverrides): unknown {
  if (redisUrl === undefined && redisCluster === undefined) return redis;
  // The environment names the Redis to use: it replaces the file's choice rather than adding to it.
  const rest = { ...section(redis) };
  delete rest.url;
  delete rest.cluster;
  return { ...rest, ...defined({ url: redisUrl, cluster: redisCluster }) };
}

function withOverrides(raw: unknown, overrides: ConfigOverrides): unknown {
  const { port, apiPort, host, reusePort, secret, mongodbUrl } = overrides;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return raw;
  const config = raw as RawSection;
  const instances = Object.fromEntries(
    Object.entries(section(config.instances)).map(([name, instance]) => [
      name,
      mongodbUrl === undefined ? instance : { ...section(instance), url: mongodbUrl },
    ]),
  );
  return {
    ...config,
    server: { ...section(config.server), ...defined({ port, apiPort, host, reusePort }) },
    auth: { ...section(config.auth), ...defined({ secret }) },
    ...(config.instances === undefined ? {} : { instances }),
    ...defined({ redis: redisWithOverrides(config.redis, overrides) }),
  };
}

/** Seeds and code files are named relative to the config file. */
function resolveFiles(config: Config, baseDir: string): void {
  for (const { canConnect } of Object.values(config.events)) {
    if (canConnect?.file !== undefined) canConnect.file = resolve(baseDir, canConnect.file);
  }
  for (const instance of Object.values(config.instances)) {
    for (const database of Object.values(instance.databases)) {
      for (const collection of Object.values(database.collections)) {
        if (collection.seed !== undefined) collection.seed = resolve(baseDir, collection.seed);
      }
    }
  }
}

function checkReferences(config: Config): void {
  if (config.ingest !== undefined && config.apiUsers[config.ingest.apiUser] === undefined) {
    throw ConfigError.forFields([['ingest.apiUser', `no API user ${config.ingest.apiUser} is configured under apiUsers`]]);
  }
  const selected = new Set(Object.values(config.tokenGenerators).flatMap((generator) => generator.select));
  for (const [name, { bind }] of Object.entries(config.events)) {
    for (const [field, column] of Object.entries(bind)) {
      if (!selected.has(column)) {
        throw ConfigError.forFields([
          [`events.${name}.bind.${field}`, `column ${column} is in no token generator's select, so no person token could carry it`],
        ]);
      }
    }
  }
  for (const [name, generator] of Object.entries(config.tokenGenerators)) {
    const { instance, database, collection } = generator;
    const declared = config.instances[instance]?.databases[database]?.collections[collection];
    if (!declared) {
      throw ConfigError.forFields([[`tokenGenerators.${name}`, `no collection ${instance}/${database}/${collection} is declared under instances`]]);
    }
    // Whoever could save a row into it could add a person of their choosing (another's customer_id) and log in as them.
    if (declared.access.write !== 'none') {
      throw ConfigError.forFields([
        [
          `instances.${instance}.databases.${database}.collections.${collection}.access`,
          `token generator ${name} logs people in from this collection, so the table API must not write it: ` +
            `set access: { read: <level>, write: none } (or access: none), not write: ${declared.access.write}`,
        ],
      ]);
    }
  }
}

function refuseShippedSecrets(config: Config): void {
  const found: string[] = [];
  if (config.auth.secret !== undefined && SHIPPED_SECRETS.has(config.auth.secret)) found.push('auth.secret');
  for (const [user, { password }] of Object.entries(config.apiUsers)) {
    if (SHIPPED_SECRETS.has(password)) found.push(`apiUsers.${user}.password`);
  }
  if (found.length > 0) {
    throw new ConfigError(
      `refusing to start with NODE_ENV=production and default secrets in: ${found.join(', ')}. ` +
        'Set them in your own config file (HERALD_CONFIG) or HERALD_JWT_SECRET.',
    );
  }
}

function deepFreeze<T>(value: T): Readonly<T> {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
