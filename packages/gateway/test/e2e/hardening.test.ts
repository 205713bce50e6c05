/**
 * Inputs that once crashed a node or grew its memory without bound: each is refused with a clear code, counted, and
 * leaves the node healthy and delivering to everyone else.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { get } from 'node:http';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { MAX_FRAME_DEPTH, MAX_JSON_DEPTH } from '@herald/protocol';
import type { Broker } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import { until } from '../support/fleet.ts';
import { passThrough } from '../support/brokers.ts';
import { TestSocket, apiToken, emit, metric, onEvent, post, startNode, type TestNode } from '../support/gateway.ts';

/** `{"a":{"a":...}}`, `levels` objects deep, as text: built without recursion. */
const nested = (levels: number): string => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);

let node: TestNode;
let api: string;

before(async () => {
  node = await startNode((raw) => {
    raw.websocket = { maxBufferedBytes: 64 * 1024, maxEntriesPerFrame: 20, maxCriteriaValueBytes: 32, fanOutChunk: 1 };
    raw.server.emitFastPath = true;
  });
  api = await apiToken(node);
});
after(() => node.close());

/** A reader of announcements that proves the node still delivers after each attack. */
async function stillDelivers(): Promise<void> {
  const reader = await TestSocket.connect(node, api);
  await reader.register(onEvent('announcements'));
  const marker = randomBytes(4).toString('hex');
  assert.equal((await emit(node, api, 'announcements', { marker })).status, 200);
  assert.deepEqual((await reader.next('NOTIFICATION')).response.eventData, { marker });
  await reader.close();
}

describe('emits', () => {
  const emitUrl = () => `${node.http}/api/system-api/bench/emit-event-ws`;

  test('eventData nested past the limit is 400 BAD_REQUEST on the fast path and through fastify alike', async () => {
    const subscriber = await TestSocket.connect(node, api);
    await subscriber.register(onEvent('announcements'), onEvent('announcements', undefined, { select: ['a'] }));
    const body = `{"name":"announcements","eventData":${nested(5000)}}`;
    // The plain JSON content type takes the fast path; a charset parameter the fast path does not take goes to fastify.
    for (const contentType of ['application/json', 'application/json; charset=utf-8; x=1']) {
      const reply = await post(emitUrl(), body, { 'content-type': contentType, 'x-am-authorization': api });
      assert.equal(reply.status, 400, contentType);
      assert.equal(reply.body.errors[0].code, 'BAD_REQUEST');
      assert.match(reply.body.errors[0].message, new RegExp(`deeper than ${MAX_JSON_DEPTH}`));
    }
    const atTheLimit = JSON.parse(nested(MAX_JSON_DEPTH)) as object;
    assert.equal((await emit(node, api, 'announcements', atTheLimit)).status, 200);
    assert.equal((await subscriber.next('NOTIFICATION')).response.eventId !== undefined, true);
    await subscriber.close();
    await stillDelivers();
  });

  test('a fan-out that throws mid-way (after its first chunk) ends that emit only, counted', async () => {
    // fanOutChunk is 1: the second subscription's frame is built in a later turn, where nothing used to catch.
    const first = await TestSocket.connect(node, api);
    const second = await TestSocket.connect(node, api);
    await first.register(onEvent('announcements', undefined, { select: ['plain'] }));
    await second.register(onEvent('announcements', undefined, { select: ['plain', 'big'] }));
    const before = await metric(node, 'herald_internal_errors_total', { where: 'fan_out' });
    // A BigInt cannot be serialised: only a bug could bring one here, which is what containment is for.
    node.gateway.hub.deliver('announcements', { plain: 1, big: 10n });
    await until(async () => (await metric(node, 'herald_internal_errors_total', { where: 'fan_out' })) === before + 1, 'the throw to be counted');
    await first.close();
    await second.close();
    await stillDelivers();
  });
});

