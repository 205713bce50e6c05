/**
 * Server-to-client text frames built once and written as they are. A NOTIFICATION goes to many sockets: `ws`'s
 * send would build a header per socket and write header and payload as two corked chunks (a writev); one
 * prebuilt frame is one plain write of a shared buffer per socket.
 */
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';

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
  (socket as WebSocket & { _socket: Socket })._socket.write(frame);
}
