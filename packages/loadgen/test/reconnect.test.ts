/**
 * The reconnect figures as the parent makes them from its workers' snapshots: drops, returns, when the last
 * one was back, the away times and the clients-over-time series, added up across processes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram } from '../src/histogram.ts';
import { parseCommand, UsageError } from '../src/options.ts';
import { reconnectFigures, retriable } from '../src/reconnect.ts';
import { emptySnapshot, mergeSnapshots, type PoolSnapshot } from '../src/snapshot.ts';
import { Timeline } from '../src/timeline.ts';

/** A worker's snapshot: clients ready at `readyAt`, then each [dropped at, back at, or never] (epoch ms). */
function worker(readyAt: number, clients: number, episodes: Array<[number, number?]>): PoolSnapshot {
  const level = new Timeline();
  const away = new Histogram();
  for (let i = 0; i < clients; i++) level.record(readyAt, 'joined');
  const returns: number[] = [];
  for (const [droppedAt, backAt] of episodes) {
    level.record(droppedAt, 'dropped');
    if (backAt === undefined) continue;
    level.record(backAt, 'back');
    away.record(backAt - droppedAt);
    returns.push(backAt);
  }
  return {
    ...emptySnapshot(),
    ready: clients,
    dropped: episodes.length,
    back: returns.length,
    away: away.toData(),
    firstDropAt: Math.min(...episodes.map(([droppedAt]) => droppedAt)),
    lastBackAt: Math.max(0, ...returns),
    level: level.toData(),
    retryFailures: { 'HTTP 503': episodes.length },
  };
}

test('two workers add up: the first drop of either, the last return of either, one series', () => {
  const t = 1_700_000_000_000;
  const a = worker(t + 50, 3, [[t + 520, t + 1230], [t + 530, t + 1990]]);
  const b = worker(t + 80, 2, [[t + 480, t + 1400], [t + 490, t + 2480]]);
  const merged = mergeSnapshots([a, b]);
  const figures = reconnectFigures(merged);
  assert.deepEqual({ ...figures, series: undefined }, { dropped: 4, back: 4, away: 0, allBackS: 2, series: undefined });
  assert.deepEqual(merged.retryFailures, { 'HTTP 503': 4 });
  const away = Histogram.from(merged.away).summary();
  assert.equal(away.count, 4);
  assert.equal(away.max, 1990);
  // Buckets of 100 ms from the one holding the first drop (t + 480): 5 ready before it, B's two drops in it.
  assert.deepEqual(figures.series.slice(0, 3), [[0, 5], [0.1, 3], [0.2, 1]]);
  assert.deepEqual(figures.series.find(([s]) => s === 0.9), [0.9, 2]);
  assert.deepEqual(figures.series.at(-1), [2.1, 5]);
  assert.equal(figures.series.length, 22);
});

test('clients that got ready within the 100 ms of the first drop count as ready before it', () => {
  const t = 1_700_000_000_000;
  const series = reconnectFigures(mergeSnapshots([worker(t + 10, 2, [[t + 60, t + 450]]), worker(t + 40, 1, [[t + 90, t + 300]])])).series;
  assert.deepEqual(series, [[0, 3], [0.1, 1], [0.2, 1], [0.3, 1], [0.4, 2], [0.5, 3]]);
});

test('a client dropped and back within the 100 ms of the first drop is not counted twice before it', () => {
  const t = 1_700_000_000_000;
  const series = reconnectFigures(mergeSnapshots([worker(t + 10, 3, [[t + 120, t + 170]]), worker(t + 20, 3, [[t + 130, t + 650]])])).series;
  assert.deepEqual(series.slice(0, 2), [[0, 6], [0.1, 5]]);
  assert.deepEqual(series.at(-1), [0.6, 6]);
});

test('while a client is away there is no all-back time; with no drop, no series', () => {
  const t = 1_700_000_000_000;
  const stillAway = reconnectFigures(mergeSnapshots([worker(t, 2, [[t + 100, t + 900], [t + 150]])]));
  assert.equal(stillAway.allBackS, null);
  assert.equal(stillAway.away, 1);
  assert.deepEqual([stillAway.series[0], stillAway.series.at(-1)], [[0, 2], [0.9, 1]]);
  assert.deepEqual(reconnectFigures(emptySnapshot()), { dropped: 0, back: 0, away: 0, allBackS: null, series: [] });
});

test('options: --await-return implies --reconnect with the SDK bounds (1 to 5 s); the bounds are checked', () => {
  const notify = parseCommand(['notify', 'http://127.0.0.1:1', '--await-return', '30']);
  assert.ok(notify.command === 'notify');
  assert.deepEqual(notify.reconnect, { minDelayMs: 1000, maxDelayMs: 5000 });
  const listen = parseCommand(['listen', 'ws://127.0.0.1:1', '--clients', '1', '--reconnect', '--reconnect-min', '0.1', '--reconnect-max', '0.5']);
  assert.ok(listen.command === 'listen');
  assert.deepEqual(listen.reconnect, { minDelayMs: 100, maxDelayMs: 500 });
  assert.equal((parseCommand(['fill', 'ws://127.0.0.1:1', '--clients', '1']) as { reconnect: unknown }).reconnect, undefined);
  assert.throws(() => parseCommand(['fill', 'ws://127.0.0.1:1', '--clients', '1', '--reconnect', '--reconnect-min', '3', '--reconnect-max', '2']), UsageError);
});

test('clients that reconnect share a source address 1,000 at a time by default, the others 5,000; --per-address wins', () => {
  const perAddress = (...args: string[]): number => (parseCommand(['fill', 'ws://127.0.0.1:1', '--clients', '18000', ...args]) as { perAddress: number }).perAddress;
  assert.equal(perAddress(), 5000);
  assert.equal(perAddress('--reconnect'), 1000);
  assert.equal(perAddress('--reconnect', '--per-address', '2000'), 2000);
  assert.equal((parseCommand(['notify', 'http://127.0.0.1:1', '--clients', '18000', '--await-return', '30']) as { perAddress: number }).perAddress, 1000);
});

test('an attempt is made again after a failed transport, not after the node refused the tokens or the REGISTER', () => {
  for (const reason of ['timeout', 'ECONNREFUSED', 'ECONNRESET', 'HTTP 503', 'closed 1006', 'UNAVAILABLE', 'INTERNAL']) assert.ok(retriable(reason), reason);
  for (const reason of ['TOKEN_INVALID', 'TOKEN_EXPIRED', 'CRITERIA_NOT_YOURS', 'CAN_CONNECT_REFUSED', 'UNKNOWN_EVENT']) assert.ok(!retriable(reason), reason);
});