describe('frames', () => {
  test('a frame nested past the limit is BAD_FRAME, not INTERNAL, and the connection goes on', async () => {
    const client = await TestSocket.connect(node, api);
    client.send(`{"objType":"REGISTER","onEvents":[${nested(MAX_FRAME_DEPTH + 1)}]}`);
    const error = await client.next('ERROR');
    assert.equal(error.errors[0]?.code, 'BAD_FRAME');
    const reply = await client.register(onEvent('announcements'));
    assert.equal(reply.validOnEvents.length, 1);
    await client.close();
  });

  test('a frame with more entries than websocket.maxEntriesPerFrame is refused whole, with a short reply', async () => {
    const client = await TestSocket.connect(node, api);
    client.send({ objType: 'REGISTER', onEvents: Array.from({ length: 10_000 }, () => ({})) });
    const error = await client.next('ERROR');
    assert.deepEqual(error.errors.map((each) => each.code), ['BAD_FRAME']);
    assert.match(error.errors[0]!.message, /at most 20 onEvents entries/);
    await client.close();
  });

  test('a criteria value past websocket.maxCriteriaValueBytes (UTF-8) refuses its entry only', async () => {
    const client = await TestSocket.connect(node, api);
    const reply = await client.register(
      onEvent('announcements', { tag: 'é'.repeat(17) }), // 34 bytes
      onEvent('announcements', { tag: 'é'.repeat(16) }), // 32 bytes
    );
    assert.equal(reply.validOnEvents.length, 1);
    assert.equal(reply.invalidOnEvents[0]?.errors[0]?.code, 'BAD_FRAME');
    assert.match(reply.invalidOnEvents[0]!.errors[0]!.message, /at most 32 bytes/);
    await client.close();
  });

  test('a client that stops reading and keeps sending frames is shed (1013) once its unsent replies pass the bound', async () => {
    const raw = await rawClient(node, api);
    raw.socket.pause();
    // Each frame draws a reply ~20 times its size (an echo with an error per entry): 20 entries that are not objects.
    const frame = maskedText(JSON.stringify({ objType: 'REGISTER', onEvents: Array.from({ length: 20 }, (_, i) => i) }));
    const external = process.memoryUsage().external;
    let sent = 0;
    while ((await metric(node, 'herald_replies_dropped_total', { reason: 'slow_client' })) === 0) {
      assert.ok(++sent < 20_000, 'the client was never shed');
      raw.socket.write(frame);
      if (sent % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    assert.ok(process.memoryUsage().external - external < 16 * 1024 * 1024, 'the node kept the replies of a client that does not read');
    raw.socket.resume();
    await raw.readUntil(Buffer.concat([Buffer.from([0x03, 0xf5]), Buffer.from('slow client')]));
    raw.socket.destroy();
    await stillDelivers();
  });

  test('a client close code outside the protocol is counted in a class, not as a label value of its own', async () => {
    const client = await TestSocket.connect(node, api);
    client.socket.close(4321, 'mine');
    await client.closed;
    await until(async () => (await metric(node, 'herald_connections_closed_total', { code: 'other_4xxx' })) >= 1, 'the close to be counted');
    assert.equal(await metric(node, 'herald_connections_closed_total', { code: '4321' }), 0);
  });
});

describe('a node whose broker throws while a frame is answered', () => {
  let broken: TestNode;
  before(async () => {
    const broker = new MemoryBus().broker('broken');
    const throwing: Broker = {
      ...passThrough(broker),
      addRoute: (): Promise<void> => {
        throw new Error('a bug in the broker');
      },
    };
    broken = await startNode(() => {}, { broker: throwing });
  });
  after(() => broken.close());

  test('closes that one client (ERROR INTERNAL, then 1011), counts it, and answers the others', async () => {
    const token = await apiToken(broken);
    const bystander = await TestSocket.connect(broken, token);
    const victim = await TestSocket.connect(broken, token);
    victim.send({ objType: 'REGISTER', onEvents: [onEvent('announcements')] });
    assert.equal((await victim.next('ERROR')).errors[0]?.code, 'INTERNAL');
    assert.equal((await victim.closed).code, 1011);
    assert.equal(await metric(broken, 'herald_internal_errors_total', { where: 'frame' }), 1);
    bystander.send({ objType: 'UNREGISTER', onEvents: [{ eventId: 'none' }] });
    assert.equal((await bystander.next('UNREGISTER')).response.invalidOnEvents.length, 1);
    await bystander.close();
  });
});

interface RawClient {
  socket: Socket;
  readUntil(wanted: Buffer): Promise<void>;
}

/** A WebSocket client on a bare TCP socket: nothing in it reads behind the test's back once it is paused. */
async function rawClient(target: TestNode, token: string): Promise<RawClient> {
  const request = get(`${target.http}/?x-am-authorization=${token}`, {
    headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64') },
  });
  const [, socket, head] = (await once(request, 'upgrade')) as [unknown, Socket, Buffer];
  let seen = head;
  const readUntil = async (wanted: Buffer): Promise<void> => {
    while (!seen.includes(wanted)) seen = Buffer.concat([seen.subarray(-wanted.length), (await once(socket, 'data'))[0] as Buffer]);
  };
  return { socket, readUntil };
}

/** A client's text frame: masked, as RFC 6455 requires of clients. */
function maskedText(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  const length = payload.length;
  const header = length < 126 ? Buffer.from([0x81, 0x80 | length]) : Buffer.from([0x81, 0x80 | 126, length >> 8, length & 0xff]);
  const masked = Buffer.alloc(length);
  for (let i = 0; i < length; i++) masked[i] = payload[i]! ^ mask[i % 4]!;
  return Buffer.concat([header, mask, masked]);
}
