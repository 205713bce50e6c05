/**
 * wsload's own WebSocket client side: the reader against bytes cut at every place, and a LoadClient against a
 * real `ws` server, which checks what the client writes (masked frames, the pong, the close it echoes).
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import { WebSocketServer } from 'ws';
import { LoadClient, type ClientObserver } from '../src/load-client.ts';
import { registerFrameOf } from '../src/roster.ts';
import { Opcode, upgradeRequest, WireReader, type WireHandler } from '../src/wire.ts';

const UPGRADED =
  'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
  'Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';

/** A server frame (unmasked), with the 7- or 16-bit length its payload needs. */
function serverFrame(opcode: number, payload: Buffer | string): Buffer {
  const body = Buffer.from(payload);
  const head = body.length < 126 ? Buffer.from([0x80 | opcode, body.length]) : Buffer.from([0x80 | opcode, 126, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([head, body]);
}

/** What a reader reported, in order. */
function recorder(): { handler: WireHandler; seen: string[] } {
  const seen: string[] = [];
  const handler: WireHandler = {
    refused: (status) => seen.push(`refused ${status}`),
    upgraded: () => seen.push('upgraded'),
    message: (payload) => seen.push(`message ${payload.length} ${payload.toString().slice(0, 12)}`),
    control: (opcode, payload) => seen.push(`control ${opcode} ${payload.toString('hex')}`),
    malformed: (reason) => seen.push(`malformed ${reason}`),
  };
  return { handler, seen };
}

test('what is left of a chunk for the next is the reader\'s own copy: the shared receive buffer is written over by the next read', () => {
  const { handler, seen } = recorder();
  const reader = new WireReader(handler);
  const bytes = Buffer.concat([Buffer.from(UPGRADED), serverFrame(Opcode.TEXT, 'hello world, in two reads')]);
  const shared = Buffer.alloc(bytes.length);
  // The head cut in two, then the frame cut in two: each piece pushed as a view of the one buffer, as receive.ts does.
  for (const [from, to] of [[0, 40], [40, UPGRADED.length + 9], [UPGRADED.length + 9, bytes.length]] as const) {
    shared.fill(0x2a);
    bytes.copy(shared, 0, from, to);
    reader.push(shared.subarray(0, to - from));
  }
  assert.deepEqual(seen, ['upgraded', 'message 25 hello world,']);
});

test('the upgrade asks for a WebSocket on the path and query of the URL', () => {
  const request = upgradeRequest('ws://127.0.0.1:8080/?x-am-authorization=a.b.c');
  assert.match(request, /^GET \/\?x-am-authorization=a\.b\.c HTTP\/1\.1\r\nHost: 127\.0\.0\.1:8080\r\n/);
  assert.match(request, /\r\nUpgrade: websocket\r\n/);
  assert.match(request, /\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n$/);
});

test('the 101 and the frames after it are read the same whole, in one chunk, or cut at every byte', () => {
  const long = 'x'.repeat(300);
  const bytes = Buffer.concat([
    Buffer.from(UPGRADED),
    serverFrame(Opcode.TEXT, '{"type":"CONNECTED"}'),
    serverFrame(Opcode.TEXT, long),
    serverFrame(Opcode.PING, 'hi'),
    serverFrame(Opcode.CLOSE, Buffer.from([0x03, 0xe9])),
  ]);
  const expected = ['upgraded', 'message 20 {"type":"CON', `message 300 ${'x'.repeat(12)}`, 'control 9 6869', 'control 8 03e9'];
  const whole = recorder();
  new WireReader(whole.handler).push(bytes);
  assert.deepEqual(whole.seen, expected);
  const cut = recorder();
  const reader = new WireReader(cut.handler);
  for (let i = 0; i < bytes.length; i++) reader.push(bytes.subarray(i, i + 1));
  assert.deepEqual(cut.seen, expected);
});

test('an answer other than 101 with the accept for the key is a refusal, with its status', () => {
  const unavailable = recorder();
  new WireReader(unavailable.handler).push(Buffer.from('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n'));
  assert.deepEqual(unavailable.seen, ['refused 503']);
  const wrongAccept = recorder();
  new WireReader(wrongAccept.handler).push(Buffer.from(UPGRADED.replace('s3pPLM', 'AAAAAA')));
  assert.deepEqual(wrongAccept.seen, ['refused 101']);
});

test('a masked or fragmented server frame ends the reading', () => {
  for (const [frame, reason] of [
    [Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0x61, 0x62]), 'masked server frame'],
    [Buffer.from([0x01, 0x01, 0x61]), 'fragmented message'],
  ] as const) {
    const { handler, seen } = recorder();
    new WireReader(handler).push(Buffer.concat([Buffer.from(UPGRADED), frame, serverFrame(Opcode.TEXT, 'after')]));
    assert.deepEqual(seen, ['upgraded', `malformed ${reason}`]);
  }
});

let server: WebSocketServer;
let url: string;

before(async () => {
  server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await once(server, 'listening');
  url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/?x-am-authorization=t`;
});

after(() => server.close());

test('against a ws server: CONNECTED, the REGISTER read by the server, a ping answered, a 1001 echoed', { timeout: 10_000 }, async () => {
  const serverSide = new Promise<{ register: string; pong: boolean; echoed: number }>((resolve) => {
    server.once('connection', (socket, request) => {
      assert.equal(request.url, '/?x-am-authorization=t');
      socket.send('{"type":"CONNECTED"}');
      socket.once('message', (register) => {
        socket.send('{"type":"REGISTER","invalidOnEvents":[]}');
        socket.ping();
        socket.once('pong', () => {
          socket.close(1001, 'draining');
          socket.once('close', (echoed) => resolve({ register: String(register), pong: true, echoed }));
        });
      });
    });
  });
  const events: string[] = [];
  const closed = Promise.withResolvers<number>();
  const observer: ClientObserver = {
    ready: () => events.push('ready'),
    failed: (_client, reason) => events.push(`failed ${reason}`),
    closed: (_client, code) => closed.resolve(code),
    notification: () => events.push('notification'),
  };
  const plan = { url, event: 'announcements', recipient: '7' };
  const register = registerFrameOf(plan);
  const client = new LoadClient(0, plan, observer, { timeoutMs: 5000 });
  client.start();
  assert.deepEqual(await serverSide, { register, pong: true, echoed: 1001 });
  assert.equal(await closed.promise, 1001);
  assert.deepEqual(events, ['ready']);
  assert.ok(client.tcpAt >= client.startAt && client.connectedAt >= client.tcpAt && client.readyAt >= client.connectedAt);
});
