/**
 * No Docker engine runs on the build machine, so only what can run honestly is tested: a real dockerode
 * call against an endpoint where nothing listens fails, and the runner turns that into clear verdicts.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { dockerSandbox } from '../../src/code/sandbox-docker.ts';
import { code, customerCalls, request, SOURCES } from './fixtures.ts';
import { CONTRACT_LIMITS } from './runner.contract.ts';

describe('Docker sandbox without an engine', () => {
  it('a socket that does not exist: unavailable, naming the endpoint, on every call', async () => {
    const socketPath = `/tmp/herald-no-docker-${process.pid}.sock`;
    assert.equal(existsSync(socketPath), false);
    const runner = dockerSandbox(CONTRACT_LIMITS, { socketPath });
    try {
      for (let i = 0; i < 3; i++) {
        assert.deepEqual(await runner.canConnect(code(SOURCES.allow, 'sandbox'), request(), customerCalls()), {
          canConnect: false,
          failure: 'unavailable',
          errorText: `can-connect code could not run: docker at unix://${socketPath}: connect ENOENT ${socketPath}`,
        });
      }
    } finally {
      await runner.close();
    }
  });

  it('a TCP endpoint that refuses: unavailable, naming the endpoint', async () => {
    const runner = dockerSandbox(CONTRACT_LIMITS, { host: '127.0.0.1', port: 1 });
    try {
      const verdict = await runner.canConnect(code(SOURCES.allow, 'sandbox'), request(), customerCalls());
      assert.equal(verdict.failure, 'unavailable');
      assert.match(verdict.errorText ?? '', /docker at 127\.0\.0\.1:1: connect ECONNREFUSED/);
    } finally {
      await runner.close();
    }
  });
});
