/**
 * The emit's fast path: the gateway's own HTTP/1.1 reader in front of Node's HTTP server, for the one call a back end
 * makes tens of thousands of times a second. A request that is a plain emit (POST to the emit path, HTTP/1.1, a JSON
 * body with Content-Length, nothing unusual in its head) is answered here, on the connection it came on: one read and
 * one write, no IncomingMessage, ServerResponse, fastify request, reply or hooks. Node's server and fastify were a
 * large share of an unpaced emit's cost (docs/architecture.md, "Measured costs").
 *
 * Everything else goes to Node's server, and fastify answers it as before: a connection whose first bytes are not a
 * POST (every WebSocket upgrade) at once, and a connection whose next request is not a plain emit with the bytes read
 * so far, that request's included. It is then fastify's for good. So fastify's limits, errors and parsing are the only
 * ones an unusual request (chunked, Expect, HTTP/1.0, a query, odd header bytes, a body its schema must judge) ever
 * meets, and this reader only has to recognise the plain case. Nothing is done for a request before it is taken here,
 * so a hand-over never repeats an emit.
 *
 * Bytes that cannot begin a plain emit's request line go to Node's server at once, and so does a request the client
 * stopped sending in the middle of (it ended its side): Node's server judges them, fastify answers 400.
 *
 * The API token is checked as soon as a head is read, as the route's onRequest hook does before fastify reads a body:
 * a call without a valid one is answered at once (the same 401 bytes as fastify's), its body is read and dropped as it
 * comes, never kept, and the connection goes on with the next request, as with fastify. (One difference: a client that
 * ends its side before the whole of such a body is sent gets only the 401, where fastify adds a 400.) The bytes of a
 * request waiting for the rest of its body are kept in one buffer that grows by doubling (unread-bytes.ts), and its
 * head is read once: a body in many small reads costs each byte a copy or two, not one per read after it.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { API_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, isRecord } from '@herald/protocol';
import type { Metrics } from '../metrics.ts';
import { UnreadBytes } from './unread-bytes.ts';

// Not `import ... from 'node:http'`: an ES import of node:http reads every export of the module, its WebSocket,
// MessageEvent and CloseEvent too, and so loads undici, which no node uses (docs/architecture.md, "Measured costs").
// Fastify's require of node:http reads none of them.
const { maxHeaderSize, STATUS_CODES } = process.getBuiltinModule('node:http');

export interface FastAnswer {
  statusCode: number;
  /** The JSON body. */
  body: string;
  /** Seconds, for a Retry-After header. */
  retryAfterS?: number;
  /** A repeat answered under its Idempotency-Key: the idempotent-replayed header. */
  replayed?: boolean;
}

/**
 * A caller's emit, once its token was found good: the answer to the body (parsed: a plain object), a promise that never
 * rejects; or undefined when the call is for fastify to answer (a body its schema would coerce or refuse), and then
 * nothing was done.
 */
export type FastEmit = (body: Record<string, unknown>) => Promise<FastAnswer> | undefined;

/**
 * The route, asked as soon as a head is read with the x-am-authorization and Idempotency-Key headers (undefined when
 * absent): the refusal to answer at once, or what answers the body once it is read.
 */
export type FastRoute = (apiToken: string | undefined, idempotencyKey: string | undefined) => FastAnswer | FastEmit;

/** Why a connection went to Node's server (herald_http_fast_path_handovers_total). */
export type HandOverReason = 'other_request' | 'http_form' | 'body';

export interface FastPathOptions {
  /** The path answered here, e.g. `/api/system-api/<userPath>/emit-event-ws`. */
  path: string;
  route: FastRoute;
  /** fastify's bodyLimit: a larger body is fastify's to refuse (413). */
  bodyLimit: number;
  metrics: Metrics;
}

const HEAD_END = Buffer.from('\r\n\r\n');
const POST = 0x50; // 'P'
/** An RFC 9110 token: what a header name may be. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A header value as llhttp takes it strictly: visible bytes, spaces and tabs (latin1 keeps bytes as they are). */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const DIGITS = /^\d{1,10}$/;
const JSON_TYPE = /^application\/json\s*(;|$)/i;
/** Pipelined bytes held while a call is answered before the socket stops reading (Node's server does the same). */
const PIPELINE_BOUND = 64 * 1024;

/** The head of a request this reader takes: where its body is in the bytes read, and what the route made of it. */
interface PlainHead {
  bodyStart: number;
  end: number;
  close: boolean;
  /** A refusal, answered without reading the body, or what takes the body. */
  caller: FastAnswer | FastEmit;
}

const INCOMPLETE = 'incomplete';
type HeadReading = PlainHead | typeof INCOMPLETE | HandOverReason;

