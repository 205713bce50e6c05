import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IsolateRunner } from '../../src/code/isolate.ts';
import { code, customerCalls, request, SOURCES } from './fixtures.ts';
import { CONTRACT_LIMITS, refusesPastTheQueue, runnerContract } from './runner.contract.ts';

runnerContract('isolates', (limits) => new IsolateRunner(limits));

describe('IsolateRunner beyond the contract', () => {
  it('refuses at once when every isolate is busy and the queue is full', () => refusesPastTheQueue((limits) => new IsolateRunner(limits)));

  it('has no Node APIs: code forced into an isolate that reaches for one throws', async () => {
    const runner = new IsolateRunner(CONTRACT_LIMITS);
    try {
      const forced = code("function main(g) { return { canConnect: typeof process === 'undefined' && typeof require === 'undefined' } }", 'isolate');
      assert.deepEqual(await runner.canConnect(forced, request(), customerCalls()), { canConnect: true });
      const timer = await runner.canConnect(code('async function main(g) { await new Promise((r) => setTimeout(r, 1)); return { canConnect: true } }', 'isolate'), request(), customerCalls());
      assert.deepEqual(timer, { canConnect: false, failure: 'threw', errorText: 'can-connect code threw ReferenceError: setTimeout is not defined' });
    } finally {
      await runner.close();
    }
  });

  it('gives each code version a context of its own: a change to a built-in stays with its code', async () => {
    const runner = new IsolateRunner({ ...CONTRACT_LIMITS, size: 1 });
    try {
      const marks = code("function main(g) { Math.herald = 'marked'; return { canConnect: true } }", 'isolate');
      const looks = code("function main(g) { return { canConnect: Math.herald === undefined } }", 'isolate');
      assert.deepEqual(await runner.canConnect(marks, request(), customerCalls()), { canConnect: true });
      assert.deepEqual(await runner.canConnect(looks, request(), customerCalls()), { canConnect: true });
    } finally {
      await runner.close();
    }
  });

  it('keeps a batch open while calls keep coming, and closes it at the next turn after a quiet spell', async () => {
    const runner = new IsolateRunner({ ...CONTRACT_LIMITS, size: 1 });
    // Each call answers its place in its batch: the first of a batch resets the count once the batch has run.
    const counter = code(
      'let placed = 0; function main(g) { if (placed === 0) Promise.resolve().then(() => { placed = 0 }); placed += 1; return { canConnect: false, errorText: String(placed) } }',
      'isolate',
    );
    const sys = customerCalls(); // a batch holds calls with the same system calls
    const place = async (): Promise<number> => Number((await runner.canConnect(counter, request(), sys)).errorText);
    try {
      await place(); // the code's context is made
      await new Promise((resolve) => setTimeout(resolve, 20));
      let answered = false;
      const alone = place().finally(() => { answered = true; });
      let turns = 0;
      while (!answered) {
        turns += 1;
        await new Promise(setImmediate);
      }
      assert.equal(await alone, 1);
      assert.ok(turns < 10, `a call after a quiet spell waited ${turns} turns of the event loop`);
      // Calls one a turn, as a churn of REGISTERs brings them: two turns' batches would hold two or three each.
      const steady: Promise<number>[] = [];
      for (let i = 0; i < 20; i++) {
        steady.push(place());
        await new Promise(setImmediate);
      }
      const places = await Promise.all(steady);
      assert.ok(Math.max(...places) >= 8, `batches of at most ${Math.max(...places)} calls`);
    } finally {
      await runner.close();
    }
  });

  it('answers unavailable once closed, without running the code', async () => {
    const runner = new IsolateRunner(CONTRACT_LIMITS);
    await runner.close();
    const verdict = await runner.canConnect(code(SOURCES.allow), request(), customerCalls());
    assert.equal(verdict.failure, 'unavailable');
  });
});
