/**
 * Can-connect code prepared in a child process (prepare-apart.ts), as Gateway.create does: the same PreparedCode as
 * prepare.ts makes in-process, the same ConfigError for bad code, and a node that does not start on it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfigFile, DEFAULT_CONFIG_FILE } from '../../src/config/load.ts';
import { prepareApart } from '../../src/code/prepare-apart.ts';
import { prepareEvents } from '../../src/code/prepare.ts';
import { ConfigError } from '../../src/errors.ts';
import { Gateway } from '../../src/node.ts';
import { SOURCES } from './fixtures.ts';

const configError = (pattern: RegExp) => (error: unknown) => error instanceof ConfigError && pattern.test(error.message);

describe('prepareApart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-prepare-apart-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('prepares what prepareEvents prepares, for the events with code only', async () => {
    writeFileSync(join(dir, 'india.ts'), SOURCES.indiaOnly);
    const events = {
      inline: { canConnect: { code: SOURCES.allow } },
      file: { canConnect: { file: join(dir, 'india.ts') } },
      sandboxed: { canConnect: { code: SOURCES.allow, runner: 'sandbox' as const } },
      none: {},
    };
    assert.deepEqual(await prepareApart(events), prepareEvents(events));
  });

  it('refuses bad code with the ConfigError prepare.ts throws, naming the event', async () => {
    const bad = { broken: { canConnect: { code: 'function main( {' } } };
    const inProcess = (() => {
      try {
        prepareEvents(bad);
      } catch (error) {
        return error as Error;
      }
      return undefined;
    })();
    assert.ok(inProcess instanceof ConfigError);
    await assert.rejects(prepareApart(bad), (error: unknown) => error instanceof ConfigError && error.message === inProcess.message);
    await assert.rejects(prepareApart({ gone: { canConnect: { file: join(dir, 'missing.ts') } } }), configError(/^events\.gone\.canConnect: cannot read /));
  });

  it('a code file that does not compile stops the node before it starts', async () => {
    writeFileSync(join(dir, 'broken.ts'), 'enum Level { Low } function main() {}');
    const config = loadConfigFile(DEFAULT_CONFIG_FILE);
    const events = { ...config.events, 'checked-token': { ...config.events['checked-token']!, canConnect: { file: join(dir, 'broken.ts'), runner: 'auto' as const } } };
    await assert.rejects(Gateway.create({ ...config, events }, { dataSources: new Map() }), configError(/^events\.checked-token\.canConnect: .*enum/));
  });
});
