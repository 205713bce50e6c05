/**
 * A route's order of notifications on the receiving node (hub/route-history.ts): once each and in order, whatever
 * order, repeats and gaps the emitting nodes deliver in; gaps filled from the history, which reads may answer late.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { HistoryRange, HistoryRead } from '../../src/broker/broker.ts';
import { RouteHistory, type RouteEntry, type RouteHistoryHost } from '../../src/hub/route-history.ts';

const EPOCH = 'epoch-a';

/** A range of a history holding offsets 1..last of `epoch`, read as the brokers read it. */
function stored(last: number, range: HistoryRange, epoch = EPOCH): HistoryRead {
  const upTo = Math.min(range.upTo, last);
  const entries = [];
  for (let offset = range.since.offset + 1; offset <= upTo; offset++) entries.push({ offset, json: JSON.stringify({ n: offset }) });
  return { epoch, offset: last, entries, unrecovered: range.since.epoch === epoch ? undefined : 'epoch_changed' };
}

/** A route whose history holds offsets 1..last of `epoch`, and what it let through. */
function route(last: number, options: { epoch?: string; read?: (range: HistoryRange) => Promise<HistoryRead>; holdLimit?: number } = {}) {
  const { epoch = EPOCH, holdLimit = 1000 } = options;
  const passed: RouteEntry[] = [];
  const counts = { duplicates: 0, filled: 0, lost: 0, overflow: 0, reads: [] as HistoryRange[] };
  const host: RouteHistoryHost<string> = {
    read: (_route, range) => {
      counts.reads.push(range);
      return options.read?.(range) ?? Promise.resolve(stored(last, range, epoch));
    },
    next: (_route, entry) => passed.push(entry),
    duplicate: () => counts.duplicates++,
    gap: (filled) => (filled ? counts.filled++ : counts.lost++),
    overflow: () => counts.overflow++,
  };
  return { history: new RouteHistory(host, 'route', holdLimit), passed, counts };
}

const live = (offset: number, epoch = EPOCH): RouteEntry => ({ offset, epoch, eventData: { n: offset } });
const offsets = (entries: RouteEntry[]): number[] => entries.map((entry) => entry.offset);
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('arrivals before the position is known wait; those at or below it are dropped as duplicates', () => {
  const { history, passed, counts } = route(5);
  history.arrive(live(3));
  history.arrive(live(4));
  assert.deepEqual(passed, []);
  history.begin({ epoch: EPOCH, offset: 3, entries: [], unrecovered: undefined });
  assert.deepEqual(offsets(passed), [4]);
  assert.equal(counts.duplicates, 1);
  assert.deepEqual(history.position, { offset: 4, epoch: EPOCH });
});

