/**
 * Events with history on one node (the in-process broker): positions on the wire, REGISTER with since (the reply,
 * then the replay, then what was held, then live), each reason a resume is refused, and the hub's order of a route
 * whatever order its deliveries come in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Position, ServerFrame, ValidOnEvent } from '@herald/protocol';
import type { Broker, DeliveryHandler, Histories } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import { passThrough } from '../support/brokers.ts';
import { until } from '../support/fleet.ts';
import { TestSocket, apiToken, emit, metric, onEvent, startNode, type RawConfig, type TestNode } from '../support/gateway.ts';

const HISTORY = { size: 50, ttlSeconds: 60, positionTtlSeconds: 3600, maxReplay: 10 };
const HISTORIES: Histories = new Map([['kept', HISTORY]]);
const withKept = (raw: RawConfig): void => {
  raw.events.kept = { groups: { register: ['bench'], emit: ['bench'] }, history: { size: 50, ttlSeconds: 60, maxReplay: 10 } };
};
const kept = (recipientId: string, extra: object = {}) => onEvent('kept', { recipientId }, extra);

let node: TestNode;
let api: string;

before(async () => {
  node = await startNode(withKept);
  api = await apiToken(node);
});
after(() => node.close());

/** Registered for one entry: the client and its reply's entry. */
async function registered(target: TestNode, entry: object): Promise<[TestSocket, ValidOnEvent]> {
  const client = await TestSocket.connect(target, api);
  const reply = await client.register(entry);
  assert.equal(reply.validOnEvents.length, 1, JSON.stringify(reply));
  return [client, reply.validOnEvents[0]!];
}

/** Once `count` frames are unread, all of them in order, taken. */
async function frames(client: TestSocket, count: number): Promise<ServerFrame[]> {
  await until(async () => client.frames.length >= count, `${count} frames`, 3000);
  return client.frames.splice(0, client.frames.length);
}

const notified = (frame: ServerFrame | undefined) => (frame?.type === 'NOTIFICATION' ? frame.response : assert.fail(`not a NOTIFICATION: ${JSON.stringify(frame)}`));

/** `n` emits to one recipient, numbered from `from`. */
async function emits(target: TestNode, recipientId: string, from: number, n: number): Promise<void> {
  for (let i = from; i < from + n; i++) assert.equal((await emit(target, api, 'kept', { recipientId, n: i })).status, 200);
}

/** A client that registered and left, `missed` emits while it was away, and its return: REGISTER with since, sent. */
async function awayAndBack(target: TestNode, recipientId: string, missed: number): Promise<TestSocket> {
  const [away, first] = await registered(target, kept(recipientId));
  await away.close();
  await emits(target, recipientId, 1, missed);
  const back = await TestSocket.connect(target, api);
  back.send({ objType: 'REGISTER', onEvents: [kept(recipientId, { since: { offset: first.offset, epoch: first.epoch } })] });
  return back;
}

describe('positions', () => {
  test('a REGISTER of an event with history answers the route\'s position; each NOTIFICATION carries the next', async () => {
    const [client, valid] = await registered(node, kept('p1'));
    assert.equal(valid.offset, 0);
    assert.match(valid.epoch ?? '', /^[\w-]{9,64}$/);
    assert.equal('recovered' in valid, false, 'no since, no recovered');
    await emits(node, 'p1', 1, 2);
    const got = (await frames(client, 2)).map(notified);
    assert.deepEqual(got.map(({ offset, epoch, eventData }) => [offset, epoch, eventData]), [[1, valid.epoch, { recipientId: 'p1', n: 1 }], [2, valid.epoch, { recipientId: 'p1', n: 2 }]]);
    await client.close();
  });

  test('events without history: no position in the reply, and the NOTIFICATION bytes are those of before', async () => {
    const client = await TestSocket.connect(node, api);
    client.socket.on('message', (data) => void raw.push(String(data)));
    const raw: string[] = [];
    const reply = await client.register(onEvent('announcements'));
    assert.equal('offset' in (reply.validOnEvents[0] ?? {}), false);
    await emit(node, api, 'announcements', { title: 't' });
    await client.next('NOTIFICATION');
    const eventId = reply.validOnEvents[0]?.eventId;
    assert.equal(raw.at(-1), `{"type":"NOTIFICATION","response":{"eventId":"${eventId}","eventType":"CUSTOM_WS_EVENTS","eventData":{"title":"t"}}}`);
    await client.close();
  });
});

