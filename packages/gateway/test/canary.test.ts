/**
 * The delivery canary on in-process brokers: round trips to a node's own channel and a peer's, a node whose own
 * canaries stop coming back turning unhealthy once and back once, and whatever arrives on the channel (fast-check)
 * never throwing nor passing for a canary that was not sent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Broker } from '../src/broker/broker.ts';
import { MemoryBus } from '../src/broker/memory.ts';
import { Canary, type CanaryObserver } from '../src/canary.ts';
import { passThrough } from './support/brokers.ts';

const INTERVAL_MS = 30;
const TIMEOUT_MS = 150;

/** What an observer was told, and a way to wait for it. */
function recorder() {
  const told: string[] = [];
  const waiters = new Set<() => void>();
  const tell = (what: string) => {
    told.push(what);
    for (const waiter of waiters) waiter();
  };
  const observer: CanaryObserver = {
    roundTrip: (_seconds, target) => tell(`trip:${target}`),
    missed: (target) => tell(`missed:${target}`),
    channelLost: () => tell('lost'),
    channelBack: () => tell('back'),
  };
  const until = (what: string, count = 1) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (told.filter((each) => each === what).length < count) return;
        waiters.delete(check);
        resolve();
      };
      waiters.add(check);
      check();
    });
  return { told, observer, until };
}

/** A broker that drops the canaries it puts on its own channel while `cut` is set, as a dead subscription would. */
function cuttable(inner: Broker) {
  const state = { cut: false };
  const broker: Broker = {
    ...passThrough(inner),
    sendCanary: async (nodeId, canary) => {
      if (!(state.cut && nodeId === inner.nodeId)) await inner.sendCanary(nodeId, canary);
    },
  };
  return { broker, state };
}

test('canaries go round through a node\'s own channel and a peer\'s; a lost own channel is told once, and its return once', async () => {
  const bus = new MemoryBus();
  const { broker: a, state } = cuttable(bus.broker('a'));
  const b = bus.broker('b');
  const [seenA, seenB] = [recorder(), recorder()];
  const canaryA = new Canary({ broker: a, intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, observer: seenA.observer });
  const canaryB = new Canary({ broker: b, intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, observer: seenB.observer });
  await a.start(() => {}, () => {}, canaryA.receive);
  await b.start(() => {}, () => {}, canaryB.receive);
  canaryA.start();
  canaryB.start();
  try {
    await Promise.all([seenA.until('trip:self', 2), seenA.until('trip:peer', 2), seenB.until('trip:self', 2), seenB.until('trip:peer', 2)]);
    assert.equal(canaryA.healthy(), true);
    state.cut = true;
    await seenA.until('lost');
    assert.equal(canaryA.healthy(), false);
    assert.equal(canaryB.healthy(), true, "b's own channel still delivers");
    await seenA.until('missed:self', 3);
    assert.equal(seenA.told.filter((each) => each === 'lost').length, 1);
    state.cut = false;
    await seenA.until('back');
    assert.equal(canaryA.healthy(), true);
    assert.deepEqual([seenA.told.filter((each) => each === 'lost').length, seenA.told.filter((each) => each === 'back').length], [1, 1]);
    assert.ok(!seenB.told.includes('lost'));
  } finally {
    canaryA.stop();
    canaryB.stop();
  }
});

test('a node whose own event loop stood still past the timeout does not call its channel lost for it', async () => {
  const bus = new MemoryBus();
  const broker = bus.broker('a');
  const seen = recorder();
  const canary = new Canary({ broker, intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, observer: seen.observer });
  await broker.start(() => {}, () => {}, canary.receive);
  canary.start();
  try {
    await seen.until('trip:self', 2);
    // A starved machine: nothing of this process runs for three timeouts; the channel itself is fine.
    const until = performance.now() + 3 * TIMEOUT_MS;
    while (performance.now() < until);
    assert.equal(canary.healthy(), true, 'read before the round timer has run');
    const trips = seen.told.filter((each) => each === 'trip:self').length;
    await seen.until('trip:self', trips + 2);
    assert.equal(canary.healthy(), true);
    assert.deepEqual(seen.told.filter((each) => each === 'lost' || each === 'missed:self'), []);
  } finally {
    canary.stop();
  }
});

test('whatever arrives on the channel never throws, answers only a peer\'s ping, and never passes for a canary this node sent', () => {
  const sent: [string, string][] = [];
  const broker = { nodeId: 'me', sendCanary: async (nodeId: string, canary: string) => void sent.push([nodeId, canary]) } as unknown as Broker;
  const seen = recorder();
  const canary = new Canary({ broker, intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, observer: seen.observer });
  const part = fc.oneof(fc.constantFrom('ping', 'pong', 'me', 'peer', '1', ''), fc.string());
  fc.assert(
    fc.property(fc.oneof(fc.string(), fc.array(part, { maxLength: 5 }).map((parts) => parts.join(','))), (text) => {
      sent.length = 0;
      canary.receive(text);
      const [kind, from, seq] = text.split(',');
      const answers = kind === 'ping' && from !== undefined && seq !== undefined && from !== 'me' ? [[from, `pong,me,${seq}`]] : [];
      assert.deepEqual(sent, answers);
    }),
  );
  // Nothing was sent, so nothing came back.
  assert.deepEqual(seen.told, []);
});
