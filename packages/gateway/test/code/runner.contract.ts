/**
 * The CodeRunner contract: what every runner does with the same code, real isolates or real worker
 * processes underneath. Failures are verdicts, never rejections, and after a timeout or a memory
 * blow-up the very next call on the same pool works.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CanConnectVerdict, CodeRunner, RunnerLimits } from '../../src/code/code-runner.ts';
import { code, customerCalls, measure, outsider, request, SOURCES } from './fixtures.ts';

export const CONTRACT_LIMITS: RunnerLimits = { size: 2, timeoutMs: 1000, memoryMb: 32, queue: 64 };

export function runnerContract(name: string, make: (limits: RunnerLimits) => CodeRunner): void {
  describe(`CodeRunner contract: ${name}`, () => {
    let runner: CodeRunner;
    const sys = customerCalls();
    const run = (source: string, person?: Record<string, unknown>): Promise<CanConnectVerdict> =>
      runner.canConnect(code(source), request(person), sys);
    const stillWorks = async (): Promise<void> => assert.deepEqual(await run(SOURCES.allow), { canConnect: true });

    before(() => {
      runner = make(CONTRACT_LIMITS);
    });
    after(() => runner.close());

    it('allows and refuses with the code’s own errorText', async () => {
      assert.deepEqual(await run(SOURCES.allow), { canConnect: true });
      assert.deepEqual(await run(SOURCES.refuse), { canConnect: false, errorText: 'not today' });
    });

    it('reads g.req: the person (India only, TypeScript annotations stripped) and the REGISTER entry', async () => {
      assert.deepEqual(await run(SOURCES.indiaOnly), { canConnect: true });
      assert.deepEqual(await run(SOURCES.indiaOnly, outsider), { canConnect: false, errorText: 'only India' });
      const echoed = await run(SOURCES.echoesRequest);
      assert.equal(echoed.errorText, JSON.stringify(['bench', ['bench'], 2, 'order-updates']));
    });

    it("runs API Maker's code as written: its typings import, its CommonJS export, g.req.auth.authAMDB and authAMUser", async () => {
      assert.deepEqual(await run(SOURCES.apiMaker), { canConnect: true });
      assert.deepEqual(await run(SOURCES.apiMaker, outsider), { canConnect: false, errorText: 'no customer 42 for bench' });
      const anonymous = await runner.canConnect(code(SOURCES.apiMaker), request(null), sys);
      assert.deepEqual(anonymous, { canConnect: false, errorText: 'Sign in first.' });
    });

    it('reads the database through g.sys.db.getAll', async () => {
      assert.deepEqual(await run(SOURCES.fromDatabase, { customer_id: 7 }), { canConnect: true });
      assert.deepEqual(await run(SOURCES.fromDatabase, outsider), { canConnect: false, errorText: 'no customer 42' });
    });

    it('a g.sys error reaches the code, which may let it propagate: threw', async () => {
      const verdict = await run(SOURCES.badInstance);
      assert.equal(verdict.failure, 'threw');
      assert.match(verdict.errorText ?? '', /no instance named "nope"/);
    });

    it('a throw is a refusal naming the error', async () => {
      assert.deepEqual(await run(SOURCES.throws), {
        canConnect: false,
        failure: 'threw',
        errorText: 'can-connect code threw RangeError: customer 2 is banned',
      });
      assert.deepEqual(await run(SOURCES.throwsString), {
        canConnect: false,
        failure: 'threw',
        errorText: 'can-connect code threw plain string',
      });
    });

    it('garbage in place of a verdict is bad_result', async () => {
      for (const [source, detail] of [
        [SOURCES.returnsNumber, 'it returned number'],
        [SOURCES.returnsNothing, 'it returned undefined'],
        [SOURCES.returnsString, 'canConnect is string'],
        [SOURCES.returnsBadText, 'errorText is object'],
        [SOURCES.returnsFunction, 'canConnect is function'],
      ] as const) {
        const verdict = await run(source);
        assert.equal(verdict.failure, 'bad_result', source);
        assert.equal(verdict.canConnect, false);
        assert.ok(verdict.errorText?.endsWith(detail), `${verdict.errorText} should end with ${detail}`);
      }
    });

    it('an endless loop times out, and the next call works', async () => {
      const started = performance.now();
      const verdict = await run(SOURCES.loops);
      assert.equal(verdict.failure, 'timeout');
      assert.equal(verdict.errorText, 'can-connect code did not answer within 1000 ms');
      assert.ok(performance.now() - started < CONTRACT_LIMITS.timeoutMs + 500);
      await stillWorks();
    });

    it('a promise that never settles times out, and the next call works', async () => {
      assert.equal((await run(SOURCES.hangs)).failure, 'timeout');
      await stillWorks();
    });

    it('allocating without bound is memory, and the next call works', async () => {
      const verdict = await run(SOURCES.allocates);
      assert.deepEqual(verdict, { canConnect: false, failure: 'memory', errorText: 'can-connect code went over its memory limit (32 MB)' });
      await stillWorks();
    });

    it('calls made together each get their own verdict: a loop or a database read among them changes no other', async () => {
      const byPerson = `async function main(g) {
        const { customer_id, country } = g.req.auth.person;
        if (country === 'Loop') while (true) {}
        if (country === 'Ask') {
          const rows = await g.sys.db.getAll({ instance: 'mongodb', database: 'am_bench', collection: 'customers', queryParams: { find: { customer_id } } });
          return { canConnect: rows.length === 1, errorText: rows.length === 1 ? undefined : 'unknown' };
        }
        return country === 'India' ? { canConnect: true } : { canConnect: false, errorText: 'only India' };
      }`;
      const people = [
        { customer_id: 1, country: 'India' },
        { customer_id: 2, country: 'Ask' },
        outsider,
        { customer_id: 3, country: 'Loop' },
        { customer_id: 42, country: 'Ask' },
        { customer_id: 4, country: 'India' },
      ];
      const together = async (who: typeof people): Promise<unknown[]> =>
        (await Promise.all(who.map((person) => run(byPerson, person)))).map((verdict) => verdict.failure ?? verdict.errorText ?? verdict.canConnect);
      assert.deepEqual(await together(people.filter(({ country }) => country !== 'Loop')), [true, true, 'only India', 'unknown', true]);
      assert.deepEqual(await together(people), [true, true, 'only India', 'timeout', 'unknown', true]);
    });

    it('calls made together each get the whole time limit, though together they take longer', async () => {
      const limited = make({ ...CONTRACT_LIMITS, size: 1, timeoutMs: 500 });
      try {
        const slow = code('function main(g) { const end = Date.now() + 200; while (Date.now() < end) {} return { canConnect: true } }');
        const verdicts = await Promise.all(Array.from({ length: 4 }, () => limited.canConnect(slow, request(), sys)));
        assert.deepEqual(verdicts, Array.from({ length: 4 }, () => ({ canConnect: true })));
      } finally {
        await limited.close();
      }
    });

    it('runs calls beyond the pool size from its queue', async () => {
      const verdicts = await Promise.all(Array.from({ length: 20 }, (_, i) => run(SOURCES.indiaOnly, i % 2 ? outsider : undefined)));
      assert.equal(verdicts.filter((verdict) => verdict.canConnect).length, 10);
    });

    it('measures the per-call latency over 1,000 calls (printed, not asserted)', async (t) => {
      const allow = code(SOURCES.indiaOnly);
      await runner.canConnect(allow, request(), sys); // loaded once, as in service
      const { sequential, concurrent } = await measure(() => runner.canConnect(allow, request(), sys), 1000, 2 * CONTRACT_LIMITS.size);
      const line = (label: string, r: typeof sequential): string =>
        `${name} ${label}: ${r.calls} calls, mean ${r.meanMs} ms, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, ${r.perSecond}/s`;
      t.diagnostic(line('one at a time', sequential));
      t.diagnostic(line(`${2 * CONTRACT_LIMITS.size} in flight`, concurrent));
    });
  });
}

/** A full pool with no queue refuses at once: unavailable, naming why. */
export async function refusesPastTheQueue(make: (limits: RunnerLimits) => CodeRunner): Promise<void> {
  const runner = make({ size: 1, timeoutMs: 300, memoryMb: 32, queue: 0 });
  try {
    const sys = customerCalls();
    await runner.canConnect(code(SOURCES.allow), request(), sys); // the slot is up and running
    const busy = runner.canConnect(code(SOURCES.loops), request(), sys);
    const refused = await runner.canConnect(code(SOURCES.allow), request(), sys);
    assert.equal(refused.failure, 'unavailable');
    assert.match(refused.errorText ?? '', /all 1 busy and 0 calls waiting/);
    assert.equal((await busy).failure, 'timeout');
  } finally {
    await runner.close();
  }
}