describe('REGISTER with since', () => {
  test('replays what the client missed, in order, right after the reply; then live notifications, none twice', async () => {
    const [away, first] = await registered(node, kept('r1'));
    await emits(node, 'r1', 1, 2);
    const seen = (await frames(away, 2)).map(notified);
    await away.close();
    await emits(node, 'r1', 3, 4);
    const back = await TestSocket.connect(node, api);
    back.send({ objType: 'REGISTER', onEvents: [kept('r1', { since: { offset: seen[1]!.offset, epoch: first.epoch } })] });
    const [reply, ...replayed] = await frames(back, 5);
    assert.equal(reply?.type, 'REGISTER');
    const valid = reply.type === 'REGISTER' ? reply.response.validOnEvents[0] : undefined;
    assert.deepEqual([valid?.offset, valid?.epoch, valid?.recovered, 'since' in (valid ?? {})], [6, first.epoch, true, false]);
    assert.deepEqual(replayed.map(notified).map(({ offset, eventData }) => [offset, (eventData as { n: number }).n]), [[3, 3], [4, 4], [5, 5], [6, 6]]);
    await emits(node, 'r1', 7, 1);
    assert.deepEqual((await frames(back, 1)).map(notified).map(({ offset }) => offset), [7]);
    assert.equal(await metric(node, 'herald_history_recoveries_total', { result: 'recovered' }), 1);
    assert.equal(await metric(node, 'herald_history_replayed_total'), 4);
    await back.close();
  });

  test('select and getEventData apply to replayed notifications as to live ones', async () => {
    const [away, first] = await registered(node, kept('r2', { select: ['n'] }));
    await away.close();
    await emits(node, 'r2', 1, 1);
    const since = { offset: first.offset, epoch: first.epoch };
    const back = await TestSocket.connect(node, api);
    back.send({ objType: 'REGISTER', onEvents: [kept('r2', { select: ['n'], since }), kept('r2', { getEventData: false, since })] });
    const [, ...replayed] = await frames(back, 3);
    assert.deepEqual(replayed.map(notified).map(({ eventData, offset }) => [eventData, offset]), [[{ n: 1 }, 1], [undefined, 1]]);
    await back.close();
  });

  test('not recovered: another epoch, more missed than maxReplay, an offset the history never reached', async () => {
    const [away, first] = await registered(node, kept('r3'));
    await away.close();
    await emits(node, 'r3', 1, 11);
    const resume = async (since: Position) => {
      const back = await TestSocket.connect(node, api);
      const reply = await back.register(kept('r3', { since }));
      await emits(node, 'r3', 100, 1);
      const next = notified((await frames(back, 1))[0]);
      await back.close();
      return [reply.validOnEvents[0]?.recovered, next.offset];
    };
    assert.deepEqual(await resume({ offset: 3, epoch: 'Otherepoch1' }), [false, 12]);
    assert.deepEqual(await resume({ offset: 0, epoch: first.epoch! }), [false, 13], '12 missed, 10 at most');
    assert.deepEqual(await resume({ offset: 40, epoch: first.epoch! }), [false, 14]);
    for (const [result, count] of [['epoch_changed', 2], ['capped', 1]] as const) {
      assert.equal(await metric(node, 'herald_history_recoveries_total', { result }), count);
    }
  });

  test('a bad since is BAD_FRAME for that entry alone; since on an event without history is ignored', async () => {
    const client = await TestSocket.connect(node, api);
    const reply = await client.register(kept('r4', { since: { offset: -1, epoch: 'e' } }), onEvent('announcements', undefined, { since: { offset: 3, epoch: 'e' } }));
    assert.deepEqual(reply.invalidOnEvents.map((entry) => entry.errors[0]?.code), ['BAD_FRAME']);
    assert.deepEqual(Object.keys(reply.validOnEvents[0] ?? {}).sort(), ['apiName', 'eventId', 'eventType', 'getEventData']);
    await client.close();
  });
});

