/**
 * The Hub on its own: a memory broker and sessions that keep what they are sent, no sockets. Register, unregister,
 * fan-out (matching, select, getEventData, chunks), the subscription cap, the send bound, close.
 */
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { beforeEach, describe, it } from 'node:test';
import type { WebSocket } from 'ws';
import { CloseCode, EventType, type OnEvent, type ServerFrame } from '@herald/protocol';
import type { VerifiedApiToken } from '../../src/auth/authenticator.ts';
import type { Broker } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import type { ContainedAt } from '../../src/errors.ts';
import { Hub } from '../../src/hub/hub.ts';
import { Session, type SessionHandler } from '../../src/hub/session.ts';
import { createMetrics } from '../../src/metrics.ts';

const API_TOKEN: VerifiedApiToken = { user: { name: 'app', groups: new Set(['g']) }, issuedAt: 0, expiresAt: Infinity };
const NO_HANDLER: SessionHandler = { onFrame: () => {}, onClose: () => {}, onPong: () => {} };

/** A socket as far as the hub looks at one: open, with `unsent` bytes waiting, and its close recorded. */
function fakeSocket(unsent = 0) {
  const closes: Array<[number, string]> = [];
  const socket = { OPEN: 1, readyState: 1, bufferedAmount: unsent, close: (code: number, reason: string) => closes.push([code, reason]) };
  return { socket: socket as unknown as WebSocket, closes };
}

/** A session that keeps the frames it is sent, parsed. */
class FakeSession extends Session {
  readonly frames: ServerFrame[] = [];
  readonly closes: Array<[number, string]>;

  constructor(unsent = 0) {
    const { socket, closes } = fakeSocket(unsent);
    super(socket, API_TOKEN, undefined, NO_HANDLER);
    this.closes = closes;
  }

  override send(frame: Buffer): void {
    this.frames.push(JSON.parse(textOf(frame)) as ServerFrame);
  }

  notifications(): unknown[] {
    return this.frames.filter((frame) => frame.type === 'NOTIFICATION').map((frame) => frame.response);
  }
}

/** The text of a server frame (FIN, text, unmasked): after its 2, 4 or 10 bytes of header. */
function textOf(frame: Buffer): string {
  const length = frame[1]!;
  return frame.subarray(length < 126 ? 2 : length === 126 ? 4 : 10).toString('utf8');
}

const entry = (apiName: string, criteria?: Record<string, string | number>, more: Partial<OnEvent> = {}): OnEvent => ({
  eventType: EventType.CUSTOM_WS_EVENTS,
  apiName,
  getEventData: true,
  ...(criteria === undefined ? {} : { condition: { conditionType: 'RESPONSE', criteria } }),
  ...more,
});

