#!/usr/bin/env node
/**
 * The machine's floor for one broadcast to many sockets: a plain `net` server writes one 150-byte message to each
 * of N loopback TCP sockets, `--chunk` writes at a time with a setImmediate between (as the hub's fanOutChunk),
 * and three reader processes (as the bench's three wsload workers, each reading into one shared buffer) report
 * when the last of them got each message. No WebSocket, no protocol, no Redis: what the gateway's
 * broadcast_18k_last_ms cannot go below on the same cores.
 *
 * The order of the writes matters as much as anything here: on loopback a write to a sleeping reader wakes it, and
 * written in turn across the readers (`interleaved`, the default, as the gateway writes to wsload's workers) nearly
 * every write wakes one; `--order grouped` writes one reader's sockets after another (docs/benchmarks/methodology.md).
 *
 *   node bench/plain-socket-broadcast.ts [--clients 18000] [--chunk 128] [--rounds 10] [--warmup 2] [--order interleaved|grouped] [--json]
 *
 * The first `--warmup` rounds are written and read but not reported, as the gateway's broadcast-18k run does not
 * count its first two broadcasts (bench/notify.ts).
 *
 * Prints each round's last told (ms after the first write) and the server's CPU in the kernel for it (`--json`: as
 * one JSON line, for `make bench`). Port 26200,
 * source addresses 127.0.0.2-4; stops by itself after the rounds.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { parseArgs } from 'node:util';

const PORT = 26200;
const READERS = 3;
const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A reader: `count` sockets from `address`; on exit, each round's latest arrival (ms after its stamp), as JSON. */
async function reader(count: number, address: string): Promise<void> {
  const shared = Buffer.alloc(65536);
  const last = new Map<string, number>();
  let open = 0;
  for (let i = 0; i < count; i++) {
    const socket = connect({ port: PORT, host: '127.0.0.1', localAddress: address, onread: { buffer: shared, callback: () => {
      const stamp = shared.toString('latin1', 0, shared.indexOf(32));
      last.set(stamp, Math.max(last.get(stamp) ?? 0, now() - Number(stamp)));
      return true;
    } } });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (--open === 0) process.send!([...last.values()], () => process.disconnect());
    });
    open++;
    // Paced so that the listen queue never overflows (an overflowed handshake leaves a socket only one side has).
    if (i % 200 === 199) await sleep(50);
  }
}

/** The sockets in turn across their readers (by source address), as wsload's workers' clients reach the gateway. */
function interleaved(sockets: Socket[]): Socket[] {
  const byReader = Map.groupBy(sockets, (socket) => socket.remoteAddress);
  const runs = [...byReader.values()];
  return Array.from({ length: Math.max(...runs.map((run) => run.length)) }, (_, i) => runs.flatMap((run) => run[i] ?? [])).flat();
}

async function server(clients: number, chunk: number, rounds: number, warmup: number, order: string, json: boolean): Promise<void> {
  const sockets: Socket[] = [];
  const all = Promise.withResolvers<void>();
  const listener = createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('error', () => {});
    if (sockets.push(socket) === clients) all.resolve();
  });
  listener.listen({ port: PORT, host: '127.0.0.1', backlog: 4096 });
  await once(listener, 'listening');
  const perReader = Math.ceil(clients / READERS);
  const readers = Array.from({ length: READERS }, (_, i) => {
    const child = fork(new URL(import.meta.url), ['--reader', String(perReader), `127.0.0.${2 + i}`]);
    return once(child, 'message').then(([lastTold]) => lastTold as number[]);
  });
  await all.promise;
  const inOrder = order === 'grouped' ? sockets : interleaved(sockets);
  const kernelMs: number[] = [];
  for (let round = 0; round < warmup + rounds; round++) {
    await sleep(1000);
    const frame = Buffer.from(`${now().toFixed(3)} ${'x'.repeat(120)}\n`);
    const before = process.cpuUsage();
    for (let i = 0; i < inOrder.length; i += chunk) {
      for (const socket of inOrder.slice(i, i + chunk)) socket.write(frame);
      await new Promise(setImmediate);
    }
    if (round >= warmup) kernelMs.push(Math.round(process.cpuUsage(before).system / 1000));
  }
  await sleep(1000);
  for (const socket of sockets) socket.destroy();
  listener.close();
  const told = await Promise.all(readers);
  const lastTold = told[0]!.map((_, round) => Math.round(Math.max(...told.map((each) => each[round] ?? 0)))).slice(warmup);
  const median = [...lastTold].sort((a, b) => a - b)[Math.floor(lastTold.length / 2)];
  console.log(json
    ? JSON.stringify({ clients, chunk, order, warmup, lastToldMs: lastTold, kernelMs })
    : `floor: ${clients} sockets, ${order}, chunks of ${chunk}: last told ${lastTold.join(' ')} ms (median ${median}); server kernel CPU ${kernelMs.join(' ')} ms`);
}

const { values } = parseArgs({ options: { clients: { type: 'string', default: '18000' }, chunk: { type: 'string', default: '128' }, rounds: { type: 'string', default: '10' }, warmup: { type: 'string', default: '2' }, order: { type: 'string', default: 'interleaved' }, json: { type: 'boolean', default: false }, reader: { type: 'boolean' } }, allowPositionals: true });
if (values.reader) await reader(Number(process.argv.at(-2)), process.argv.at(-1)!);
else await server(Number(values.clients), Number(values.chunk), Number(values.rounds), Number(values.warmup), values.order, values.json);
