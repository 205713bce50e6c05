import assert from 'node:assert/strict';
import { on, once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import type { EventEmitter } from 'node:events';
import type { Writable } from 'node:stream';
import * as ws from 'ws';
import type { WebSocket } from 'ws';
import { DeliveryBacklog } from '../../src/hub/backlog.ts';
import { CoalescedWrites, textFrame, writeFrame } from '../../src/wire/frames.ts';

/** ws's own frame parser (exported, but not in its type declarations): what a client runs on our bytes. */
const { Receiver } = ws as unknown as { Receiver: new (options: { isServer: boolean }) => Writable & EventEmitter };

describe('textFrame', () => {
  it('builds frames a WebSocket client reads back, at every length encoding (7-bit, 16-bit, 64-bit), in UTF-8 bytes', async () => {
    // Lengths in bytes, around each encoding's bounds; 'é' is two bytes, so the length is not the string's.
    for (const length of [0, 1, 125, 126, 65535, 65536, 200_000]) {
      const text = 'é'.repeat(Math.floor(length / 2)) + 'a'.repeat(length % 2);
      const receiver = new Receiver({ isServer: false });
      const message = once(receiver, 'message');
      receiver.write(textFrame(text));
      const [data, isBinary] = (await message) as [Buffer, boolean];
      assert.equal(isBinary, false, `length ${length}`);
      assert.equal(data.length, length);
      assert.equal(data.toString('utf8'), text, `length ${length}`);
    }
  });
});

/** A connected TCP pair on loopback; the server's end stands in for a WebSocket's own socket (`_socket`). */
async function socketPair(): Promise<{ server: Socket; client: Socket; close: () => void }> {
  const listener = createServer();
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const accepted = once(listener, 'connection');
  const client = connect((listener.address() as AddressInfo).port, '127.0.0.1');
  const [server] = (await accepted) as [Socket];
  return { server, client, close: () => { client.destroy(); server.destroy(); listener.close(); } };
}

/** Text messages read from `socket` as a client would, until `count` have come. */
async function readMessages(socket: Socket, count: number): Promise<string[]> {
  const receiver = new Receiver({ isServer: false });
  const messages: string[] = [];
  socket.pipe(receiver);
  for await (const [data] of on(receiver, 'message')) {
    if (messages.push((data as Buffer).toString()) === count) break;
  }
  return messages;
}

/** Records what the stream hands to the kernel: each `_write` and `_writev` of `socket`, with its chunk count. */
function spyWrites(socket: Socket): string[] {
  const calls: string[] = [];
  const writev = socket._writev!.bind(socket);
  const write = socket._write.bind(socket);
  socket._writev = (chunks, callback) => { calls.push(`writev ${chunks.length}`); writev(chunks, callback); };
  socket._write = (chunk, encoding, callback) => { calls.push('write'); write(chunk, encoding, callback); };
  return calls;
}

const asWebSocket = (socket: Socket): WebSocket => ({ _socket: socket }) as unknown as WebSocket;

describe('CoalescedWrites', () => {
  it("holds a turn's frames for one socket and hands them to the kernel in one writev, in order, behind nothing and before later writes", async () => {
    const { server, client, close } = await socketPair();
    const calls = spyWrites(server);
    const backlog = new DeliveryBacklog(1 << 20);
    const out = new CoalescedWrites(backlog);
    const frames = ['one', 'two', 'three'].map(textFrame);
    for (const frame of frames) out.write(asWebSocket(server), frame);
    const bytes = frames.reduce((sum, frame) => sum + frame.length, 0);
    assert.equal(server.writableLength, bytes, 'held, not yet written');
    assert.equal(backlog.socketBytes, bytes, 'counted in the backlog while held');
    assert.deepEqual(calls, []);
    writeFrame(asWebSocket(server), textFrame('reply'));
    const received = await readMessages(client, 4);
    assert.deepEqual(received, ['one', 'two', 'three', 'reply']);
    assert.deepEqual(calls, ['writev 4']);
    assert.equal(server.writableCorked, 0);
    assert.equal(backlog.socketBytes, 0, 'passed to the kernel: out of the backlog');
    close();
  });

  it('a socket destroyed while its frames were held gets no write, and the sockets held after it still get theirs', async () => {
    const gone = await socketPair();
    const kept = await socketPair();
    const [goneCalls, keptCalls] = [spyWrites(gone.server), spyWrites(kept.server)];
    const backlog = new DeliveryBacklog(1 << 20);
    const out = new CoalescedWrites(backlog);
    out.write(asWebSocket(gone.server), textFrame('lost'));
    out.write(asWebSocket(kept.server), textFrame('kept'));
    gone.server.destroy();
    assert.deepEqual(await readMessages(kept.client, 1), ['kept']);
    assert.deepEqual(goneCalls, []);
    assert.deepEqual(keptCalls, ['write']);
    await new Promise(setImmediate);
    assert.equal(backlog.socketBytes, 0, "the destroyed socket's frame is out of the backlog too");
    gone.close();
    kept.close();
  });
});
