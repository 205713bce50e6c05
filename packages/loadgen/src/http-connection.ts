/**
 * One keep-alive HTTP/1.1 connection with one request at a time, as autocannon drives its connections: the
 * request is written as one string and the response read from the raw bytes (status and Content-Length), so
 * the emitter spends little of the CPU it shares with the node under test.
 */
import { connect, type Socket } from 'node:net';
import { readInto } from './receive.ts';

export interface HttpTarget {
  host: string;
  port: number;
  timeoutMs: number;
}

/** status 0 means no response: `error` says why. */
export type ResponseHandler = (status: number, error: string | undefined) => void;

const HEADER_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = [Buffer.from('content-length:'), Buffer.from('Content-Length:')];
const CHUNKED = Buffer.from('chunked');
const CHUNKED_END = Buffer.from('\r\n0\r\n\r\n');

const INCOMPLETE = -1;

/** The status of the response in `bytes` once it is complete, INCOMPLETE before. */
function responseStatus(bytes: Buffer): number {
  const headerEnd = bytes.indexOf(HEADER_END);
  if (headerEnd < 0) return INCOMPLETE;
  const status = (bytes[9]! - 0x30) * 100 + (bytes[10]! - 0x30) * 10 + (bytes[11]! - 0x30);
  const bodyStart = headerEnd + HEADER_END.length;
  for (const name of CONTENT_LENGTH) {
    const at = bytes.indexOf(name);
    if (at < 0 || at > headerEnd) continue;
    let length = 0;
    for (let i = at + name.length; i < headerEnd; i++) {
      const byte = bytes[i]!;
      if (byte >= 0x30 && byte <= 0x39) length = length * 10 + byte - 0x30;
      else if (byte !== 0x20) break;
    }
    return bytes.length >= bodyStart + length ? status : INCOMPLETE;
  }
  // Chunked (Fastify sends Content-Length for JSON, so this is the odd case): complete at the last chunk.
  const chunked = bytes.indexOf(CHUNKED);
  if (chunked < 0 || chunked > headerEnd) return status;
  return bytes.indexOf(CHUNKED_END, bodyStart - 2) < 0 ? INCOMPLETE : status;
}

/**
 * The head of a JSON POST to `path` up to the value of Content-Length, built once per emitter: each request is this,
 * the body's length in bytes, a blank line and the body.
 */
export function jsonPostHead(url: URL, path: string, headers: Readonly<Record<string, string>> = {}): string {
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n${extra}Content-Length: `;
}

export class HttpConnection {
  readonly #target: HttpTarget;
  #socket: Socket | undefined;
  #pending: Buffer | undefined;
  #handler: ResponseHandler | undefined;

  constructor(target: HttpTarget) {
    this.#target = target;
  }

  /** Write one whole request; `handler` runs once its response is complete, or the connection failed. */
  send(request: string, handler: ResponseHandler): void {
    this.#handler = handler;
    (this.#socket ??= this.#open()).write(request);
  }

  close(): void {
    this.#socket?.destroy();
  }

  #open(): Socket {
    const { host, port, timeoutMs } = this.#target;
    const socket = connect({ host, port, noDelay: true, onread: readInto({ push: (chunk) => this.#onData(chunk) }) });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('timeout')));
    socket.on('error', (error: NodeJS.ErrnoException) => this.#finish(0, error.code ?? error.message));
    socket.on('close', () => {
      if (this.#socket === socket) this.#socket = undefined;
      this.#pending = undefined;
      this.#finish(0, 'connection closed');
    });
    return socket;
  }

  /** `chunk` is only read during the call (receive.ts): an incomplete response is copied. */
  #onData(chunk: Buffer): void {
    const bytes = this.#pending ? Buffer.concat([this.#pending, chunk]) : chunk;
    const status = responseStatus(bytes);
    if (status === INCOMPLETE) {
      this.#pending = Buffer.from(bytes);
      return;
    }
    this.#pending = undefined;
    this.#finish(status, undefined);
  }

  #finish(status: number, error: string | undefined): void {
    const handler = this.#handler;
    this.#handler = undefined;
    handler?.(status, error);
  }
}