/** What a connection needs of the fast path it belongs to. */
interface Owner {
  readonly server: Server;
  /** The Keep-Alive header's timeout. */
  readonly keepAliveS: number;
  /** The head at the start of `bytes`; the search for its end starts at `from` (bytes before it were searched). */
  readHead(bytes: Buffer, from: number): HeadReading;
  forget(connection: PlainConnection): void;
  /**
   * Give the socket, and `unread` (bytes read but not answered), to Node's server. Its listeners go on first, then
   * `unread` goes back in front of whatever the socket holds: a flowing socket hands it to them at once, a socket this
   * reader paused keeps it first in line until resumed. `ended`: the client has sent its last byte, which the socket
   * told this reader already: `unread` and the end are told to Node's server's listeners again.
   */
  handOver(socket: Socket, unread: Buffer | undefined, reason: HandOverReason | undefined, ended?: boolean): void;
}

export class EmitFastPath {
  readonly #options: FastPathOptions;
  readonly #requestLine: string;
  readonly #requestLineBytes: Buffer;
  readonly #connections = new Set<PlainConnection>();

  constructor(options: FastPathOptions) {
    this.#options = options;
    this.#requestLine = `POST ${options.path} HTTP/1.1\r\n`;
    this.#requestLineBytes = Buffer.from(this.#requestLine, 'latin1');
  }

