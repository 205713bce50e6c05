#!/usr/bin/env node
/**
 * The client side for the peers, which wsload cannot drive (wsload speaks the API Maker protocol): the same
 * figures with the least client work, each command printing one JSON line on stdout at the end, shaped as
 * wsload's --json report (counts, rates, latency.delivery) so that the bench reads both alike.
 *
 *   node bench/peer-load.ts fill   socketio|bare <url> --clients N [--first I] [--hold S]   prints "ready N" once all registered
 *   node bench/peer-load.ts churn  socketio|bare <url> [-c 100] [-d 10] [-w 0]          connect, register (acked), close
 *   node bench/peer-load.ts notify socketio|bare <url> [--clients 1000] [-c 100] [-d 10] [-w 0] [-R RATE] [--broadcast]
 *
 * Client i registers recipientId i, as wsload's `--register announcements --per-client` does; the listeners of a
 * broadcast register BROADCAST_ID instead, as the gateway's join an event without criteria, so a broadcast
 * reaches them and not the other clients connected. -R paces the emits (all connections together), as wsload's.
 * SIGINT/SIGTERM end a fill early. Every run is bounded by its hold or duration.
 */
import { connect as connectTcp } from 'node:net';
import { parseArgs } from 'node:util';
import { io, type Socket } from 'socket.io-client';
import { clientFrame, CLOSE_TIMEOUT_MS, closeFrame, DEFAULT_TIMEOUT_S, HttpConnection, jsonPostHead, ON_TIME_MS, Opcode, readInto, upgradeRequest, WireReader } from '@herald/loadgen';
import { BROADCAST_ID } from './peers/common.ts';

type Kind = 'socketio' | 'bare';
interface PeerClient { close(): Promise<void> }

const now = (): number => performance.timeOrigin + performance.now();
/**
 * For clients held open, as wsload does: past 5,000 sockets on one source address the kernel's port search grows
 * costly. Churn's clients leave at once and take no source address: bound before connect, a port must be free of
 * every socket on that address, TIME_WAITs of an earlier fill included (the first churn after the memory levels
 * spent ~12 s of its 20 almost wholly in the kernel and read half the second's rate), while connect alone needs only a
 * free 4-tuple.
 */
const sourceAddress = (i: number): string => `127.0.0.${2 + Math.floor(i / 5000)}`;

/**
 * A bare peer's client: WebSocket on a plain TCP socket, as wsload's clients are (loadgen's wire.ts). With a `ws`
 * client the load generator was the limit of the bare peer's churn (a whole core, its server at ~46%), so the
 * floor Node can reach read lower than it is. Resolves once the server has acknowledged the register.
 */
function connectBare(url: string, i: number, recipientId: string, onSentAt: (t: number) => void, localAddress: string | undefined): Promise<PeerClient> {
  const { hostname, port } = new URL(url);
  const { promise, resolve, reject } = Promise.withResolvers<PeerClient>();
  let registered = false;
  let left: Promise<void> | undefined;
  const close = (): Promise<void> => (left ??= new Promise((done) => {
    if (tcp.closed) return done();
    tcp.once('close', () => done());
    tcp.write(closeFrame(1000));
    // As wsload's clients (and ws's closeTimeout): a server that never ends the connection does not hold the run.
    setTimeout(() => tcp.destroy(), CLOSE_TIMEOUT_MS).unref();
  }));
  const fail = (error: Error): void => { tcp.destroy(); reject(error); };
  const reader = new WireReader({
    refused: (status) => fail(new Error(`upgrade refused: HTTP ${status}`)),
    upgraded: () => tcp.write(clientFrame(Opcode.TEXT, JSON.stringify({ register: recipientId }))),
    message: (payload) => {
      if (registered) return onSentAt((JSON.parse(payload.toString()) as { sentAt: number }).sentAt);
      registered = true;
      resolve({ close });
    },
    control: (opcode, payload) => {
      if (opcode === Opcode.PING) tcp.write(clientFrame(Opcode.PONG, payload));
      // The server's close answers ours (it then ends the connection), or starts one, which is echoed.
      else if (opcode === Opcode.CLOSE && left === undefined) void close();
    },
    malformed: (reason) => fail(new Error(reason)),
  });
  const tcp = connectTcp({ host: hostname, port: Number(port), localAddress, noDelay: true, onread: readInto(reader) });
  tcp.once('connect', () => tcp.write(upgradeRequest(`${url}/?token=t${i}`)));
  tcp.on('error', fail);
  return promise;
}

