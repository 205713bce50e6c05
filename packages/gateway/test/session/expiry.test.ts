/** The expiry queue on a clock the test moves: notices and expiries when due and never before, refreshes, removal. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExpiryQueue, type Expiring } from '../../src/session/expiry.ts';

class Item implements Expiring<Item> {
  expiresAt: number;
  dueWith: Set<Item> | undefined;
  readonly name: string;
  constructor(name: string, expiresAt: number) {
    this.name = name;
    this.expiresAt = expiresAt;
  }
}

const T0 = 1_800_000_000_000;

/** A queue whose clock is `clock.now`, and what it did, as "<ms> notice|expire <item>". */
function harness(noticeMs: number) {
  const clock = { now: T0 };
  const log: string[] = [];
  const queue = new ExpiryQueue<Item>({
    noticeMs,
    now: () => clock.now,
    handler: {
      notice: (item, expiresAt) => void log.push(`${clock.now - T0} notice ${item.name} ${expiresAt - T0}`),
      expire: (item) => {
        log.push(`${clock.now - T0} expire ${item.name}`);
        queue.remove(item);
      },
    },
  });
  /** Tick every `stepMs` until `untilMs` after T0. */
  const runUntil = (untilMs: number, stepMs = 100) => {
    while (clock.now - T0 < untilMs) {
      clock.now += stepMs;
      queue.tick();
    }
  };
  return { clock, log, queue, runUntil };
}

test('a connection is told its expiry noticeMs before it, within the second after, and closed at it, never before', () => {
  const { log, queue, runUntil } = harness(2000);
  queue.add(new Item('a', T0 + 5300));
  queue.add(new Item('b', T0 + 5300));
  runUntil(10_000);
  // Notice due at 3300 (the bucket of second 4), expiry at 5300 (second 6).
  assert.deepEqual(log, ['4000 notice a 5300', '4000 notice b 5300', '6000 expire a', '6000 expire b']);
  assert.equal(queue.size, 0);
});

test('a connection that refreshed is not closed, and is told again before its new expiry', () => {
  const { log, queue, runUntil } = harness(2000);
  const item = new Item('a', T0 + 5000);
  queue.add(item);
  runUntil(4000);
  assert.deepEqual(log, ['3000 notice a 5000']);
  item.expiresAt = T0 + 15_000;
  runUntil(20_000);
  assert.deepEqual(log, ['3000 notice a 5000', '13000 notice a 15000', '15000 expire a']);
});

test('a connection taken out (closed) is neither told nor closed, and the queue holds nothing of it', () => {
  const { log, queue, runUntil } = harness(1000);
  const items = Array.from({ length: 1000 }, (_, i) => new Item(`c${i}`, T0 + 3000));
  for (const item of items) queue.add(item);
  assert.equal(queue.size, 1000);
  for (const item of items) queue.remove(item);
  assert.equal(queue.size, 0);
  runUntil(5000);
  assert.deepEqual(log, []);
});

test('a token already within its notice, or expired, is handled at the next tick; one that never expires is not held', () => {
  const { log, queue, runUntil } = harness(60_000);
  queue.add(new Item('soon', T0 + 10_000));
  queue.add(new Item('gone', T0 - 1));
  queue.add(new Item('forever', Infinity));
  assert.equal(queue.size, 2);
  runUntil(12_000);
  assert.deepEqual(log, ['1000 notice soon 10000', '1000 expire gone', '10000 expire soon']);
});

test('a late tick handles every second it missed; noticeMs 0 sends no notice', () => {
  const { clock, log, queue } = harness(0);
  for (let i = 1; i <= 5; i++) queue.add(new Item(`s${i}`, T0 + i * 1000));
  clock.now = T0 + 7500;
  queue.tick();
  assert.deepEqual(log, ['7500 expire s1', '7500 expire s2', '7500 expire s3', '7500 expire s4', '7500 expire s5']);
});
