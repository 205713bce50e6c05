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

  it('answers unavailable once closed, without running the code', async () => {
    const runner = new IsolateRunner(CONTRACT_LIMITS);
    await runner.close();
    const verdict = await runner.canConnect(code(SOURCES.allow), request(), customerCalls());
    assert.equal(verdict.failure, 'unavailable');
  });
});