test('a gap is read from the history while later arrivals wait; the late original is a duplicate', async () => {
  const { history, passed, counts } = route(6);
  history.begin({ epoch: EPOCH, offset: 0, entries: [], unrecovered: undefined });
  history.arrive(live(1));
  history.arrive(live(4));
  history.arrive(live(5));
  assert.deepEqual(offsets(passed), [1], 'held while 2 and 3 are read');
  await settle();
  history.arrive(live(2));
  history.arrive(live(6));
  assert.deepEqual(offsets(passed), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(passed.map((entry) => entry.json ?? entry.eventData), [{ n: 1 }, '{"n":2}', '{"n":3}', { n: 4 }, { n: 5 }, { n: 6 }]);
  assert.deepEqual(counts, { duplicates: 1, filled: 1, lost: 0, overflow: 0, reads: [{ since: { offset: 1, epoch: EPOCH }, upTo: 3, limit: 2 }] });
});

test('a gap the history no longer holds (or a read that fails) is given up: the held arrivals go on', async () => {
  for (const read of [() => Promise.reject(new Error('Redis is gone')), async (): Promise<HistoryRead> => ({ epoch: EPOCH, offset: 9, entries: [], unrecovered: 'too_old' })]) {
    const { history, passed, counts } = route(9, { read });
    history.begin({ epoch: EPOCH, offset: 0, entries: [], unrecovered: undefined });
    history.arrive(live(3));
    history.arrive(live(4));
    await settle();
    assert.deepEqual(offsets(passed), [3, 4]);
    assert.equal(counts.lost, 1);
    assert.deepEqual(passed.map((entry) => entry.afterLoss), [true, undefined], 'the first entry after the loss says so, and only it');
  }
});

test('another epoch (Redis lost the history): taken from its offset 0, its first offsets read if they did not come', async () => {
  const { history, passed } = route(3, { epoch: 'epoch-b' });
  history.begin({ epoch: EPOCH, offset: 40, entries: [], unrecovered: undefined });
  history.arrive(live(41));
  history.arrive(live(3, 'epoch-b'));
  await settle();
  assert.deepEqual(passed.map((entry) => `${entry.epoch}:${entry.offset}`), ['epoch-a:41', 'epoch-b:1', 'epoch-b:2', 'epoch-b:3']);
  assert.deepEqual(passed.map((entry) => entry.afterLoss), [undefined, true, undefined, undefined], "what epoch-a had not let through is lost: epoch-b's first says so");
  assert.deepEqual(history.position, { offset: 3, epoch: 'epoch-b' });
});

test('reach: entries appended while nothing arrived (Redis was lost) are read and let through; gone ones are told on the next', async () => {
  const { history, passed } = route(6);
  history.begin({ epoch: EPOCH, offset: 2, entries: [], unrecovered: undefined });
  history.reach({ epoch: EPOCH, offset: 6, entries: [], unrecovered: undefined });
  await settle();
  assert.deepEqual(offsets(passed), [3, 4, 5, 6]);
  assert.ok(passed.every((entry) => entry.afterLoss === undefined));
  history.reach({ epoch: EPOCH, offset: 6, entries: [], unrecovered: undefined });
  await settle();
  assert.equal(passed.length, 4, 'nothing behind: nothing read');

  const trimmed = route(9, { read: async () => ({ epoch: EPOCH, offset: 9, entries: [], unrecovered: 'capped' }) });
  trimmed.history.begin({ epoch: EPOCH, offset: 2, entries: [], unrecovered: undefined });
  trimmed.history.reach({ epoch: EPOCH, offset: 9, entries: [], unrecovered: undefined });
  await settle();
  trimmed.history.arrive(live(10));
  assert.deepEqual(trimmed.passed.map((entry) => [entry.offset, entry.afterLoss]), [[10, true]]);
});

test('a position that could not be read is taken from the first arrival', () => {
  const { history, passed } = route(9);
  history.begin(undefined);
  assert.equal(history.position, undefined);
  history.arrive(live(7));
  history.arrive(live(8));
  assert.deepEqual(offsets(passed), [7, 8]);
});

test('at most holdLimit arrivals wait; the rest are counted, and read back by the next gap', async () => {
  const { history, counts, passed } = route(2000, { holdLimit: 3 });
  for (let offset = 1; offset <= 5; offset++) history.arrive(live(offset));
  assert.equal(counts.overflow, 2);
  history.begin({ epoch: EPOCH, offset: 0, entries: [], unrecovered: undefined });
  history.arrive(live(7));
  await settle();
  assert.deepEqual(offsets(passed), [1, 2, 3, 4, 5, 6, 7]);
});

test('property: any interleaving of arrivals, repeats, gaps and late reads lets through exactly start+1..max, once, in order', async () => {
  const arrivals = fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 60 });
  await fc.assert(
    fc.asyncProperty(fc.scheduler(), arrivals, fc.integer({ min: 0, max: 10 }), async (s, arriving, start) => {
      const { history, passed } = route(40, { read: (range) => s.schedule(Promise.resolve(stored(40, range))) });
      const begin = s.schedule(Promise.resolve()).then(() => history.begin({ epoch: EPOCH, offset: start, entries: [], unrecovered: undefined }));
      const arrived = arriving.map((offset) => s.schedule(Promise.resolve()).then(() => history.arrive(live(offset))));
      await s.waitIdle();
      await Promise.all([begin, ...arrived]);
      const last = Math.max(start, ...arriving);
      assert.deepEqual(offsets(passed), Array.from({ length: last - start }, (_, i) => start + 1 + i));
      assert.ok(passed.every((entry) => entry.afterLoss === undefined), 'a history that holds everything loses nothing');
    }),
    { numRuns: 300 },
  );
});
