#!/usr/bin/env node
/**
 * Redis bytes per connected, subscribed client: one gateway node on a fresh redis-server, N clients each
 * holding a route of its own (as per-person subscriptions do); the slope of INFO used_memory between levels.
 *
 *   node packages/loadgen/src/redis-memory.ts [levels, default 2000,4000,8000] [redis port, default 6399]
 *
 * It starts its own empty redis-server on that port, and stops it at the end. Clients and node share this
 * process, whose open files are capped at 20,000 here: keep the last level under ~9,000.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import WebSocket from 'ws';
import { DEFAULT_CONFIG_FILE, Gateway, loadConfigFile } from '@herald/gateway';
import { API_TOKEN_QUERY } from '@herald/protocol';

const levels = (process.argv[2] ?? '2000,4000,8000').split(',').map(Number);
const redisPort = process.argv[3] ?? '6399';
const redis = spawn('redis-server', ['--port', redisPort, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] });
for (let out = ''; !out.includes('Ready to accept'); ) out += String((await once(redis.stdout, 'data'))[0]);
const usedMemory = () => Number(/used_memory:(\d+)/.exec(execFileSync('redis-cli', ['-p', redisPort, 'info', 'memory'], { encoding: 'utf8' }))?.[1]);
const config = loadConfigFile(DEFAULT_CONFIG_FILE, { port: 0, host: '127.0.0.1', redisUrl: `redis://127.0.0.1:${redisPort}` });
const gateway = await Gateway.create(config);
const port = await gateway.listen();
const token = (await gateway.authenticator.issue({ kind: 'AM', u: 'bench', p: 'bench' })).token;
const sockets: WebSocket[] = [];
const samples: Array<[number, number]> = [[0, usedMemory()]];

async function connect(index: number): Promise<void> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/?${API_TOKEN_QUERY}=${token}`);
  sockets.push(socket);
  await new Promise((resolve) => socket.once('message', resolve));
  socket.send(JSON.stringify({ objType: 'REGISTER', onEvents: [{ eventType: 'CUSTOM_WS_EVENTS', apiName: 'announcements', condition: { conditionType: 'RESPONSE', criteria: { recipientId: String(index) } } }] }));
  await new Promise((resolve) => socket.once('message', resolve));
}

for (const level of levels) {
  while (sockets.length < level) await Promise.all(Array.from({ length: Math.min(200, level - sockets.length) }, (_, i) => connect(sockets.length + i)));
  samples.push([level, usedMemory()]);
}
const [first, last] = [samples[1] ?? samples[0], samples.at(-1)] as [[number, number], [number, number]];
const slope = (last[1] - first[1]) / (last[0] - first[0]);
for (const [clients, bytes] of samples) console.log(`${String(clients).padStart(6)} clients  used_memory ${(bytes / 1024).toFixed(0)} KB`);
console.log(`redis_bytes_per_client ${slope.toFixed(0)} (slope ${first[0]} -> ${last[0]} clients)`);
console.log(`command: node packages/loadgen/src/redis-memory.ts ${levels.join(',')}; machine: ${execFileSync('nproc', { encoding: 'utf8' }).trim()} cores, redis ${execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).split(' ')[2]}`);
for (const socket of sockets) socket.terminate();
await gateway.close();
redis.kill();
