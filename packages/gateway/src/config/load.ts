/** Load, validate and freeze the configuration. Errors name the field and say what is wrong with it. */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../errors.ts';
import { configSchema, type Config } from './schema.ts';

/** Values from the environment that the composition root passes in; each wins over the file. */
export interface ConfigOverrides {
  port?: number | undefined;
  host?: string | undefined;
  secret?: string | undefined;
  mongodbUrl?: string | undefined;
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

/** Validate a raw config object. `baseDir` resolves relative seed paths. */
export function parseConfig(raw: unknown, baseDir: string, overrides: ConfigOverrides = {}): Readonly<Config> {
  const result = configSchema.safeParse(raw);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(root)'}: ${issue.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const config = result.data;
  applyOverrides(config, overrides);
  resolveSeeds(config, baseDir);
  checkReferences(config);
  if (overrides.production) refuseShippedSecrets(config);
  return deepFreeze(config);
}

function applyOverrides(config: Config, overrides: ConfigOverrides): void {
  if (overrides.port !== undefined) config.server.port = overrides.port;
  if (overrides.host !== undefined) config.server.host = overrides.host;
  if (overrides.secret !== undefined) config.auth.secret = overrides.secret;
  if (overrides.mongodbUrl !== undefined) {
    for (const instance of Object.values(config.instances)) instance.url = overrides.mongodbUrl;
  }
}

function resolveSeeds(config: Config, baseDir: string): void {
  for (const instance of Object.values(config.instances)) {
    for (const database of Object.values(instance.databases)) {
      for (const collection of Object.values(database.collections)) {
        if (collection.seed !== undefined) collection.seed = resolve(baseDir, collection.seed);
      }
    }
  }
}

function checkReferences(config: Config): void {
  for (const [name, generator] of Object.entries(config.tokenGenerators)) {
    const collections = config.instances[generator.instance]?.databases[generator.database]?.collections;
    if (!collections?.[generator.collection]) {
      throw new ConfigError(
        `invalid configuration:\n  tokenGenerators.${name}: no collection ` +
          `${generator.instance}/${generator.database}/${generator.collection} is declared under instances`,
      );
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
