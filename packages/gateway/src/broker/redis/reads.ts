/**
 * The emit's two reads (SMEMBERS of an event's shapes, HGET of a route's bucket), which every emit makes and nothing
 * else in the node makes as often; and those of an emit of an event with history (ZRANGE of its sticky shapes,
 * EVALSHA of an append to a route's history), all of an emit's commands on one connection. With one redis-server they
 * go on a connection of their own that speaks just enough RESP for them: through ioredis an HGET cost the node about
 * twice the CPU (a Command, its argument array, a promise and callback, a string per chunk of the batch's writev) it
 * costs here (one string written per batch, replies parsed straight from the socket's buffer) (docs/architecture.md,
 * "Measured costs"). Writes, scripts, channels and a Cluster stay with ioredis. While this connection is down
 * (connecting, or Redis gone), reads go through ioredis, which fails them at once when Redis is unreachable: an emit
 * answers 503 as before.
 */
import { createHash } from 'node:crypto';
import { connect as connectTcp, isIP, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { Commands, Liveness } from './clients.ts';

export interface Reads {
  /**
   * Whether commands sent here run in the order sent (one redis-server, one connection): a read sent after a
   * script sees what the script did. Not on a Cluster, whose keys live on different shards.
   */
  readonly inOrder: boolean;
  hget(key: string, field: string): Promise<string | null>;
  smembers(key: string): Promise<string[]>;
  /** A sorted set's members, lowest score first (an event with history's sticky shapes). */
  zrange(key: string): Promise<string[]>;
  /**
   * A script by its SHA1; rejects with Redis's NOSCRIPT error when Redis does not hold it (it restarted since the
   * script was last run with EVAL): the caller runs it through ioredis then, which loads it again.
   */
  evalsha(sha: string, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown>;
  /**
   * The number of the batch that a read made now would leave in, while that batch is unsent; undefined when there
   * is no such batch (a Cluster; this connection down). Two reads of one key in one unsent batch answer the same:
   * one can serve both.
   */
  unsentBatch(): number | undefined;
  /** Resolves once reads go the fastest way this Redis allows (the lean connection is up). */
  whenReady(): Promise<void>;
  /** Redis does not answer (probe.ts): drop the lean connection, failing what waits on it; it connects again by itself. */
  cut(why: string): void;
  close(): void;
}

/** A script's SHA1, as EVALSHA names it. */
export const scriptSha = (lua: string): string => createHash('sha1').update(lua).digest('hex');

/**
 * A script by its SHA1 through the emit's reads (their lean connection when it is up); one Redis no longer holds
 * (NOSCRIPT: it restarted since) goes through ioredis (`resend`, which loads it again): `resent`, on another connection
 * than the reads.
 */
export async function runScript(
  reads: Reads, sha: string, keys: readonly string[], args: ReadonlyArray<string | number>, resend: () => Promise<unknown>,
): Promise<{ reply: unknown; resent: boolean }> {
  try {
    return { reply: await reads.evalsha(sha, keys, args), resent: false };
  } catch (error) {
    if (!(error as Error).message.startsWith('NOSCRIPT')) throw error;
    return { reply: await resend(), resent: true };
  }
}

/**
 * Told when the emit's reads move onto the lean connection (`lean`) or back onto ioredis (not `lean`, with why:
 * Redis unreachable, a handshake Redis refused, a reply out of step). Told once per change, not once per retry.
 */
export type LeanReadsListener = (lean: boolean, why: string) => void;

/** The reads through ioredis alone: a Redis Cluster's (each read goes to its key's shard), or one connection's. */
export function readsThrough(commands: Commands, inOrder: boolean): Reads {
  return {
    inOrder,
    hget: (key, field) => commands.hget(key, field),
    smembers: (key) => commands.smembers(key),
    zrange: (key) => commands.zrange(key, '0', '-1'),
    evalsha: (sha, keys, args) => commands.evalsha(sha, keys.length, ...keys, ...args),
    unsentBatch: () => undefined,
    whenReady: () => Promise.resolve(),
    cut: () => {},
    close: () => {},
  };
}

type Reply = string | number | null | Error | Reply[];
interface Pending {
  resolve(reply: Reply): void;
  reject(error: Error): void;
}

/** Parsing stopped at the end of the bytes received: the reply's rest comes in a later read. */
const INCOMPLETE = Symbol('incomplete');
const CR = 13;
/** How long to wait before connecting again (ioredis's retryStrategy too): keep trying, at most once a second. */
export const retryDelayMs = (attempt: number): number => Math.min(50 * attempt, 1000);

/**
 * The reads for one redis-server at `url`: the lean connection for a plain redis:// or rediss:// URL, else (a
 * socket path, options in the query, which ioredis reads) through ioredis alone.
 */
export function readsFor(url: string, commands: Commands, liveness: Liveness, listener: LeanReadsListener = () => {}): Reads {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return readsThrough(commands, true);
  }
  const plain = (parsed.protocol === 'redis:' || parsed.protocol === 'rediss:') && parsed.hostname !== '' && parsed.search === '';
  return plain ? new RespReads(parsed, commands, liveness, listener) : readsThrough(commands, true);
}

/** The lean connection to one redis-server, with ioredis (`fallback`) for the reads it cannot take now. */
class RespReads implements Reads {
  /** While this connection is down, the fallback's one connection keeps the order too. */
  readonly inOrder = true;
  readonly #url: URL;
  readonly #fallback: Commands;
  readonly #listener: LeanReadsListener;
  readonly #liveness: Liveness;
  /** What the listener was last told: 'lean', or why not. */
  #told: string | undefined;
  /** Why the current socket is closing, when this side knows better than its close does. */
  #closing: string | undefined;
  #socket: Socket | undefined;
  #ready = false;
  #whenReady = Promise.withResolvers<void>();
  #closed = false;
  #attempt = 0;
  #retry: NodeJS.Timeout | undefined;
  /** Commands of this turn, written together once the turn's I/O callbacks have run. */
  #out = '';
  #batch = 0;
  /** Sent (or about to be), answered in order. */
  #pending: Pending[] = [];
  /** Received bytes not parsed yet (a reply split over reads), and where parsing is within them. */
  #in: Buffer = Buffer.alloc(0);
  #at = 0;

  constructor(url: URL, fallback: Commands, liveness: Liveness, listener: LeanReadsListener) {
    this.#url = url;
    this.#fallback = fallback;
    this.#liveness = liveness;
    this.#listener = listener;
    this.#connect();
  }

  hget(key: string, field: string): Promise<string | null> {
    if (!this.#ready) return this.#fallback.hget(key, field);
    return this.#send(`*3\r\n$4\r\nHGET\r\n${bulk(key)}${bulk(field)}`) as Promise<string | null>;
  }

  smembers(key: string): Promise<string[]> {
    if (!this.#ready) return this.#fallback.smembers(key);
    return this.#send(`*2\r\n$8\r\nSMEMBERS\r\n${bulk(key)}`) as Promise<string[]>;
  }

  zrange(key: string): Promise<string[]> {
    if (!this.#ready) return this.#fallback.zrange(key, '0', '-1');
    return this.#send(`*4\r\n$6\r\nZRANGE\r\n${bulk(key)}$1\r\n0\r\n$2\r\n-1\r\n`) as Promise<string[]>;
  }

  evalsha(sha: string, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    if (!this.#ready) return this.#fallback.evalsha(sha, keys.length, ...keys, ...args);
    let words = `$7\r\nEVALSHA\r\n$40\r\n${sha}\r\n${bulk(String(keys.length))}`;
    for (const key of keys) words += bulk(key);
    for (const arg of args) words += bulk(String(arg));
    return this.#send(`*${3 + keys.length + args.length}\r\n${words}`);
  }

  unsentBatch(): number | undefined {
    return this.#ready && this.#out !== '' ? this.#batch : undefined;
  }

  whenReady(): Promise<void> {
    return this.#whenReady.promise;
  }

  cut(why: string): void {
    this.#closeBecause(this.#socket, why);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#socket?.destroy();
  }

  #send(command: string): Promise<Reply> {
    if (this.#out === '') setImmediate(() => this.#flush());
    this.#out += command;
    const pending = Promise.withResolvers<Reply>();
    this.#pending.push(pending);
    return pending.promise;
  }

  #flush(): void {
    const out = this.#out;
    this.#out = '';
    this.#batch++;
    if (out !== '') this.#socket?.write(out);
  }

  #connect(): void {
    const { hostname, port, protocol } = this.#url;
    const address = { host: hostname.replace(/^\[|\]$/g, ''), port: Number(port || 6379) };
    // TLS names the server only by a host name (RFC 6066: never by an address).
    const tls = protocol === 'rediss:' ? { ...address, servername: isIP(address.host) === 0 ? address.host : undefined } : undefined;
    const socket = tls ? connectTls(tls) : connectTcp(address);
    this.#socket = socket;
    this.#closing = undefined;
    socket.setNoDelay(true);
    socket.setKeepAlive(true);
    // Until the handshake is answered: a connection into a partition is dropped and tried again, not waited on.
    const { lostAfterMs } = this.#liveness;
    socket.setTimeout(lostAfterMs, () => this.#closeBecause(socket, `Redis did not answer a connection attempt within ${lostAfterMs} ms`));
    socket.on('data', (chunk: Buffer) => this.#receive(chunk));
    socket.on('error', (error) => {
      this.#closing ??= error.message;
    });
    socket.on('close', () => this.#lost(socket));
    socket.once(protocol === 'rediss:' ? 'secureConnect' : 'connect', () => void this.#handshake(socket));
  }

  /**
   * AUTH and SELECT as the URL asks, and a PING; this connection takes reads once Redis has answered them (a TCP
   * connection alone may reach no Redis: a proxy in a partition accepts it).
   */
  async #handshake(socket: Socket): Promise<void> {
    const { username, password, pathname } = this.#url;
    const db = pathname.slice(1);
    const steps: Promise<Reply>[] = [];
    if (password !== '') {
      const credentials = username === '' ? [password] : [username, password];
      steps.push(this.#send(command('AUTH', ...credentials.map(decodeURIComponent))));
    }
    if (db !== '' && db !== '0') steps.push(this.#send(command('SELECT', db)));
    steps.push(this.#send(command('PING')));
    try {
      for (const reply of await Promise.all(steps)) if (reply instanceof Error) throw reply;
      if (socket !== this.#socket) return;
      socket.setTimeout(0);
      this.#attempt = 0;
      this.#ready = true;
      this.#whenReady.resolve();
      this.#tell(true, 'lean');
    } catch (error) {
      this.#closeBecause(socket, `Redis refused the handshake: ${(error as Error).message}`); // its close retries
    }
  }

  #tell(lean: boolean, why: string): void {
    if (this.#told === why) return;
    this.#told = why;
    this.#listener(lean, why);
  }

  /** Closes `socket`, and says why when it is still the current one (a handshake may outlive its socket). */
  #closeBecause(socket: Socket | undefined, why: string): void {
    if (socket === undefined || socket !== this.#socket) return void socket?.destroy();
    this.#closing = why;
    socket.destroy();
  }

  #lost(socket: Socket): void {
    if (socket !== this.#socket) return;
    if (this.#ready) this.#whenReady = Promise.withResolvers<void>();
    this.#ready = false;
    this.#socket = undefined;
    this.#out = '';
    this.#in = Buffer.alloc(0);
    this.#at = 0;
    const lost = this.#pending;
    this.#pending = [];
    for (const pending of lost) pending.reject(new Error('the connection to Redis closed'));
    if (this.#closed) return;
    this.#tell(false, this.#closing ?? 'Redis closed the connection');
    this.#retry = setTimeout(() => this.#connect(), retryDelayMs(++this.#attempt));
  }

  #receive(chunk: Buffer): void {
    // The socket allocates a buffer per read, so what is left of one can be kept as a view.
    this.#in = this.#at < this.#in.length ? Buffer.concat([this.#in.subarray(this.#at), chunk]) : chunk;
    this.#at = 0;
    while (this.#at < this.#in.length) {
      const start = this.#at;
      let reply: Reply | typeof INCOMPLETE;
      try {
        reply = this.#parse();
      } catch (error) {
        return this.#closeBecause(this.#socket, `Redis answered out of step: ${(error as Error).message}`); // start again
      }
      if (reply === INCOMPLETE) {
        this.#at = start;
        return;
      }
      const pending = this.#pending.shift();
      if (pending === undefined) return this.#closeBecause(this.#socket, `Redis answered out of step: a reply nobody asked for (${String(reply).slice(0, 200)})`);
      if (reply instanceof Error) pending.reject(reply);
      else pending.resolve(reply);
    }
  }

  /** One reply from #in at #at (RESP2: the types these commands and AUTH/SELECT answer with). */
  #parse(): Reply | typeof INCOMPLETE {
    const data = this.#in;
    const type = data[this.#at];
    const end = data.indexOf(CR, this.#at + 1);
    if (end < 0 || end + 1 >= data.length) return INCOMPLETE;
    const lineStart = this.#at + 1;
    this.#at = end + 2;
    switch (type) {
      case 0x24: { // $ bulk string
        const length = integerIn(data, lineStart, end);
        if (length < 0) return null;
        if (this.#at + length + 2 > data.length) return INCOMPLETE;
        const value = data.toString('utf8', this.#at, this.#at + length);
        this.#at += length + 2;
        return value;
      }
      case 0x2a: { // * array
        const count = integerIn(data, lineStart, end);
        if (count < 0) return null;
        const items: Reply[] = [];
        for (let i = 0; i < count; i++) {
          if (this.#at >= data.length) return INCOMPLETE;
          const item = this.#parse();
          if (item === INCOMPLETE) return INCOMPLETE;
          items.push(item);
        }
        return items;
      }
      case 0x3a: // : integer
        return integerIn(data, lineStart, end);
      case 0x2b: // + simple string
        return data.toString('utf8', lineStart, end);
      case 0x2d: // - error
        return new Error(data.toString('utf8', lineStart, end));
      default:
        throw new Error(`Redis answered a reply of unknown type ${type}`);
    }
  }
}

function bulk(value: string): string {
  return `$${Buffer.byteLength(value)}\r\n${value}\r\n`;
}

function command(...words: string[]): string {
  return `*${words.length}\r\n${words.map(bulk).join('')}`;
}

/** The decimal integer of data[from, to), with its sign. */
function integerIn(data: Buffer, from: number, to: number): number {
  const negative = data[from] === 0x2d;
  let value = 0;
  for (let i = negative ? from + 1 : from; i < to; i++) value = value * 10 + data[i]! - 0x30;
  return negative ? -value : value;
}
