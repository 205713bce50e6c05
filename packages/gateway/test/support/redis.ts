/** Real redis-server processes on free loopback ports: one server, or a 3-master Redis Cluster. */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

export interface RedisServer {
  port: number;
  url: string;
  /** Run redis-cli with these arguments against this server. */
  cli(...args: string[]): Promise<string>;
  /** Stop (SIGKILL with `kill`), keeping the port for a restart. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Start again, empty, on the same port. */
  restart(): Promise<void>;
}

async function launch(port: number, dir: string, extra: string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  while (!out.includes('Ready to accept connections')) {
    const [chunk] = (await Promise.race([once(child.stdout!, 'data'), once(child, 'exit').then(() => [null])])) as [Buffer | null];
    if (chunk === null) throw new Error(`redis-server on ${port} exited: ${out}`);
    out += chunk;
  }
  child.stdout!.resume();
  return child;
}

export async function startRedis(extra: string[] = [], port?: number): Promise<RedisServer> {
  port ??= await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'herald-redis-'));
  let child = await launch(port, dir, extra);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cli: async (...args) => (await run('redis-cli', ['-p', String(port), ...args])).stdout.trim(),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) {
        child.kill(signal);
        await once(child, 'exit');
      }
      if (signal === 'SIGTERM') rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      child = await launch(port, dir, extra);
    },
  };
}

/** Calls of each command since the server started (INFO commandstats). */
export async function commandCalls(redis: RedisServer): Promise<Map<string, number>> {
  const stats = await redis.cli('info', 'commandstats');
  return new Map([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map(([, command, calls]) => [command as string, Number(calls)]));
}

/**
 * Commands sent since `before`, by name; EVAL counted as EVALSHA (a script's first run after a restart). Left out:
 * INFO (the counting itself) and PING (the liveness probe's, on its own clock whatever the node is doing).
 */
export async function sentSince(redis: RedisServer, before: Map<string, number>): Promise<Map<string, number>> {
  const sent = new Map<string, number>();
  for (const [command, calls] of await commandCalls(redis)) {
    const name = command === 'eval' ? 'evalsha' : command;
    const delta = calls - (before.get(command) ?? 0);
    if (delta > 0 && command !== 'info' && command !== 'ping') sent.set(name, (sent.get(name) ?? 0) + delta);
  }
  return sent;
}

/** A free port whose cluster bus port (port + 10000) is free too, below the ephemeral range. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if ((await bindable(port)) && (await bindable(port + 10_000))) return port;
  }
}

async function bindable(port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    server.close();
    await once(server, 'close');
    return true;
  } catch {
    return false;
  }
}

export interface RedisCluster {
  /** The masters as host:port. */
  nodes: string[];
  servers: RedisServer[];
  stop(): Promise<void>;
}

/** Three masters, no replicas, every slot assigned, cluster_state:ok on each. */
export async function startRedisCluster(): Promise<RedisCluster> {
  const servers: RedisServer[] = [];
  const stop = async () => void (await Promise.all(servers.map((server) => server.stop())));
  try {
    for (let i = 0; i < 3; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'herald-cluster-'));
      const options = ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', '5000'];
      servers.push(await startRedis(options, await freeClusterPort()));
    }
    const nodes = servers.map((server) => `127.0.0.1:${server.port}`);
    await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
    for (const server of servers) {
      // Nothing announces the cluster's state: poll it.
      for (let tries = 0; !(await server.cli('cluster', 'info')).includes('cluster_state:ok'); tries++) {
        if (tries > 100) throw new Error('the Redis Cluster did not become ok');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    return { nodes, servers, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
