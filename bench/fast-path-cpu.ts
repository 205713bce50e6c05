#!/usr/bin/env node
/**
 * What the emit fast path (packages/gateway/src/http/fast-path.ts) costs the node, in one process, with
 * process.cpuUsage (user + kernel):
 *
 *  - a 1 MiB emit body arriving in reads of 128 bytes, on a node with the fast path and on one without (fastify).
 *    The reads are the server socket's own 'data' events, emitted here, so their size does not depend on how the
 *    kernel coalesces segments;
 *  - a small emit (~100 bytes) over one keep-alive connection, one at a time: the CPU of the whole process per emit
 *    (the client is in this process too, so compare runs with each other, not with other figures).
 *
 *   node --no-node-snapshot bench/fast-path-cpu.ts [--emits 20000] [--rounds 3]
 *
 * Starts two in-process nodes on free loopback ports (the shipped default config, memory broker); stops by itself.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { apiToken, startNode, type TestNode } from '../packages/gateway/test/support/gateway.ts';
import { emitRequest, RawHttp } from '../packages/gateway/test/support/raw-http.ts';

const { values } = parseArgs({ options: { emits: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' } } });
const EMITS = Number(values.emits);
const ROUNDS = Number(values.rounds);
const BODY_BYTES = 1024 * 1024;
const PIECE = 128;

const cpuMs = (since: NodeJS.CpuUsage): number => {
  const { user, system } = process.cpuUsage(since);
  return (user + system) / 1000;
};

/** A 1 MiB emit body: a valid emit, padded. */
function bigBody(): string {
  const empty = JSON.stringify({ name: 'order-updates', eventData: { recipientId: '7', pad: '' } });
  return JSON.stringify({ name: 'order-updates', eventData: { recipientId: '7', pad: 'x'.repeat(BODY_BYTES - empty.length) } });
}

/** A connection to `node`, with the server's end of it (Node publishes each accepted socket on net.server.socket). */
async function connection(node: TestNode): Promise<{ client: RawHttp; server: Socket }> {
  const server = new Promise<Socket>((resolve) => {
    const accepted = ({ socket }: { socket: Socket }): void => {
      unsubscribe('net.server.socket', accepted as (message: unknown) => void);
      resolve(socket);
    };
    subscribe('net.server.socket', accepted as (message: unknown) => void);
  });
  const client = new RawHttp(portOf(node));
  return { client, server: await server };
}

const portOf = (node: TestNode): number => Number(new URL(node.http).port);

/** CPU of one 1 MiB emit fed to the server in 128-byte reads, until its answer is read. */
async function piecesMs(node: TestNode, request: Buffer): Promise<number> {
  const { client, server } = await connection(node);
  const started = process.cpuUsage();
  for (let at = 0; at < request.length; at += PIECE) server.emit('data', request.subarray(at, at + PIECE));
  const answer = await client.next();
  const ms = cpuMs(started);
  if (answer.status !== 200) throw new Error(`the big emit was answered ${answer.status}: ${answer.body}`);
  client.socket.destroy();
  return ms;
}

/** CPU of the process per small emit, µs, one at a time over one keep-alive connection. */
async function smallEmitUs(node: TestNode, token: string): Promise<number> {
  const client = new RawHttp(portOf(node));
  const call = (n: number) => emitRequest(token, JSON.stringify({ name: 'order-updates', eventData: { recipientId: String(n % 1000), status: 'SHIPPED' } }));
  for (let n = 0; n < 2000; n++) {
    client.write(call(n));
    await client.next();
  }
  const started = process.cpuUsage();
  for (let n = 0; n < EMITS; n++) {
    client.write(call(n));
    await client.next();
  }
  const us = (cpuMs(started) * 1000) / EMITS;
  client.socket.destroy();
  return us;
}

const nodes = {
  'fast path': await startNode(),
  fastify: await startNode((raw) => {
    raw.server.emitFastPath = false;
  }),
};
try {
  for (const [name, node] of Object.entries(nodes)) {
    const token = await apiToken(node);
    const request = Buffer.from(emitRequest(token, bigBody()));
    const pieces: number[] = [];
    const small: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      pieces.push(await piecesMs(node, request));
      small.push(await smallEmitUs(node, token));
    }
    const show = (figures: number[], unit: string): string => {
      const median = [...figures].sort((a, b) => a - b)[Math.floor(figures.length / 2)]!;
      return `median ${median.toFixed(1)} ${unit} (${figures.map((figure) => figure.toFixed(1)).join(', ')})`;
    };
    console.log(`${name}: 1 MiB body in ${request.length / PIECE | 0} reads of ${PIECE} B: ${show(pieces, 'ms')} CPU`);
    console.log(`${name}: small emit, one at a time: ${show(small, 'µs')} CPU of the process per emit (${EMITS} emits)`);
  }
} finally {
  await Promise.all(Object.values(nodes).map((node) => node.close()));
}
