/** Test support: a WebSocket client on a bare TCP socket, for a client that stops reading when the test says so. */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { get } from 'node:http';
import type { Socket } from 'node:net';
import type { TestNode } from './gateway.ts';

export interface RawClient {
  socket: Socket;
  readUntil(wanted: Buffer): Promise<void>;
}

/**
 * A WebSocket client on a bare TCP socket, registered for `entry`: unlike a `ws` client, nothing in it resumes
 * reading behind the test's back once it is paused.
 */
export async function rawSubscriber(target: TestNode, token: string, entry: unknown): Promise<RawClient> {
  const request = get(`${target.http}/?x-am-authorization=${token}`, {
    headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64') },
  });
  const [, socket, head] = (await once(request, 'upgrade')) as [unknown, Socket, Buffer];
  let seen = head;
  const readUntil = async (wanted: Buffer) => {
    while (!seen.includes(wanted)) seen = Buffer.concat([seen.subarray(-wanted.length), (await once(socket, 'data'))[0] as Buffer]);
  };
  await readUntil(Buffer.from('"CONNECTED"'));
  socket.write(maskedTextFrame(JSON.stringify({ objType: 'REGISTER', onEvents: [entry] })));
  await readUntil(Buffer.from('"validOnEvents":[{'));
  return { socket, readUntil };
}

/** A client-to-server text frame (clients must mask), for payloads under 64 KiB. */
function maskedTextFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const header = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([header, mask, payload.map((byte, i) => byte ^ (mask[i % 4] as number))]);
}
