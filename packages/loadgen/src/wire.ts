/**
 * The client side of RFC 6455, as little of it as a load generator needs, on a plain TCP socket. A `ws` client
 * costs more per connection than the node under test spends taking it (its handshake goes through Node's HTTP
 * client, a random key and a SHA-1 per connection, a Receiver and a Sender per socket; figures in README.md). Here
 * the upgrade is one string written whole, the key is fixed (so the accept to expect is computed once), and frames
 * are read straight from the received bytes.
 *
 * What it does not do, since no server it drives needs it: extensions (permessage-deflate is never offered),
 * fragmented messages (a fragment ends the connection as a protocol error), messages over 2^32 bytes.
 */
import { createHash } from 'node:crypto';

/** The RFC's own sample key: any 16 bytes in base64 will do; it only proves the server speaks WebSocket. */
const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
/** What Sec-WebSocket-Accept must say to KEY; found anywhere in the 101's head, it can only be that header. */
const ACCEPT = Buffer.from(createHash('sha1').update(`${KEY}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64'));
const HEAD_END = Buffer.from('\r\n\r\n');

/** How long a client waits, after the close frames, for the server to end the connection (as ws's closeTimeout). */
export const CLOSE_TIMEOUT_MS = 30_000;

export const Opcode = { CONTINUATION: 0x0, TEXT: 0x1, BINARY: 0x2, CLOSE: 0x8, PING: 0x9, PONG: 0xa } as const;
export type Opcode = (typeof Opcode)[keyof typeof Opcode];

/** The GET that asks `url` (ws://host:port/path?query) for a WebSocket. */
export function upgradeRequest(url: string): string {
  const { host, pathname, search } = new URL(url);
  return (
    `GET ${pathname}${search} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
    `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${KEY}\r\n\r\n`
  );
}

/**
 * A client frame. The mask is all zeros: RFC 6455's random mask guards browsers' proxies against crafted
 * payloads, not a load generator on loopback, and with zeros the payload goes out as it is.
 */
export function clientFrame(opcode: Opcode, payload: Buffer | string): Buffer {
  const length = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
  const lengthBytes = length < 126 ? 0 : length < 65536 ? 2 : 8;
  const headerLength = 2 + lengthBytes + 4;
  const frame = Buffer.allocUnsafe(headerLength + length);
  frame[0] = 0x80 | opcode;
  if (lengthBytes === 0) {
    frame[1] = 0x80 | length;
  } else if (lengthBytes === 2) {
    frame[1] = 0x80 | 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 0x80 | 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  frame.writeUInt32BE(0, headerLength - 4);
  if (typeof payload === 'string') frame.write(payload, headerLength);
  else payload.copy(frame, headerLength);
  return frame;
}

/** A close frame with `code`. */
export function closeFrame(code: number): Buffer {
  const payload = Buffer.allocUnsafe(2);
  payload.writeUInt16BE(code);
  return clientFrame(Opcode.CLOSE, payload);
}

/** What a WireReader finds in the bytes. */
export interface WireHandler {
  /** The server answered the upgrade other than 101 with the right accept: HTTP status, 0 if none could be read. */
  refused(status: number): void;
  /** The server answered 101 with the right accept: frames may be sent (a client that waits for none). */
  upgraded?(): void;
  /** A text or binary message; `payload` is only valid during the call. */
  message(payload: Buffer): void;
  /** A control frame: close, ping or pong. */
  control(opcode: Opcode, payload: Buffer): void;
  /** Bytes no WebSocket server sends (a masked or fragmented frame): the connection is of no further use. */
  malformed(reason: string): void;
}

/**
 * Reads the upgrade's answer, then frames, from the chunks of one connection as they come. A chunk is only read
 * during `push` (it may be the process's shared receive buffer, receive.ts): what is left for the next is copied.
 */
export class WireReader {
  readonly #handler: WireHandler;
  #pending: Buffer | undefined;
  #upgraded = false;
  #stopped = false;

  constructor(handler: WireHandler) {
    this.#handler = handler;
  }

  /** Read no more: the handler ended the connection. */
  stop(): void {
    this.#stopped = true;
    this.#pending = undefined;
  }

  push(chunk: Buffer): void {
    if (this.#stopped) return;
    let bytes = this.#pending ? Buffer.concat([this.#pending, chunk]) : chunk;
    this.#pending = undefined;
    if (!this.#upgraded) {
      const headEnd = bytes.indexOf(HEAD_END);
      if (headEnd < 0) return void (this.#pending = Buffer.from(bytes));
      if (!this.#accepted(bytes.subarray(0, headEnd + 2))) return this.#handler.refused(statusOf(bytes));
      this.#upgraded = true;
      this.#handler.upgraded?.();
      bytes = bytes.subarray(headEnd + HEAD_END.length);
    }
    let at = 0;
    while (at < bytes.length && !this.#stopped) {
      const used = this.#frame(bytes, at);
      if (used === 0) break;
      at += used;
    }
    if (at < bytes.length && !this.#stopped) this.#pending = Buffer.from(bytes.subarray(at));
  }

  #accepted(head: Buffer): boolean {
    return statusOf(head) === 101 && head.includes(ACCEPT);
  }

  /** Handles the frame at `at` and returns its length, or 0 while it is incomplete. */
  #frame(bytes: Buffer, at: number): number {
    if (bytes.length - at < 2) return 0;
    const first = bytes[at]!;
    const second = bytes[at + 1]!;
    const opcode = (first & 0x0f) as Opcode;
    if ((second & 0x80) !== 0) return this.#malformed('masked server frame');
    if ((first & 0x80) === 0 || opcode === Opcode.CONTINUATION) return this.#malformed('fragmented message');
    let length = second & 0x7f;
    let start = at + 2;
    if (length === 126) {
      if (bytes.length - at < 4) return 0;
      length = bytes.readUInt16BE(at + 2);
      start = at + 4;
    } else if (length === 127) {
      if (bytes.length - at < 10) return 0;
      if (bytes.readUInt32BE(at + 2) !== 0) return this.#malformed('message over 4 GB');
      length = bytes.readUInt32BE(at + 6);
      start = at + 10;
    }
    if (bytes.length < start + length) return 0;
    const payload = bytes.subarray(start, start + length);
    if (opcode === Opcode.TEXT || opcode === Opcode.BINARY) this.#handler.message(payload);
    else this.#handler.control(opcode, payload);
    return start + length - at;
  }

  #malformed(reason: string): number {
    this.stop();
    this.#handler.malformed(reason);
    return 0;
  }
}

/** The status of an HTTP response head (`HTTP/1.1 503 ...`), 0 if it is not one. */
function statusOf(head: Buffer): number {
  if (head.length < 12 || head.toString('latin1', 0, 5) !== 'HTTP/') return 0;
  const status = Number(head.toString('latin1', 9, 12));
  return Number.isInteger(status) ? status : 0;
}
