/**
 * The emit's fast path: the gateway's own HTTP/1.1 reader in front of Node's HTTP server, for the one call a back
 * end makes tens of thousands of times a second. A request that is a plain emit (POST to the emit path, HTTP/1.1,
 * a JSON body with Content-Length, nothing unusual in its head) is answered here, on the connection it came on: one
 * read and one write, no IncomingMessage, ServerResponse, fastify request, reply or hooks. Node's server cost
 * ~16 µs of the node's ~37 µs per unpaced emit (`node bench/notify-floor.ts --server http` against `--server raw`).
 *
 * Everything else goes to Node's server, and fastify answers it as before: a connection whose first bytes are not a
 * POST (every WebSocket upgrade) at once, and a connection whose next request is not a plain emit with the bytes read
 * so far, that request's included. It is then fastify's for good. So fastify's limits, errors and parsing are the only
 * ones an unusual request (chunked, Expect, HTTP/1.0, a query, odd header bytes, a body its schema must judge) ever
 * meets, and this reader only has to recognise the plain case. Nothing is done for a request before it is taken here,
 * so a hand-over never repeats an emit.
 */
import { maxHeaderSize, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { isRecord } from '@herald/protocol';
import type { Metrics } from '../metrics.ts';
import { API_TOKEN_HEADER } from './headers.ts';

/** What the fast path takes from a request for its route. */
export interface FastCall {
  /** The x-am-authorization header, undefined when absent. */
  apiToken: string | undefined;
  /** The body, parsed: a plain object. */
  body: Record<string, unknown>;
}

export interface FastAnswer {
  statusCode: number;
  /** The JSON body. */
  body: string;
  /** Seconds, for a Retry-After header. */
  retryAfterS?: number;
}

/**
 * The route: its answer (a promise that never rejects), or undefined when the call is for fastify to answer (a body its
 * schema would coerce or refuse); undefined means nothing was done.
 */
export type FastRoute = (call: FastCall) => Promise<FastAnswer> | undefined;

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

/** A request this reader takes: where it ends in the bytes read, and what its head said. */
interface PlainRequest {
  end: number;
  apiToken: string | undefined;
  close: boolean;
  body: Record<string, unknown>;
}

const INCOMPLETE = 'incomplete';
type Reading = PlainRequest | typeof INCOMPLETE | HandOverReason;

/** What a connection needs of the fast path it belongs to. */
interface Owner {
  readonly server: Server;
  /** The Keep-Alive header's timeout. */
  readonly keepAliveS: number;
  readonly route: FastRoute;
  readRequest(bytes: Buffer): Reading;
  forget(connection: PlainConnection): void;
  /**
   * Give the socket, and `unread` (bytes read but not answered), to Node's server. Its listeners go on first, then
   * `unread` goes back in front of whatever the socket holds: a flowing socket hands it to them at once, a socket this
   * reader paused keeps it first in line until resumed.
   */
  handOver(socket: Socket, unread: Buffer | undefined, reason: HandOverReason | undefined): void;
}

export class EmitFastPath {
  readonly #options: FastPathOptions;
  readonly #requestLine: string;
  readonly #connections = new Set<PlainConnection>();

  constructor(options: FastPathOptions) {
    this.#options = options;
    this.#requestLine = `POST ${options.path} HTTP/1.1\r\n`;
  }

  /** Put the reader in front of the server's connection listeners (Node's HTTP server's own). */
  install(server: Server): void {
    const listeners = server.listeners('connection') as Array<(socket: Socket) => void>;
    server.removeAllListeners('connection');
    const { metrics, route } = this.#options;
    const owner: Owner = {
      server,
      keepAliveS: Math.floor(server.keepAliveTimeout / 1000),
      route,
      readRequest: (bytes) => this.#readRequest(bytes),
      forget: (connection) => this.#connections.delete(connection),
      handOver(socket, unread, reason) {
        if (reason !== undefined) metrics.fastPathHandOvers.inc({ reason });
        const paused = socket.isPaused();
        for (const listener of listeners) listener.call(server, socket);
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
   * cut off after the server's headersTimeout, as Node's server would. A timer of its own, not socket.setTimeout:
   * a socket keeps its last timeout object even once cleared (~175 B of heap per client for good, measured by heap
   * snapshots of 5,000 clients).
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

  /** One request from the start of `bytes`: taken, incomplete so far, or not this reader's (and why). */
  #readRequest(bytes: Buffer): Reading {
    const headEnd = bytes.indexOf(HEAD_END);
    if (headEnd < 0) return bytes.length > maxHeaderSize ? 'http_form' : INCOMPLETE;
    if (headEnd > maxHeaderSize) return 'http_form';
    const head = bytes.toString('latin1', 0, headEnd);
    if (!head.startsWith(this.#requestLine)) return 'other_request';
    const fields = headFields(head.slice(this.#requestLine.length));
    if (fields === undefined || fields.contentLength > this.#options.bodyLimit) return 'http_form';
    const start = headEnd + HEAD_END.length;
    const end = start + fields.contentLength;
    if (bytes.length < end) return INCOMPLETE;
    const body = plainJsonObject(bytes.toString('utf8', start, end));
    if (body === undefined) return 'body';
    return { end, apiToken: fields.apiToken, close: fields.close, body };
  }
}

interface HeadFields {
  contentLength: number;
  apiToken: string | undefined;
  close: boolean;
}

/**
 * The header lines after the request line, when they are plain: each a token, a colon and a value of visible bytes;
 * one Host, one Content-Length, a JSON Content-Type, at most one x-am-authorization; no Transfer-Encoding, Expect,
 * Upgrade or Content-Encoding. Undefined otherwise: Node's server then answers as it would have.
 */
function headFields(lines: string): HeadFields | undefined {
  let contentLength: number | undefined;
  let apiToken: string | undefined;
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
  return { contentLength, apiToken: apiToken === '' ? undefined : apiToken, close };
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
  #unread: Buffer | undefined;
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
    this.#unread = this.#unread === undefined ? chunk : Buffer.concat([this.#unread, chunk]);
    if (!this.#answering) this.#next();
    else if (this.#unread.length > PIPELINE_BOUND) this.#socket.pause();
  };

  closeWhenIdle(): void {
    this.#closeAfter = true;
    if (!this.#answering) this.#socket.destroy();
  }

  #next(): void {
    const unread = this.#unread;
    const request = unread === undefined ? INCOMPLETE : this.#owner.readRequest(unread);
    if (request === INCOMPLETE) return this.#clientEnded ? void this.#socket.end() : this.#wait();
    if (typeof request === 'string') return this.#handOver(request);
    const answer = this.#owner.route({ apiToken: request.apiToken, body: request.body });
    if (answer === undefined) return this.#handOver('body');
    this.#unread = request.end < unread!.length ? unread!.subarray(request.end) : undefined;
    this.#waitingSince = 0;
    this.#closeAfter ||= request.close;
    this.#answering = true;
    void answer.then(this.#answer);
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
    if (this.#unread === undefined) return;
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

  #handOver(reason: HandOverReason): void {
    const socket = this.#socket;
    socket.removeListener('data', this.read);
    socket.removeListener('error', ignore);
    socket.removeListener('close', this.#closed);
    socket.removeListener('end', this.#ended);
    socket.removeListener('timeout', this.#idle);
    socket.setTimeout(0);
    this.#owner.forget(this);
    const unread = this.#unread;
    this.#unread = undefined;
    this.#owner.handOver(socket, unread, reason);
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
function responseOf({ statusCode, body, retryAfterS }: FastAnswer, keepAliveS: number | undefined): string {
  const connection = keepAliveS === undefined ? 'Connection: close' : `Connection: keep-alive\r\nKeep-Alive: timeout=${keepAliveS}`;
  const retryAfter = retryAfterS === undefined ? '' : `retry-after: ${retryAfterS}\r\n`;
  return (
    `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\n${retryAfter}content-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nDate: ${httpDate()}\r\n${connection}\r\n\r\n${body}`
  );
}
