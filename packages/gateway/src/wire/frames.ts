/**
 * Server-to-client text frames built once and written as they are. A NOTIFICATION goes to many sockets: `ws`'s
 * send would build a header per socket and write header and payload as two corked chunks (a writev); one
 * prebuilt frame is one plain write of a shared buffer per socket.
 */
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import { tcpSocketOf } from './ws-private.ts';

/** FIN + opcode 1 (text); a server's frames are never masked (RFC 6455, 5.1). */
const FIN_TEXT = 0x81;

/** The whole frame of a text message: header and `text` as UTF-8, in one buffer (the text is encoded once, in place). */
export function textFrame(text: string): Buffer {
  const length = Buffer.byteLength(text);
  const headerLength = length < 126 ? 2 : length < 65536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(headerLength + length);
  frame[0] = FIN_TEXT;
  if (length < 126) {
    frame[1] = length;
  } else if (length < 65536) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  frame.write(text, headerLength);
  return frame;
}

/**
 * Write a frame from textFrame to an open WebSocket's own TCP socket. Only for connections without extensions
 * (the gateway turns permessage-deflate off), where `ws`'s sender writes synchronously and keeps no queue,
 * so frames stay in order with the ones it writes; the caller checks that the socket is OPEN.
 */
export function writeFrame(socket: WebSocket, frame: Buffer): void {
  tcpSocketOf(socket).write(frame);
}

/** Where the bytes written and not yet passed to the kernel are counted (the hub's DeliveryBacklog). */
export interface WriteAccount {
  written(bytes: number): void;
  passedOn(bytes: number): void;
}

/**
 * Writes frames as writeFrame does, but holds each socket's frames until the event loop has run the I/O it has
 * at hand, then sends them in one write system call per socket (a writev). When emits come faster than one per
 * turn of the loop, a client told of several of them in that turn costs one system call, not several; a frame
 * written alone leaves at the end of the same turn (the check phase), so the wait is the rest of that turn.
 * Corking keeps order: every later write to the socket, ws's own included, queues behind the held frames. A
 * socket corked by another owner (the upgrade, until CONNECTED is written) is left to that owner's uncork.
 *
 * Each frame is counted in `account` until its stream calls back: once it has passed it to the kernel, or dropped
 * it (a stream destroyed calls back every write it held).
 */
export class CoalescedWrites {
  readonly #account: WriteAccount;
  #held: Socket[] = [];
  /** The callback of the last frame written: a fan-out writes one frame to many sockets, and makes one callback. */
  #lastFrame: Buffer | undefined;
  #lastPassedOn: () => void = () => {};

  constructor(account: WriteAccount) {
    this.#account = account;
  }

  write(socket: WebSocket, frame: Buffer): void {
    const tcp = tcpSocketOf(socket);
    if (tcp.writableCorked === 0) {
      tcp.cork();
      if (this.#held.push(tcp) === 1) setImmediate(this.#flush);
    }
    if (frame !== this.#lastFrame) {
      const account = this.#account;
      const bytes = frame.length;
      this.#lastFrame = frame;
      this.#lastPassedOn = () => account.passedOn(bytes);
    }
    this.#account.written(frame.length);
    tcp.write(frame, this.#lastPassedOn);
  }

  /** A socket ended or destroyed meanwhile has uncorked itself already; uncork is then a no-op. */
  readonly #flush = (): void => {
    const held = this.#held;
    this.#held = [];
    for (const tcp of held) tcp.uncork();
  };
}