/**
 * A broker on its own bus whose history reads with a range (or, `everyRead`, all of them) are answered once `open()`
 * is called, and whose deliveries pass through `deliver`.
 */
function gatedBroker(deliver: (handler: DeliveryHandler, ...args: Parameters<DeliveryHandler>) => void = (handler, ...args) => handler(...args), everyRead = false) {
  const inner = new MemoryBus(HISTORIES).broker('gated');
  let gate = Promise.withResolvers<void>();
  let reached = Promise.withResolvers<void>();
  const broker: Broker = {
    ...passThrough(inner),
    start: (onDelivery, onControl, onCanary) => inner.start((...args) => deliver(onDelivery, ...args), onControl, onCanary),
    // The read is made at once; its answer waits, as one on its way back from Redis.
    history: async (route, range) => {
      const read = await inner.history(route, range);
      if (everyRead || (range !== undefined && range.upTo > range.since.offset)) {
        reached.resolve();
        await gate.promise;
      }
      return read;
    },
  };
  const open = () => {
    gate.resolve();
    gate = Promise.withResolvers();
  };
  return { broker, open, reached: () => reached.promise.finally(() => (reached = Promise.withResolvers())) };
}

describe('while a resume reads the history', () => {
  test('live notifications are held for the client and follow the replay: one sequence, no gap, no repeat', async () => {
    const { broker, open, reached } = gatedBroker();
    const gated = await startNode(withKept, { broker });
    try {
      const back = await awayAndBack(gated, 'h1', 3);
      await reached();
      await emits(gated, 'h1', 4, 3);
      assert.equal(back.frames.length, 0, 'nothing before the reply');
      open();
      const [reply, ...rest] = await frames(back, 7);
      assert.equal(reply?.type === 'REGISTER' && reply.response.validOnEvents[0]?.offset, 3, 'the position when it joined');
      assert.deepEqual(rest.map(notified).map(({ offset }) => offset), [1, 2, 3, 4, 5, 6]);
      await back.close();
    } finally {
      await gated.close();
    }
  });

  test('a notification emitted while a new route\'s position is read follows the reply, after that position', async () => {
    const { broker, open, reached } = gatedBroker(undefined, true);
    const gated = await startNode(withKept, { broker });
    try {
      const client = await TestSocket.connect(gated, api);
      client.send({ objType: 'REGISTER', onEvents: [kept('h3')] });
      await reached();
      await emits(gated, 'h3', 1, 2);
      assert.equal(client.frames.length, 0);
      open();
      const [reply, ...rest] = await frames(client, 3);
      const at = reply?.type === 'REGISTER' ? reply.response.validOnEvents[0]?.offset : undefined;
      assert.deepEqual(rest.map(notified).map(({ offset }) => offset), [at! + 1, at! + 2]);
      await client.close();
    } finally {
      await gated.close();
    }
  });

  test('held notifications count against websocket.maxBufferedBytes: past it the client is shed with 1013', async () => {
    const { broker, open, reached } = gatedBroker();
    const gated = await startNode((raw) => {
      withKept(raw);
      raw.websocket = { maxBufferedBytes: 1024 };
    }, { broker });
    try {
      const back = await awayAndBack(gated, 'h2', 1);
      await reached();
      for (let i = 0; (await metric(gated, 'herald_notifications_dropped_total', { reason: 'slow_client' })) === 0; i++) {
        assert.ok(i < 50, 'never shed');
        await emit(gated, api, 'kept', { recipientId: 'h2', pad: 'x'.repeat(200) });
      }
      assert.equal((await back.closed).code, 1013);
      open();
    } finally {
      await gated.close();
    }
  });
});