  /** Put the reader in front of the server's connection listeners (Node's HTTP server's own). */
  install(server: Server): void {
    const listeners = server.listeners('connection') as Array<(socket: Socket) => void>;
    server.removeAllListeners('connection');
    const { metrics } = this.#options;
    const owner: Owner = {
      server,
      keepAliveS: Math.floor(server.keepAliveTimeout / 1000),
      readHead: (bytes, from) => this.#readHead(bytes, from),
      forget: (connection) => this.#connections.delete(connection),
      handOver(socket, unread, reason, ended = false) {
        if (reason !== undefined) metrics.fastPathHandOvers.inc({ reason });
        const paused = socket.isPaused();
        for (const listener of listeners) listener.call(server, socket);
        if (ended) {
          // A stream takes no unshift after its end: its listeners are told the bytes, then the end, directly.
          if (unread !== undefined) socket.emit('data', unread);
          socket.emit('end');
          return;
        }
        if (unread !== undefined) socket.unshift(unread);
        if (paused) socket.resume();
      },
    };
    server.on('connection', (socket: Socket) => this.#accept(socket, owner));
  }

  /** The node is closing: idle connections end now, busy ones after their answer (with Connection: close). */
  close(): void {
    for (const connection of this.#connections) connection.closeWhenIdle();
  }

  /**
   * The first bytes tell: a WebSocket upgrade (a GET) goes to Node's server at once. A client that sends nothing is
   * cut off after the server's headersTimeout, as Node's server would. A timer of its own, not socket.setTimeout: a
   * socket keeps its last timeout object even once cleared, heap each client would hold for good
   * (docs/architecture.md, "Measured costs").
   */
  #accept(socket: Socket, owner: Owner): void {
    const silent = setTimeout(() => socket.destroy(), owner.server.headersTimeout).unref();
    const first = (chunk: Buffer): void => {
      socket.removeListener('data', first);
      socket.removeListener('error', ignore);
      socket.removeListener('end', gone);
      clearTimeout(silent);
      if (chunk[0] !== POST) return owner.handOver(socket, chunk, undefined);
      const connection = new PlainConnection(socket, owner);
      this.#connections.add(connection);
      connection.read(chunk);
    };
    // A client that leaves before its first byte (a TCP probe): the server's sockets stay half open (allowHalfOpen),
    // and until the timer above, this one would hold up the server's close.
    const gone = (): void => {
      clearTimeout(silent);
      socket.destroy();
    };
    socket.on('error', ignore);
    socket.on('end', gone);
    socket.on('data', first);
  }

  /** One request's head from the start of `bytes`: taken, incomplete so far, or not this reader's (and why). */
  #readHead(bytes: Buffer, from: number): HeadReading {
    const headEnd = bytes.indexOf(HEAD_END, from);
    if (headEnd < 0) {
      // Bytes that cannot begin this reader's request line are Node's to judge now (a 400 for garbage), not after a head.
      const lineBytes = Math.min(bytes.length, this.#requestLineBytes.length);
      if (bytes.compare(this.#requestLineBytes, 0, lineBytes, 0, lineBytes) !== 0) return 'other_request';
      return bytes.length > maxHeaderSize ? 'http_form' : INCOMPLETE;
    }
    if (headEnd > maxHeaderSize) return 'http_form';
    const head = bytes.toString('latin1', 0, headEnd);
    if (!head.startsWith(this.#requestLine)) return 'other_request';
    const fields = headFields(head.slice(this.#requestLine.length));
    if (fields === undefined || fields.contentLength > this.#options.bodyLimit) return 'http_form';
    const bodyStart = headEnd + HEAD_END.length;
    return { bodyStart, end: bodyStart + fields.contentLength, close: fields.close, caller: this.#options.route(fields.apiToken, fields.idempotencyKey) };
  }
}

interface HeadFields {
  contentLength: number;
  apiToken: string | undefined;
  idempotencyKey: string | undefined;
  close: boolean;
}

/**
 * The header lines after the request line, when they are plain: each a token, a colon and a value of visible bytes;
 * one Host, one Content-Length, a JSON Content-Type, at most one x-am-authorization and one Idempotency-Key; no Transfer-Encoding, Expect,
 * Upgrade or Content-Encoding. Undefined otherwise: Node's server then answers as it would have.
 */
function headFields(lines: string): HeadFields | undefined {
  let contentLength: number | undefined;
  let apiToken: string | undefined;
  let idempotencyKey: string | undefined;
  let json = false;
  let host = false;
  let close = false;
  for (const line of lines.split('\r\n')) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon);
    const value = line.slice(colon + 1).trim();
    if (colon <= 0 || !TOKEN.test(name) || !FIELD_VALUE.test(value)) return undefined;
    switch (name.toLowerCase()) {
      case 'content-length':
        if (contentLength !== undefined || !DIGITS.test(value)) return undefined;
        contentLength = Number(value);
        break;
      case API_TOKEN_HEADER:
        if (apiToken !== undefined) return undefined;
        apiToken = value;
        break;
      case IDEMPOTENCY_KEY_HEADER:
        if (idempotencyKey !== undefined) return undefined;
        idempotencyKey = value;
        break;
      case 'content-type':
        if (json) return undefined;
        json = JSON_TYPE.test(value);
        if (!json) return undefined;
        break;
      case 'host':
        if (host) return undefined;
        host = true;
        break;
      case 'connection':
        for (const option of value.toLowerCase().split(',')) {
          const trimmed = option.trim();
          if (trimmed === 'upgrade') return undefined;
          if (trimmed === 'close') close = true;
        }
        break;
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
      case 'content-encoding':
        return undefined;
    }
  }
  if (contentLength === undefined || !json || !host) return undefined;
  return { contentLength, apiToken: apiToken === '' ? undefined : apiToken, idempotencyKey, close };
}

/**
 * The body as JSON.parse reads it, when it is a plain object fastify would parse the same way: a body naming
 * __proto__ or constructor is for secure-json-parse to judge, and a syntax error for fastify to answer.
 */
function plainJsonObject(text: string): Record<string, unknown> | undefined {
  if (text.includes('__proto__') || text.includes('constructor')) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return isRecord(value) ? value : undefined;
}

/** A connection answered here, one request at a time, until it closes or goes to Node's server. */
class PlainConnection {
  readonly #socket: Socket;
  readonly #owner: Owner;
  /** Bytes read and not yet answered. */
  readonly #unread = new UnreadBytes();
  /** The head of the request whose body is still coming: read once. */
  #head: PlainHead | undefined;
  /** How many of the bytes waiting were searched for the end of a head, in vain. */
  #searched = 0;
  /** Bytes of a refused request's body still to come: dropped as they arrive. */
  #dropping = 0;
  #answering = false;
  /** The client asked for it (Connection: close), or the node is closing. */
  #closeAfter = false;
  /** The client has sent its last byte (the server's sockets stay half open: allowHalfOpen). */
  #clientEnded = false;
  /** When the bytes of an incomplete request began to wait (0: none waits): a head that trickles in is cut off. */
  #waitingSince = 0;

  constructor(socket: Socket, owner: Owner) {
    this.#socket = socket;
    this.#owner = owner;
    socket.on('data', this.read);
    socket.on('error', ignore);
    socket.on('close', this.#closed);
    socket.on('end', this.#ended);
    socket.setTimeout(owner.server.keepAliveTimeout, this.#idle);
  }

  readonly read = (chunk: Buffer): void => {
    let kept = chunk;
    if (this.#dropping > 0) {
      const dropped = Math.min(this.#dropping, chunk.length);
      this.#dropping -= dropped;
      if (dropped === chunk.length) return;
      kept = chunk.subarray(dropped);
    }
    this.#unread.append(kept, this.#head?.end);
    if (!this.#answering) this.#next();
    else if (this.#unread.length > PIPELINE_BOUND) this.#socket.pause();
  };

  closeWhenIdle(): void {
    this.#closeAfter = true;
    if (!this.#answering) this.#socket.destroy();
  }

  #next(): void {
    const bytes = this.#unread.view();
    const head = this.#head ?? this.#owner.readHead(bytes, this.#searched);
    if (head === INCOMPLETE) {
      // A head's end may straddle two reads: the next search starts a few bytes back.
      this.#searched = Math.max(0, bytes.length - HEAD_END.length + 1);
      return this.#incomplete();
    }
    if (typeof head === 'string') return this.#handOver(head);
    const { caller } = head;
    if (typeof caller !== 'function') return this.#refuse(head, caller);
    if (bytes.length < head.end) {
      this.#head = head;
      return this.#incomplete();
    }
    const body = plainJsonObject(bytes.toString('utf8', head.bodyStart, head.end));
    const answer = body === undefined ? undefined : caller(body);
    if (answer === undefined) return this.#handOver('body');
    this.#take(head, head.end);
    void answer.then(this.#answer);
  }

  /** A refused caller is answered at once; the body it sends is not read, but dropped as it comes. */
  #refuse(head: PlainHead, refusal: FastAnswer): void {
    const arrived = Math.min(head.end, this.#unread.length);
    this.#dropping = head.end - arrived;
    this.#take(head, arrived);
    void Promise.resolve(refusal).then(this.#answer);
  }

  /** The request is this reader's to answer: its `count` bytes are done with. */
  #take(head: PlainHead, count: number): void {
    this.#unread.consume(count);
    this.#head = undefined;
    this.#searched = 0;
    this.#waitingSince = 0;
    this.#closeAfter ||= head.close;
    this.#answering = true;
  }

  /**
   * A request is not whole yet. Once the client has ended its side it never will be: Node's server judges what was sent
   * (fastify answers 400), or, with nothing waiting, the connection ends.
   */
  #incomplete(): void {
    if (!this.#clientEnded) this.#wait();
    else if (this.#unread.length === 0) this.#socket.end();
    else this.#handOver('http_form', true);
  }

  readonly #answer = (answer: FastAnswer): void => {
    this.#answering = false;
    const socket = this.#socket;
    if (socket.destroyed) return;
    socket.write(responseOf(answer, this.#closeAfter ? undefined : this.#owner.keepAliveS));
    if (this.#closeAfter) {
      socket.removeListener('data', this.read);
      socket.end();
      return;
    }
    if (socket.isPaused()) socket.resume();
    this.#next();
  };

  /** An incomplete request waits for its bytes, for as long as Node's server gives a head (headersTimeout). */
  #wait(): void {
    if (this.#unread.length === 0) return;
    const now = Date.now();
    if (this.#waitingSince === 0) this.#waitingSince = now;
    else if (now - this.#waitingSince > this.#owner.server.headersTimeout) this.#socket.destroy();
  }

  readonly #idle = (): void => {
    if (!this.#answering) this.#socket.destroy();
  };

  readonly #closed = (): void => {
    this.#owner.forget(this);
  };

  /** Requests read before the client's last byte are answered; then the connection ends. */
  readonly #ended = (): void => {
    this.#clientEnded = true;
    if (!this.#answering) this.#next();
  };

  #handOver(reason: HandOverReason, ended = false): void {
    const socket = this.#socket;
    socket.removeListener('data', this.read);
    socket.removeListener('error', ignore);
    socket.removeListener('close', this.#closed);
    socket.removeListener('end', this.#ended);
    socket.removeListener('timeout', this.#idle);
    socket.setTimeout(0);
    this.#owner.forget(this);
    this.#owner.handOver(socket, this.#unread.take(), reason, ended);
  }
}

/** Resets and other socket errors end the connection ('close' follows); there is no one else to tell. */
function ignore(): void {}

let dateSecond = 0;
let date = '';

/** The Date header's value, formatted once a second. */
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    date = new Date(now).toUTCString();
  }
  return date;
}

/** The whole response, head and body, as fastify writes it; keepAliveS undefined: the connection closes after it. */
function responseOf({ statusCode, body, retryAfterS, replayed }: FastAnswer, keepAliveS: number | undefined): string {
  const connection = keepAliveS === undefined ? 'Connection: close' : `Connection: keep-alive\r\nKeep-Alive: timeout=${keepAliveS}`;
  const retryAfter = retryAfterS === undefined ? '' : `retry-after: ${retryAfterS}\r\n`;
  const replay = replayed === true ? `${IDEMPOTENT_REPLAYED_HEADER}: true\r\n` : '';
  return (
    `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\n${retryAfter}${replay}content-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nDate: ${httpDate()}\r\n${connection}\r\n\r\n${body}`
  );
}
