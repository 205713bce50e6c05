/** Per-emit tallies: added up across pools by sentAt, reported in the order sent, bounded. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EmitTallies, MAX_TALLIED_EMITS } from '../src/emit-tallies.ts';

test('two pools\' tallies add up per emit: listeners told summed, the last one told the later of the two', () => {
  const one = new EmitTallies();
  const two = new EmitTallies();
  one.record(2000.5, 3);
  one.record(1000.25, 7);
  one.record(1000.25, 5);
  two.record(1000.25, 9);
  two.record(2000.5, 1);
  const merged = EmitTallies.from(one.toData());
  merged.add(two.toData());
  const { emits, each, lastTold } = merged.summary();
  assert.equal(emits, 2);
  assert.deepEqual(each, [{ told: 3, lastMs: 9 }, { told: 2, lastMs: 3 }]);
  assert.equal(lastTold.max, 9);
  assert.equal(lastTold.min, 3);
});

test(`a pool tallies at most ${MAX_TALLIED_EMITS} emits; those past it are not tallied, the ones before still are`, () => {
  const tallies = new EmitTallies();
  for (let i = 0; i <= MAX_TALLIED_EMITS; i++) tallies.record(i, 1);
  tallies.record(0, 4);
  const { emits, each } = tallies.summary();
  assert.equal(emits, MAX_TALLIED_EMITS);
  assert.deepEqual(each[0], { told: 2, lastMs: 4 });
});
