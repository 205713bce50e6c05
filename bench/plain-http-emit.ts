#!/usr/bin/env node
/**
 * The machine's floor for the unpaced one-person notify: what a Node server costs per emit when it does nothing but
 * the HTTP call and the write. This process answers each `POST /emit` (the gateway's emit body, parsed) and writes
 * a 150-byte frame to the one of 1,000 plain TCP sockets its recipientId names; one child process holds those
 * sockets and reads, another is the emitter (100 keep-alive connections, one request at a time each, as wsload's
 * notify). No WebSocket, no protocol, no registry, no Redis: the gap between this and the gateway's node CPU per
 * emit is all the gateway's work, and `--server fastify` shows fastify's share (one route, its JSON body parser).
 * `--server raw` reads HTTP/1.1 itself from plain `net` sockets (Content-Length bodies, keep-alive), as the gateway's
 * emit fast path does (packages/gateway/src/http/fast-path.ts): what Node's HTTP server costs is the difference.
 *
 *   node bench/plain-http-emit.ts [--server http|fastify|raw] [--seconds 10] [--json]
 *
 * Prints the emits a second and the server's CPU per emit (user + kernel, µs) over the measured seconds (after 2 s
 * not counted); `--json`: as one JSON line, for `make bench`. Ports 26300-26301; stops by itself.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { HttpConnection, jsonPostHead, readInto } from '@herald/loadgen';

const HTTP_PORT = 26300;
const SOCKETS_PORT = 26301;
const RECIPIENTS = 1000;
const CONNECTIONS = 100;
const WARMUP_S = 2;
const ANSWER = JSON.stringify({ success: true, statusCode: 200, data: { name: 'order-updates', nodes: 1 } });

interface EmitBody { name: string; eventData: { recipientId: string } }

/** The readers: RECIPIENTS sockets, every byte read and dropped (their CPU is the listeners' side). */
async function readers(): Promise<void> {
  const sockets = Array.from({ length: RECIPIENTS }, () => {
    const socket = connect({ port: SOCKETS_PORT, host: '127.0.0.1', onread: readInto({ push: () => {} }) });
    socket.on('error', () => {});
    return socket;
  });
  await Promise.all(sockets.map((socket) => once(socket, 'connect')));
  process.send!('connected');
  process.once('disconnect', () => sockets.forEach((socket) => socket.destroy()));
}