function connectSocketIo(url: string, i: number, recipientId: string, onSentAt: (t: number) => void, localAddress: string | undefined): Promise<PeerClient> {
  const socket: Socket = io(url, { transports: ['websocket'], query: { token: `t${i}` }, reconnection: false, forceNew: true, localAddress } as never);
  return new Promise((resolve, reject) => {
    socket.once('connect_error', reject);
    socket.once('connect', () => {
      socket.on('notification', (body: { sentAt: number }) => onSentAt(body.sentAt));
      socket.emitWithAck('register', recipientId).then(() => resolve({ close: async () => void socket.disconnect() }), reject);
    });
  });
}

/** Client i, registered as recipient i or, as a broadcast's listener, as BROADCAST_ID; held clients get a source address. */
const connect = (kind: Kind, url: string, i: number, onSentAt: (t: number) => void, { broadcast = false, held = false } = {}): Promise<PeerClient> => {
  const recipientId = broadcast ? BROADCAST_ID : String(i);
  const localAddress = held ? sourceAddress(i) : undefined;
  return kind === 'bare' ? connectBare(url, i, recipientId, onSentAt, localAddress) : connectSocketIo(url, i, recipientId, onSentAt, localAddress);
};

/** N clients (indexes first .. first + N - 1), 100 connecting at a time. */
async function connectMany(kind: Kind, url: string, n: number, onSentAt: (t: number) => void, first = 0, broadcast = false): Promise<PeerClient[]> {
  const clients: PeerClient[] = [];
  for (let next = 0; next < n; ) {
    const batch = Array.from({ length: Math.min(100, n - next) }, (_, k) => connect(kind, url, first + next + k, onSentAt, { broadcast, held: true }));
    next += batch.length;
    clients.push(...(await Promise.all(batch)));
  }
  return clients;
}

async function fill(kind: Kind, url: string, n: number, holdS: number, first: number): Promise<void> {
  const clients = await connectMany(kind, url, n, () => {}, first);
  console.log(`ready ${clients.length}`);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, holdS * 1000);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => { clearTimeout(timer); resolve(); });
  });
  process.exit(0); // the sockets go with the process: no close handshakes to wait for
}

/** As wsload's churn: cycles started during the warm-up (`warmupS`) are not counted. */
async function churn(kind: Kind, url: string, c: number, durationS: number, warmupS: number): Promise<void> {
  const measureFrom = performance.now() + warmupS * 1000;
  const end = measureFrom + durationS * 1000;
  let completed = 0;
  let failed = 0;
  let next = 0;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const counted = performance.now() >= measureFrom;
      try {
        await (await connect(kind, url, next++ % 1_000_000, () => {})).close();
        if (counted) completed++;
      } catch { if (counted) failed++; }
    }
  };
  await Promise.all(Array.from({ length: c }, loop));
  const seconds = (performance.now() - measureFrom) / 1000;
  console.log(JSON.stringify({ command: 'churn', kind, counts: { cycles: completed, failed }, rates: { clientsPerSecond: completed / seconds } }));
  process.exit(0);
}

/**
 * One emit on a keep-alive connection: wsload's HTTP client (loadgen's http-connection.ts), so that each peer's
 * emitter costs the shared cores what the gateway's does. With Node's http client, this process spent 9.9-10.7 s
 * of CPU on a Socket.IO notify run (1,000 listeners, 2 + 10 s of emits), and 7.0-7.1 s with this one.
 */
function post(connection: HttpConnection, head: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    connection.send(`${head}${Buffer.byteLength(body)}\r\n\r\n${body}`, (status, error) => (error === undefined ? resolve(status) : reject(new Error(error))));
  });
}

