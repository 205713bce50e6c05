/** The limit on emits let in (hub/emit-limit.ts), driven tick by tick with readings as the lag's tick makes them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EmitLimit } from '../../src/hub/emit-limit.ts';

const BOUND_MS = 250;
const TICK_MS = 50;

/** Emits taken in one tick out of `offered`. */
function takeOf(limit: EmitLimit, offered: number): number {
  let taken = 0;
  for (let i = 0; i < offered; i++) if (limit.take()) taken++;
  return taken;
}

test('no limit while the lag is within half the bound; passing the bound halves what was let in; caught up, it grows, then goes', () => {
  const limit = new EmitLimit(BOUND_MS, TICK_MS);
  let tick = 0;
  for (; tick < 20; tick++) {
    assert.equal(takeOf(limit, 40), 40, 'everything let in');
    limit.tick({ tick, medianMs: 20, over: false, votes: 10 });
  }
  assert.equal(limit.limiting, false);

  // The tick that finds the lag past the bound let nothing in: the mean of what was let in is ~32 a tick.
  limit.tick({ tick: tick++, medianMs: 400, over: true, votes: 10 });
  assert.equal(limit.limiting, true);
  const burst = takeOf(limit, 1000);
  assert.ok(burst >= 30 && burst <= 32, `credit for two ticks at the limit at most: ${burst}`);
  limit.tick({ tick: tick++, medianMs: 400, over: true, votes: 10 });
  const cut = takeOf(limit, 1000);
  assert.ok(cut >= 15 && cut <= 17, `a tick: half of the ~32 let in, not halved again while over: ${cut}`);

  // Caught up but idle (no votes): short steps only.
  let perTick = 0;
  for (let i = 0; i < 5; i++) {
    limit.tick({ tick: tick++, medianMs: 0, over: false, votes: 0 });
    perTick = takeOf(limit, 1000);
  }
  assert.ok(perTick >= 16 && perTick <= 19, `grown by a few percent a tick: ${perTick}`);

  // Emits no longer meet it: it goes.
  for (let i = 0; i < 30 && limit.limiting; i++) limit.tick({ tick: tick++, medianMs: 0, over: false, votes: 0 });
  assert.equal(limit.limiting, false);
  assert.equal(takeOf(limit, 1000), 1000);
});

test('a lag climbing past half the bound cuts the limit by how fast it climbs, once a lag', () => {
  const limit = new EmitLimit(BOUND_MS, TICK_MS);
  let tick = 0;
  for (; tick < 20; tick++) {
    takeOf(limit, 100);
    limit.tick({ tick, medianMs: 10, over: false, votes: 10 });
  }
  // From 10 ms to 210 ms over a tick: a climb of ~0.4 ms a ms, past half the bound, not past it.
  takeOf(limit, 100);
  limit.tick({ tick: tick++, medianMs: 210, over: false, votes: 10 });
  assert.equal(limit.limiting, true);
  takeOf(limit, 1000); // the credit of two ticks
  // Still climbing within the same lag: not cut again.
  limit.tick({ tick: tick++, medianMs: 230, over: false, votes: 10 });
  const first = takeOf(limit, 1000);
  assert.ok(first >= 69 && first <= 73, `cut by 1 + climb (1.4) from the ~100 a tick let in, once: ${first}`);
});
