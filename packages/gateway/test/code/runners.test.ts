import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canConnectRequest, CodeRunners, DEFAULT_CODE_OPTIONS } from '../../src/code/runners.ts';
import { code, customerCalls, request } from './fixtures.ts';

/** In an isolate there is no `process`; in a sandbox worker there is. */
const WHERE = "function main(g) { return { canConnect: false, errorText: typeof process === 'undefined' ? 'isolate' : 'sandbox' } }";

describe('CodeRunners', () => {
  it('runs isolate-safe code in an isolate and the rest in the sandbox, as placed', async () => {
    const runners = new CodeRunners({ ...DEFAULT_CODE_OPTIONS, isolates: 1, sandboxes: 1 });
    try {
      const where = async (runner: 'auto' | 'isolate' | 'sandbox') =>
        (await runners.canConnect(code(WHERE, runner), request(), customerCalls())).errorText;
      assert.equal(code(WHERE).inIsolate, false); // it names `process`
      assert.equal(await where('auto'), 'sandbox');
      assert.equal(await where('isolate'), 'isolate');
      assert.equal(await where('sandbox'), 'sandbox');
    } finally {
      await runners.close();
    }
  });

  it('closes without having started anything', async () => {
    await new CodeRunners().close();
  });

  it('builds g.req from the API user, the person and the REGISTER entry, as plain values, also under API Maker\'s names', () => {
    const entry = { eventType: 'CUSTOM_WS_EVENTS', apiName: 'order-updates' };
    const built = canConnectRequest({ name: 'bench', groups: new Set(['bench']) }, { generator: 'customers', id: 'NICK', key: 'customers:NICK', fields: { customer_id: 2 } }, entry);
    const apiUser = { name: 'bench', groups: ['bench'] };
    const person = { customer_id: 2 };
    assert.deepEqual(built, { auth: { apiUser, authAMUser: apiUser, person, authAMDB: person }, eventData: entry });
    const nobody = { name: 'bench', groups: [] };
    assert.deepEqual(canConnectRequest({ name: 'bench', groups: new Set() }, undefined, entry).auth, { apiUser: nobody, authAMUser: nobody });
  });
});
