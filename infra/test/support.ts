/** What infra/test's files share: the repository's deployment files, parsed as the tools that read them would. */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { loadConfigFile } from '../../packages/gateway/src/config/load.ts';
import type { Config } from '../../packages/gateway/src/config/schema.ts';

export const root = resolve(import.meta.dirname, '../..');
export const read = (path: string): string => readFileSync(join(root, path), 'utf8');
export const readYaml = <T>(path: string): T => parse(read(path)) as T;

export interface Service {
  image?: string;
  build?: { context: string; dockerfile: string };
  container_name?: string;
  profiles?: string[];
  ports?: string[];
  volumes?: string[];
  networks?: string[];
  environment?: Record<string, string>;
  secrets?: string[];
  labels?: string[] | Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  command?: string[];
  healthcheck?: { test?: string[]; disable?: boolean };
  restart?: string;
  stop_signal?: string;
  stop_grace_period?: string;
  ulimits?: { nofile?: { soft: number; hard: number } };
  sysctls?: Record<string, string | number>;
  deploy?: { resources?: { limits?: { cpus?: string; memory?: string } } };
}

export interface Compose {
  name: string;
  services: Record<string, Service>;
  networks: Record<string, { internal?: boolean }>;
  secrets: Record<string, { file: string }>;
  volumes: Record<string, unknown>;
}

export const compose = readYaml<Compose>('docker-compose.yml');

export function service(name: string): Service {
  const found = compose.services[name];
  assert.ok(found, `docker-compose.yml has no service ${name}`);
  return found;
}

/** A value as Compose interpolates it with no variable set: `${NAME:-default}` is its default. */
export function withDefaults(value: string): string {
  return value.replace(/\$\{(\w+):-([^}]*)\}/g, (_, _name: string, fallback: string) => fallback);
}

/** Labels as a map, whichever of the two compose forms (list of k=v, or mapping) is used. */
export function labels(svc: Service): Record<string, string> {
  if (!Array.isArray(svc.labels)) return svc.labels ?? {};
  return Object.fromEntries(
    svc.labels.map((label) => {
      const at = label.indexOf('=');
      return [label.slice(0, at), label.slice(at + 1)];
    }),
  );
}

/** A published port: the host address (undefined: every interface), the host port and the container port. */
export interface Published {
  host: string | undefined;
  hostPort: string;
  containerPort: number;
}

export function published(svc: Service): Published[] {
  return (svc.ports ?? []).map((mapping) => {
    const parts = withDefaults(mapping).split(':');
    assert.ok(parts.length === 2 || parts.length === 3, `a port mapping host:container or address:host:container: ${mapping}`);
    const containerPort = Number(parts.at(-1));
    return { host: parts.length === 3 ? parts[0] : undefined, hostPort: parts.at(-2)!, containerPort };
  });
}

/** Compose durations (`40s`, `1m30s`, `500ms`) in milliseconds. */
export function durationMs(duration: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...duration.matchAll(/(\d+)(ms|s|m|h)/g)];
  assert.equal(parts.map(([whole]) => whole).join(''), duration, `a duration: ${duration}`);
  return parts.reduce((sum, [, n, unit]) => sum + Number(n) * units[unit!]!, 0);
}

/** infra/docker/config.yaml as the gateway loads it in compose (its secret comes from a file there). */
export function composeGatewayConfig(): Readonly<Config> {
  return loadConfigFile(join(root, 'infra/docker/config.yaml'), { secret: 'a-secret-of-sixteen-or-more' });
}

export interface TraefikStatic {
  entryPoints: Record<string, { address: string; transport?: { respondingTimeouts?: Record<string, string> } }>;
  providers: { docker?: { exposedByDefault?: boolean; network?: string }; file?: { directory?: string } };
  ping?: { entryPoint?: string };
  metrics?: { prometheus?: { entryPoint?: string } };
}

export const traefik = readYaml<TraefikStatic>('infra/traefik/traefik.yml');

/** Where a program is, or undefined: PATH first, then where Debian puts it. */
export function which(program: string, ...extra: string[]): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), ...extra];
  return dirs.map((dir) => join(dir, program)).find((path) => existsSync(path));
}
