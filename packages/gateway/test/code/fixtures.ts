/** What the code runner tests share: requests, g.sys over the default customers, and code to run. */
import { readFileSync } from 'node:fs';
import type { CanConnectRequest, PreparedCode, RunnerChoice, SystemCalls } from '../../src/code/code-runner.ts';
import { prepareCode } from '../../src/code/prepare.ts';
import { canConnectRequest } from '../../src/code/runners.ts';
import { dataSourceCalls } from '../../src/code/system-calls.ts';
import type { Row } from '../../src/data/data-source.ts';
import { MemoryDataSource } from '../../src/data/memory.ts';

const customers = JSON.parse(readFileSync(new URL('../../data/customers.json', import.meta.url), 'utf8')) as Row[];

/** g.sys over an in-memory instance "mongodb" holding the default data's 10 customers (all in India). */
export const customerCalls = (): SystemCalls =>
  dataSourceCalls(new Map([['mongodb', new MemoryDataSource({ 'am_bench/customers': customers })]]));

/** A REGISTER of `order-updates` by the bench API user, as `person` (customer 2 by default: NICK, India; null: nobody). */
export function request(person: Record<string, unknown> | null = { customer_id: 2, country: 'India' }): CanConnectRequest {
  return canConnectRequest({ name: 'bench', groups: new Set(['bench']) }, person ? { generator: 'customers', id: 'NICK', key: 'customers:NICK', fields: person } : undefined, {
    eventType: 'CUSTOM_WS_EVENTS',
    apiName: 'order-updates',
    getEventData: true,
    condition: { conditionType: 'RESPONSE', criteria: { recipientId: 2 } },
  });
}

/** Someone who is not in India: no such customer in the default data. */
export const outsider = { customer_id: 42, country: 'Brazil' };

export const code = (source: string, runner: RunnerChoice = 'auto', event = 'order-updates'): PreparedCode =>
  prepareCode(event, { code: source, runner });

/** Sources the contract runs; all are isolate-safe, so they run in an isolate as well as in the sandbox. */
export const SOURCES = {
  allow: 'async function main(g) { return { canConnect: true } }',
  refuse: "async function main(g) { return { canConnect: false, errorText: 'not today' } }",
  indiaOnly: `
    interface Person { customer_id: number; country: string }
    interface Globals { req: { auth: { person?: Person } } }
    async function main(g: Globals): Promise<{ canConnect: boolean; errorText?: string }> {
      const country: string | undefined = g.req.auth.person?.country;
      return country === 'India' ? { canConnect: true } : { canConnect: false, errorText: 'only India' };
    }`,
  fromDatabase: `
    async function main(g) {
      const id = g.req.auth.person?.customer_id;
      const rows = await g.sys.db.getAll({
        instance: 'mongodb', database: 'am_bench', collection: 'customers', queryParams: { find: { customer_id: id } },
      });
      if (rows.length === 0) return { canConnect: false, errorText: 'no customer ' + id };
      return rows[0].country === 'India' ? { canConnect: true } : { canConnect: false, errorText: 'only India' };
    }`,
  badInstance: "async function main(g) { await g.sys.db.getAll({ instance: 'nope', database: 'd', collection: 'c' }); return { canConnect: true } }",
  throws: "async function main(g) { throw new RangeError('customer ' + g.req.auth.person.customer_id + ' is banned') }",
  throwsString: "function main(g) { throw 'plain string' }",
  loops: 'function main(g) { while (true) {} }',
  hangs: 'function main(g) { return new Promise(() => {}) }',
  allocates: 'function main(g) { const all = []; while (true) all.push(new Array(1e6).fill(all.length)); }',
  returnsNumber: 'function main(g) { return 42 }',
  returnsNothing: 'function main(g) {}',
  returnsString: "function main(g) { return { canConnect: 'yes' } }",
  returnsBadText: 'function main(g) { return { canConnect: false, errorText: { why: 1 } } }',
  returnsFunction: 'function main(g) { return { canConnect: () => true } }',
  /**
   * Can-connect code written as API Maker documents its code, pasted unchanged. Its form is the documented one
   * (https://docs.apimaker.dev/v1/docs/apis-all/events/user-created-events-api.html):
   *
   *   import * as T from 'types';
   *   async function main(g: T.IAMGlobal) {
   *       return await g.sys.db.getAll({
   *           instance: "INSTANCE_NAME",
   *           collection: "COLLECTION_NAME",
   *           database: "DATABASE_NAME",
   *       });
   *   };
   *   module.exports = main;
   *
   * and it reads the person as API Maker hands it (https://docs.apimaker.dev/v1/examples/req/auth/authAMDB.html:
   * "To get the value of request header x-am-user-authorization, use g.req.auth.authAMDB.") and the API user
   * (https://docs.apimaker.dev/v1/docs/authorization/AMApiUser.html: "use g.req.auth.authAMUser").
   */
  apiMaker: `import * as T from 'types';
import type { IAMGlobal } from 'types';

async function main(g: T.IAMGlobal) {
    const person = g.req.auth.authAMDB;
    if (!person) return { canConnect: false, errorText: 'Sign in first.' };
    const rows = await g.sys.db.getAll({
        instance: "mongodb",
        collection: "customers",
        database: "am_bench",
        queryParams: { find: { customer_id: person.customer_id } },
    });
    if (rows.length === 0) return { canConnect: false, errorText: 'no customer ' + person.customer_id + ' for ' + g.req.auth.authAMUser.name };
    return { canConnect: true };
};
module.exports = main;`,
  echoesRequest: `async function main(g) {
      const { apiUser, person } = g.req.auth;
      return { canConnect: false, errorText: JSON.stringify([apiUser.name, apiUser.groups, person.customer_id, g.req.eventData.apiName]) };
    }`,
} as const;

export interface LatencyReport {
  calls: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  perSecond: number;
}

/** Per-call latency of `calls` calls one after another, then throughput with `concurrency` in flight. */
export async function measure(run: () => Promise<unknown>, calls: number, concurrency: number): Promise<{ sequential: LatencyReport; concurrent: LatencyReport }> {
  const timed = async (): Promise<number> => {
    const start = performance.now();
    await run();
    return performance.now() - start;
  };
  const report = (times: number[], wallMs: number): LatencyReport => {
    const sorted = [...times].sort((a, b) => a - b);
    const at = (q: number): number => Number((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(3));
    return { calls: times.length, meanMs: Number((times.reduce((a, b) => a + b, 0) / times.length).toFixed(3)), p50Ms: at(0.5), p99Ms: at(0.99), perSecond: Math.round((times.length / wallMs) * 1000) };
  };
  let start = performance.now();
  const sequentialTimes: number[] = [];
  for (let i = 0; i < calls; i++) sequentialTimes.push(await timed());
  const sequential = report(sequentialTimes, performance.now() - start);
  start = performance.now();
  const concurrentTimes: number[] = [];
  let started = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (started++ < calls) concurrentTimes.push(await timed());
  }));
  return { sequential, concurrent: report(concurrentTimes, performance.now() - start) };
}
