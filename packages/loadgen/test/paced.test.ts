/** The fill's pace (pool.ts `paced`): a steady rate, held while there is no room, resumed without a burst. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { paced } from '../src/pool.ts';

/** Steps taken in one go (one tick of the pace): a microtask after the first of them ends the batch. */
function batches() {
  const sizes: number[] = [];
  let open = false;
  return {
    sizes,
    step(): void {
      if (!open) {
        open = true;
        sizes.push(0);
        queueMicrotask(() => (open = false));
      }
      sizes[sizes.length - 1]!++;
    },
  };
}

test('no more steps than the room allows, and all of them once there is room', async () => {
  let started = 0;
  let finished = 0;
  const waits = new Map<number, () => void>();
  const startedTo = (n: number) => new Promise<void>((resolve) => (started >= n ? resolve() : waits.set(n, resolve)));
  const step = () => waits.get(++started)?.();
  const done = paced(50, 100_000, undefined, step, () => 5 - (started - finished));
  await startedTo(5);
  // The pace ticks every few ms: several ticks without room start nothing more.
  await sleep(50);
  assert.equal(started, 5, 'five in flight, the rest held');
  finished = 5;
  await startedTo(10);
  await sleep(50);
  assert.equal(started, 10);
  finished = 50;
  await done;
  assert.equal(started, 50);
});

test('a pace held for a while resumes at its rate: the time without room is not made up in a burst', async () => {
  const { sizes, step } = batches();
  let room = 0;
  const done = paced(400, 1000, undefined, step, () => room);
  // 300 ms at 1,000/s: 300 steps would be due at once if the pace caught up.
  await sleep(300);
  assert.equal(sizes.length, 0);
  room = Infinity;
  await done;
  assert.ok(Math.max(...sizes) < 100, `largest batch ${Math.max(...sizes)}`);
});

test('an abort ends the pace with the steps taken so far', async () => {
  const controller = new AbortController();
  let started = 0;
  const { promise: first, resolve } = Promise.withResolvers<void>();
  const done = paced(1_000_000, 1000, controller.signal, () => {
    started++;
    resolve();
  });
  await first;
  controller.abort();
  await done;
  const atAbort = started;
  await sleep(30);
  assert.equal(started, atAbort);
  assert.ok(atAbort > 0 && atAbort < 1000);
});