const percentile = (sorted: Float64Array, p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

interface NotifyRun { n: number; c: number; durationS: number; warmupS: number; rate: number | undefined; broadcast: boolean }

/** Emits for `durationS` over `c` keep-alive connections (paced when `rate` is set); answers those accepted and the start. */
async function emitFor(emitUrl: URL, c: number, durationS: number, { n, rate, broadcast }: NotifyRun): Promise<{ ok: number; start: number }> {
  const head = jsonPostHead(emitUrl, emitUrl.pathname);
  let ok = 0;
  let next = 0;
  const start = performance.now();
  const end = start + durationS * 1000;
  let scheduled = 0;
  const loop = async (): Promise<void> => {
    const connection = new HttpConnection({ host: emitUrl.hostname, port: Number(emitUrl.port), timeoutMs: DEFAULT_TIMEOUT_S * 1000 });
    while (performance.now() < end) {
      // Paced: emit k is due k/rate s after the start, whichever connection is free takes it.
      const due = rate === undefined ? 0 : start + (scheduled++ * 1000) / rate - performance.now();
      // Not past the end: a connection whose next emit falls after it would otherwise stretch the run's time.
      if (due > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(due, end - performance.now())));
      if (performance.now() >= end) break;
      const body = broadcast ? { broadcast: true, sentAt: now() } : { recipientId: String(next++ % n), sentAt: now() };
      if ((await post(connection, head, JSON.stringify(body))) < 300) ok++;
    }
    connection.close();
  };
  await Promise.all(Array.from({ length: c }, loop));
  return { ok, start };
}

/** Waits up to 5 s for `expected` deliveries. */
async function drained(latencies: number[], expected: number): Promise<void> {
  for (const graceEnd = performance.now() + 5000; latencies.length < expected && performance.now() < graceEnd; ) await new Promise((r) => setTimeout(r, 50));
}

/** As wsload's notify: emits of the warm-up (`warmupS`) are delivered and waited for, but not counted. */
async function notify(kind: Kind, url: string, run: NotifyRun): Promise<void> {
  const { n, c, durationS, warmupS, broadcast } = run;
  const latencies: number[] = [];
  const clients = await connectMany(kind, url, n, (sentAt) => latencies.push(now() - sentAt), 0, broadcast);
  const emitUrl = new URL('/emit', url.replace(/^ws/, 'http'));
  if (warmupS > 0) {
    const warm = await emitFor(emitUrl, c, warmupS, run);
    await drained(latencies, warm.ok * (broadcast ? n : 1));
    latencies.length = 0;
  }
  const { ok, start } = await emitFor(emitUrl, c, durationS, run);
  const emitS = (performance.now() - start) / 1000;
  const expected = ok * (broadcast ? n : 1);
  await drained(latencies, expected);
  const deliveryS = (performance.now() - start) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  console.log(JSON.stringify({
    command: 'notify', kind, broadcast,
    window: { from: performance.timeOrigin + start, to: performance.timeOrigin + start + emitS * 1000 },
    counts: { clients: clients.length, emits: ok, expected, received: latencies.length, missing: expected - latencies.length },
    // As wsload's: what arrived within ON_TIME_MS of its emit.
    rates: { emitsPerSecond: ok / emitS, notificationsPerSecond: latencies.length / deliveryS, notificationsOnTimePerSecond: latencies.filter((ms) => ms <= ON_TIME_MS).length / deliveryS },
    latency: { delivery: { p50: percentile(sorted, 0.5), p90: percentile(sorted, 0.9), p99: percentile(sorted, 0.99), p99_9: percentile(sorted, 0.999), max: sorted.at(-1) } },
  }));
  process.exit(0);
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { clients: { type: 'string', short: 'n' }, first: { type: 'string', default: '0' }, hold: { type: 'string', default: '600' }, connections: { type: 'string', short: 'c', default: '100' }, duration: { type: 'string', short: 'd', default: '10' }, warmup: { type: 'string', short: 'w', default: '0' }, rate: { type: 'string', short: 'R' }, broadcast: { type: 'boolean', default: false } },
});
const [command, kind, url] = positionals as [string, Kind, string];
if (!['socketio', 'bare'].includes(kind) || !url) throw new Error('usage: peer-load.ts fill|churn|notify socketio|bare <url> ...');
if (command === 'fill') await fill(kind, url, Number(values.clients), Number(values.hold), Number(values.first));
else if (command === 'churn') await churn(kind, url, Number(values.connections), Number(values.duration), Number(values.warmup));
else if (command === 'notify') {
  const rate = values.rate === undefined ? undefined : Number(values.rate);
  await notify(kind, url, { n: Number(values.clients ?? 1000), c: Number(values.connections), durationS: Number(values.duration), warmupS: Number(values.warmup), rate, broadcast: values.broadcast === true });
}
else throw new Error(`unknown command ${command}`);