describe('a client ahead of this node', () => {
  test('it had them from a node that got them first: recovered, and they are not sent again when they come', async () => {
    const held: Array<() => void> = [];
    let holding = true;
    const { broker } = gatedBroker((handler, ...args) => (holding ? held.push(() => handler(...args)) : handler(...args)));
    const gated = await startNode(withKept, { broker });
    try {
      const [slow, first] = await registered(gated, kept('a1'));
      await emits(gated, 'a1', 1, 2);
      assert.equal(held.length, 2, 'appended, not delivered yet');
      const ahead = await TestSocket.connect(gated, api);
      const reply = await ahead.register(kept('a1', { since: { offset: 2, epoch: first.epoch } }));
      assert.deepEqual([reply.validOnEvents[0]?.offset, reply.validOnEvents[0]?.recovered], [0, true]);
      holding = false;
      for (const deliver of held) deliver();
      await emits(gated, 'a1', 3, 1);
      assert.deepEqual((await frames(slow, 3)).map(notified).map(({ offset }) => offset), [1, 2, 3]);
      assert.deepEqual((await frames(ahead, 1)).map(notified).map(({ offset }) => offset), [3]);
      await Promise.all([slow.close(), ahead.close()]);
    } finally {
      await gated.close();
    }
  });
});

describe('the order of a route on the receiving node', () => {
  test('a delivery that overtook the one before it waits while that one is read from the history; the late one is dropped', async () => {
    let late: (() => void) | undefined;
    const { broker, open, reached } = gatedBroker((handler, event, eventData, positions) => {
      // The second emit is held back, as another node's emit may arrive after a later one.
      if ((eventData as { n?: number }).n === 2) late = () => handler(event, eventData, positions);
      else handler(event, eventData, positions);
    });
    const gated = await startNode(withKept, { broker });
    try {
      const [client] = await registered(gated, kept('o1'));
      await emits(gated, 'o1', 1, 3);
      await reached();
      assert.equal(client.frames.length, 1, '3 waits while 2 is read');
      open();
      const got = (await frames(client, 3)).map(notified);
      assert.deepEqual(got.map(({ offset, eventData }) => [offset, (eventData as { n: number }).n]), [[1, 1], [2, 2], [3, 3]]);
      late?.();
      assert.equal(await metric(gated, 'herald_history_duplicates_total'), 1);
      assert.equal(await metric(gated, 'herald_history_gap_fills_total', { result: 'filled' }), 1);
      await emits(gated, 'o1', 4, 1);
      assert.deepEqual((await frames(client, 1)).map(notified).map(({ offset }) => offset), [4]);
      await client.close();
    } finally {
      await gated.close();
    }
  });

  test('a gap the history no longer holds is told: the next NOTIFICATION carries recovered: false, and only it', async () => {
    // Every emit but the first and the last two is lost on its way to the node: more than its history keeps (size 50).
    const { broker, open } = gatedBroker((handler, event, eventData, positions) => {
      const { n } = eventData as { n: number };
      if (n === 1 || n >= 129) handler(event, eventData, positions);
    });
    const gated = await startNode(withKept, { broker });
    try {
      const [client] = await registered(gated, kept('o2'));
      await emits(gated, 'o2', 1, 130);
      open();
      const got = (await frames(client, 3)).map(notified);
      assert.deepEqual(got.map(({ offset, recovered }) => [offset, recovered]), [[1, undefined], [129, false], [130, undefined]]);
      assert.equal(await metric(gated, 'herald_history_gap_fills_total', { result: 'lost' }), 1);
      await client.close();
    } finally {
      await gated.close();
    }
  });
});