/** The emitter: unpaced, a different recipient each call; tells the parent when the counted seconds start and end. */
async function emitter(seconds: number): Promise<void> {
  const url = new URL(`http://127.0.0.1:${HTTP_PORT}`);
  const head = jsonPostHead(url, '/emit');
  let next = 0;
  let counting = false;
  let answered = 0;
  let stopped = false;
  const request = (): string => {
    const body = JSON.stringify({ name: 'order-updates', eventData: { recipientId: String(next++ % RECIPIENTS), t: Date.now(), type: 'order-updated', order_no: 1001, status: 'SHIPPED' } });
    return `${head}${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
  const connections = Array.from({ length: CONNECTIONS }, () => new HttpConnection({ host: url.hostname, port: HTTP_PORT, timeoutMs: 10_000 }));
  const loop = (connection: HttpConnection): void => {
    connection.send(request(), (status, error) => {
      if (stopped) return; // the answers still on their way when the connections close
      if (status !== 200) throw new Error(`emit failed: ${status} ${error ?? ''}`);
      if (counting) answered++;
      loop(connection);
    });
  };
  connections.forEach(loop);
  await new Promise((resolve) => setTimeout(resolve, WARMUP_S * 1000));
  counting = true;
  process.send!('start');
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  counting = false;
  stopped = true;
  process.send!({ answered });
  connections.forEach((connection) => connection.close());
  process.disconnect();
}

/** Write the frame of one emit to its recipient's socket. */
function deliver(sockets: Socket[], body: EmitBody): void {
  const json = JSON.stringify({ objType: 'NOTIFICATION', eventId: 'order-updates', data: body.eventData });
  sockets[Number(body.eventData.recipientId)]!.write(`${json}${' '.repeat(Math.max(0, 150 - json.length))}`);
}

const HEAD_END = Buffer.from('\r\n\r\n');
const RAW_ANSWER = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(ANSWER)}\r\n\r\n${ANSWER}`;

/** The raw server's connection: each whole request (head, then Content-Length bytes of body) answered as it comes. */
function answerRaw(sockets: Socket[], socket: Socket): void {
  let unread: Buffer | undefined;
  socket.on('error', () => {});
  socket.on('data', (chunk: Buffer) => {
    let bytes = unread ? Buffer.concat([unread, chunk]) : chunk;
    unread = undefined;
    for (;;) {
      const headEnd = bytes.indexOf(HEAD_END);
      const length = headEnd < 0 ? 0 : Number(/content-length:\s*(\d+)/i.exec(bytes.toString('latin1', 0, headEnd))?.[1]);
      const end = headEnd + HEAD_END.length + length;
      if (headEnd < 0 || bytes.length < end) {
        unread = bytes;
        return;
      }
      deliver(sockets, JSON.parse(bytes.toString('utf8', headEnd + HEAD_END.length, end)) as EmitBody);
      socket.write(RAW_ANSWER);
      if (bytes.length === end) return;
      bytes = bytes.subarray(end);
    }
  });
}

async function listenHttp(kind: string, sockets: Socket[]): Promise<() => Promise<void>> {
  if (kind === 'raw') {
    const server = createServer((socket) => answerRaw(sockets, socket));
    server.listen(HTTP_PORT, '127.0.0.1');
    await once(server, 'listening');
    return () => new Promise((resolve) => server.close(() => resolve()));
  }
  if (kind === 'fastify') {
    const app = Fastify();
    app.post<{ Body: EmitBody }>('/emit', async (request, reply) => {
      deliver(sockets, request.body);
      return reply.type('application/json').send(ANSWER);
    });
    await app.listen({ port: HTTP_PORT, host: '127.0.0.1' });
    return () => app.close();
  }
  const server = createHttpServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      deliver(sockets, JSON.parse(Buffer.concat(chunks).toString()) as EmitBody);
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(ANSWER) }).end(ANSWER);
    });
  });
  server.listen(HTTP_PORT, '127.0.0.1');
  await once(server, 'listening');
  return () => new Promise((resolve) => server.close(() => resolve()));
}

/** The child's next message; a child that exits first (a failed emit, say) fails the run instead of hanging it. */
function messageFrom(child: ChildProcess): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const exited = (code: number | null): void => reject(new Error(`a child process exited (${code}) before it reported`));
    child.once('exit', exited);
    child.once('message', (message) => {
      child.off('exit', exited);
      resolve(message);
    });
  });
}

async function main(kind: string, seconds: number, json: boolean): Promise<void> {
  const sockets: Socket[] = [];
  const recipients = createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('error', () => {});
    sockets.push(socket);
  });
  recipients.listen(SOCKETS_PORT, '127.0.0.1');
  await once(recipients, 'listening');
  const closeHttp = await listenHttp(kind, sockets);
  const reading = fork(new URL(import.meta.url), ['--readers']);
  await messageFrom(reading);
  const emitting = fork(new URL(import.meta.url), ['--emitter', '--seconds', String(seconds)]);
  await messageFrom(emitting);
  const before = process.cpuUsage();
  const started = performance.now();
  const { answered } = (await messageFrom(emitting)) as { answered: number };
  const cpu = process.cpuUsage(before);
  const elapsedS = (performance.now() - started) / 1000;
  const perEmit = (micros: number): number => Math.round((10 * micros) / answered) / 10;
  const report = { server: kind, emitsPerSecond: Math.round(answered / elapsedS), cpuUsPerEmit: perEmit(cpu.user + cpu.system), userUsPerEmit: perEmit(cpu.user), kernelUsPerEmit: perEmit(cpu.system) };
  console.log(json
    ? JSON.stringify(report)
    : `notify floor (${kind}): ${report.emitsPerSecond} emits/s; server CPU per emit ${report.cpuUsPerEmit} µs (user ${report.userUsPerEmit}, kernel ${report.kernelUsPerEmit})`);
  reading.disconnect();
  for (const socket of sockets) socket.destroy();
  recipients.close();
  await closeHttp();
}

const { values } = parseArgs({ options: { server: { type: 'string', default: 'http' }, seconds: { type: 'string', default: '10' }, json: { type: 'boolean', default: false }, readers: { type: 'boolean' }, emitter: { type: 'boolean' } } });
if (values.readers) await readers();
else if (values.emitter) await emitter(Number(values.seconds));
else await main(values.server, Number(values.seconds), values.json);