describe('Hub', () => {
  let bus: MemoryBus;
  let broker: Broker;
  let hub: Hub;
  let contained: ContainedAt[];

  beforeEach(async () => {
    bus = new MemoryBus();
    broker = bus.broker('node-1');
    contained = [];
    hub = new Hub({
      broker,
      metrics: createMetrics(),
      contain: (where) => contained.push(where),
      histories: new Map(),
      maxSubscriptionsPerConnection: 3,
      maxBufferedBytes: 1024,
      fanOutChunk: 2,
      maxBacklogBytes: 1 << 20,
      maxEmitLagMs: 250,
      maxLagMs: 5000,
    });
    await broker.start((event, eventData, positions, json) => hub.deliver(event, eventData, positions, json));
  });

  const opened = (unsent?: number): FakeSession => {
    const session = new FakeSession(unsent);
    hub.open(session);
    return session;
  };

  it('registers a route with the broker on its first subscriber only, and takes it out with its last', async () => {
    const [a, b] = [opened(), opened()];
    const first = await hub.subscribe(a, entry('order-updates', { recipientId: 2 }));
    const second = await hub.subscribe(b, entry('order-updates', { recipientId: '2' }));
    assert.equal(second.eventId, first.eventId, '2 and "2" are one route, one eventId');
    assert.equal(await broker.publish('order-updates', { recipientId: 2 }), 1);
    assert.equal(hub.unsubscribe(a, first.eventId), true);
    assert.equal(await broker.publish('order-updates', { recipientId: 2 }), 1, 'b still holds it');
    assert.equal(hub.unsubscribe(b, first.eventId), true);
    assert.equal(hub.unsubscribe(b, first.eventId), false, 'nothing left to unregister');
    assert.equal(await broker.publish('order-updates', { recipientId: 2 }), 0);
  });

  it('a REGISTER repeated by one session is the same subscription, counted once', async () => {
    const session = opened();
    const once = await hub.subscribe(session, entry('order-updates', { recipientId: 7 }));
    const again = await hub.subscribe(session, entry('order-updates', { recipientId: 7 }));
    assert.equal(again.eventId, once.eventId);
    assert.equal(session.subscriptionCount, 1);
    assert.equal(hub.subscribersOf('order-updates'), 1);
  });

  it('fans an emit out to the routes it matches, each session once, and to subscribers without criteria', async () => {
    const [two, three, everyone] = [opened(), opened(), opened()];
    const { eventId } = await hub.subscribe(two, entry('order-updates', { recipientId: 2 }));
    await hub.subscribe(three, entry('order-updates', { recipientId: 3 }));
    const all = await hub.subscribe(everyone, entry('order-updates'));
    hub.deliver('order-updates', { recipientId: '2', status: 'shipped' });
    await turn();
    const eventData = { recipientId: '2', status: 'shipped' };
    assert.deepEqual(two.notifications(), [{ eventId, eventType: EventType.CUSTOM_WS_EVENTS, eventData }]);
    assert.deepEqual(three.notifications(), []);
    assert.deepEqual(everyone.notifications(), [{ eventId: all.eventId, eventType: EventType.CUSTOM_WS_EVENTS, eventData }]);
    hub.deliver('other-event', { recipientId: 2 });
    hub.deliver('order-updates', { status: 'no recipient' });
    await turn();
    assert.equal(two.notifications().length, 1);
    assert.equal(everyone.notifications().length, 2, 'no criteria: every emit of the event');
  });

  it('matches on every field of a multi-field criteria', async () => {
    const session = opened();
    await hub.subscribe(session, entry('order-updates', { recipientId: 1, status: 'shipped' }));
    hub.deliver('order-updates', { recipientId: 1, status: 'packed' });
    hub.deliver('order-updates', { recipientId: 1, status: 'shipped', extra: true });
    await turn();
    assert.equal(session.notifications().length, 1);
  });

  it('applies select and getEventData per subscription', async () => {
    const [selected, bare] = [opened(), opened()];
    await hub.subscribe(selected, entry('order-updates', { recipientId: 1 }, { select: ['status', 'missing'] }));
    await hub.subscribe(bare, entry('order-updates', { recipientId: 1 }, { getEventData: false }));
    hub.deliver('order-updates', { recipientId: 1, status: 'shipped', secret: 'x' });
    await turn();
    assert.deepEqual((selected.notifications()[0] as { eventData: unknown }).eventData, { status: 'shipped' });
    assert.equal('eventData' in (bare.notifications()[0] as object), false);
  });

  it('fans out in chunks of fanOutChunk writes, every session reached in the end', async () => {
    const sessions = Array.from({ length: 7 }, () => opened());
    for (const session of sessions) await hub.subscribe(session, entry('announcements'));
    hub.deliver('announcements', { text: 'maintenance at 22:00' });
    assert.equal(sessions.filter((session) => session.frames.length > 0).length, 2, 'the first chunk, at once');
    for (let i = 0; i < 4; i++) await turn();
    assert.ok(sessions.every((session) => session.notifications().length === 1));
  });

  it('refuses a subscription past maxSubscriptionsPerConnection, and one for a session it let go of', async () => {
    const session = opened();
    for (const id of [1, 2, 3]) await hub.subscribe(session, entry('order-updates', { recipientId: id }));
    await assert.rejects(hub.subscribe(session, entry('order-updates', { recipientId: 4 })), { code: 'TOO_MANY_SUBSCRIPTIONS' });
    hub.close(session);
    await assert.rejects(hub.subscribe(session, entry('order-updates', { recipientId: 1 })), { code: 'UNAVAILABLE' });
  });

  it('close lets go of the session and its routes, once', async () => {
    const session = opened();
    await hub.subscribe(session, entry('order-updates', { recipientId: 5 }));
    hub.close(session);
    hub.close(session);
    assert.equal(hub.sessions.has(session), false);
    assert.equal(session.subscriptionCount, 0);
    assert.equal(await broker.publish('order-updates', { recipientId: 5 }), 0);
    assert.equal(hub.send(session, Buffer.from([0x81, 0]), 'reply'), false, 'nothing is written to a closed session');
  });

  it('sheds a session whose unsent bytes passed the bound (1013) instead of writing to it', async () => {
    const slow = opened(2048);
    const { eventId } = await hub.subscribe(slow, entry('order-updates', { recipientId: 9 }));
    hub.deliver('order-updates', { recipientId: 9 });
    await turn();
    assert.deepEqual(slow.frames, []);
    assert.equal(slow.closed, true);
    assert.deepEqual(slow.closes.map(([code]) => code), [CloseCode.TRY_AGAIN_LATER]);
    assert.equal(hub.unsubscribe(slow, eventId), false, 'its subscriptions went with it');
    assert.deepEqual(contained, []);
  });
});
