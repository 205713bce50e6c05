import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { parse, stringify } from 'yaml';
import { DEFAULT_CONFIG_FILE, loadConfigFile, parseConfig, type ConfigOverrides } from '../src/config/load.ts';
import { configSchema } from '../src/config/schema.ts';
import { ConfigError } from '../src/errors.ts';
import { Gateway } from '../src/node.ts';

const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The shipped default as a plain object, to derive variants from. */
const shipped = (): Record<string, any> => parse(readFileSync(DEFAULT_CONFIG_FILE, 'utf8'));

let written = 0;
/** Write `raw` as a new YAML file in the temp dir and answer its path. */
function writeConfig(raw: unknown): string {
  const file = join(dir, `config-${++written}.yaml`);
  writeFileSync(file, stringify(raw));
  return file;
}

/** Loading `raw` fails with a ConfigError whose message names every fragment. */
function refuses(raw: unknown, fragments: string[], overrides: ConfigOverrides = {}): void {
  assert.throws(
    () => loadConfigFile(writeConfig(raw), overrides),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
      for (const fragment of fragments) assert.ok(error.message.includes(fragment), `${error.message}\nlacks ${fragment}`);
      return true;
    },
  );
}

function isDeepFrozen(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true;
  return Object.isFrozen(value) && Object.values(value).every(isDeepFrozen);
}

describe('config', () => {
  it('loads the shipped default, deeply frozen, its seed resolved next to the package', () => {
    const config = loadConfigFile(DEFAULT_CONFIG_FILE);
    assert.equal(config.userPath, 'bench');
    assert.equal(config.server.port, 38246);
    assert.equal(config.websocket.maxPayload, 65536);
    assert.deepEqual(config.apiUsers.bench?.groups, ['bench']);
    assert.deepEqual(config.tokenGenerators.customers?.select, ['customer_id', 'country']);
    assert.ok(isDeepFrozen(config));
    assert.throws(() => {
      (config.server as { port: number }).port = 1;
    }, TypeError);
    const seed = config.instances.mongodb?.databases.am_bench?.collections.customers?.seed;
    assert.ok(seed !== undefined && existsSync(seed), `seed ${seed} should exist`);
  });

  it('fills defaults for omitted sections', () => {
    const { server, websocket, instances, tokenGenerators, ...raw } = shipped();
    // Without generators no person token exists, so nothing may bind to one.
    raw.events = { announcements: raw.events.announcements };
    const config = loadConfigFile(writeConfig(raw));
    assert.deepEqual(config.server, { port: 38246, host: '0.0.0.0', reusePort: false, backlog: 4096, emitFastPath: true, trustProxy: false });
    assert.equal(config.websocket.maxSubscriptionsPerConnection, 100);
    assert.deepEqual(config.instances, {});
    assert.deepEqual(config.tokenGenerators, {});
    assert.deepEqual(config.tables, { pageSize: 100, maxPageSize: 1000, maxPageBytes: 1048576, maxRowBytes: 16384, maxSaveBytes: 1048576 });
    assert.deepEqual(config.rateLimit, {
      tokenRequests: { perSecond: 5, burst: 50 },
      tableCalls: { perSecond: 20, burst: 40 },
      apiUserTableCalls: { perSecond: 200, burst: 400 },
      maxCallers: 10000,
    });
  });

  it('reads a table\'s access as { read, write }, one level standing for both; default both, hidden none', () => {
    const raw = shipped();
    raw.instances.mongodb.databases.am_bench.collections = {
      ...raw.instances.mongodb.databases.am_bench.collections,
      shorthand: { access: 'apiUser' },
      split: { access: { read: 'public', write: 'none' }, hidden: ['secret'] },
      closed: { access: 'none' },
      bare: {},
    };
    const collections = loadConfigFile(writeConfig(raw)).instances.mongodb?.databases.am_bench?.collections;
    assert.deepEqual(collections?.shorthand?.access, { read: 'apiUser', write: 'apiUser' });
    assert.deepEqual(collections?.split, { access: { read: 'public', write: 'none' }, hidden: ['secret'] });
    assert.deepEqual(collections?.closed?.access, { read: 'none', write: 'none' });
    assert.deepEqual(collections?.bare, { access: { read: 'both', write: 'both' }, hidden: [] });
    assert.deepEqual(collections?.customers?.access, { read: 'both', write: 'none' });
  });

  it('refuses an access that is not a level or { read, write }, naming the field and the choices', () => {
    const field = 'instances.mongodb.databases.am_bench.collections.inserts_public.access';
    const cases: Array<[unknown, string]> = [
      ['everyone', 'public, apiUser, both or none'],
      [{ read: 'public' }, 'public, apiUser, both or none'],
      [{ read: 'public', write: 'all' }, 'public, apiUser, both or none'],
      [{ read: 'public', write: 'none', delete: 'none' }, 'Unrecognized key: "delete"'],
    ];
    for (const [access, problem] of cases) {
      const raw = shipped();
      raw.instances.mongodb.databases.am_bench.collections.inserts_public.access = access;
      refuses(raw, [field, problem]);
    }
  });

  it('refuses any write access to a token generator\'s collection: a saved row would be a person anyone could log in as', () => {
    for (const access of ['both', 'public', { read: 'both', write: 'apiUser' }, undefined]) {
      const raw = shipped();
      raw.instances.mongodb.databases.am_bench.collections.customers.access = access;
      refuses(raw, ['instances.mongodb.databases.am_bench.collections.customers.access', 'token generator customers', 'write: none']);
    }
    const readable = shipped();
    readable.instances.mongodb.databases.am_bench.collections.customers.access = 'none';
    assert.deepEqual(loadConfigFile(writeConfig(readable)).instances.mongodb?.databases.am_bench?.collections.customers?.access, {
      read: 'none',
      write: 'none',
    });
  });

  it('refuses table limits that contradict each other, and rate limits that could never let a request through', () => {
    const pages = shipped();
    pages.tables = { pageSize: 500, maxPageSize: 100 };
    refuses(pages, ['tables.pageSize', 'maxPageSize']);
    const never = shipped();
    never.rateLimit = { tokenRequests: { perSecond: 0 }, tableCalls: { burst: 0 } };
    refuses(never, ['rateLimit.tokenRequests.perSecond', 'rateLimit.tableCalls.burst']);
    const partial = shipped();
    partial.rateLimit = { tableCalls: { burst: 5 } };
    assert.deepEqual(loadConfigFile(writeConfig(partial)).rateLimit.tableCalls, { perSecond: 20, burst: 5 });
  });

  it('takes server.trustProxy as a boolean or a list of addresses and ranges, and refuses anything else', () => {
    const raw = shipped();
    raw.server.trustProxy = ['10.0.0.0/8', '::1', 'loopback'];
    assert.deepEqual(loadConfigFile(writeConfig(raw)).server.trustProxy, ['10.0.0.0/8', '::1', 'loopback']);
    for (const trustProxy of [['10.0.0.0/33'], ['proxy.example'], 2, []]) {
      raw.server.trustProxy = trustProxy;
      refuses(raw, ['server.trustProxy']);
    }
  });

  it('refuses a bind to a column that no token generator selects', () => {
    const raw = shipped();
    raw.events['order-updates'].bind = { recipientId: 'phone' };
    refuses(raw, ['events.order-updates.bind.recipientId']);
  });

  it('names the path of a bad field', () => {
    const raw = shipped();
    raw.websocket.maxPayload = 'abc';
    refuses(raw, ['websocket.maxPayload']);
    const outOfRange = shipped();
    outOfRange.server.port = 70000;
    refuses(outOfRange, ['server.port']);
  });

  it('defaults redis.routeBuckets to 4096, and refuses a count below 1', () => {
    const raw = shipped();
    raw.redis = { url: 'redis://127.0.0.1:6379' };
    assert.equal(loadConfigFile(writeConfig(raw)).redis?.routeBuckets, 4096);
    raw.redis.routeBuckets = 0;
    refuses(raw, ['redis.routeBuckets']);
  });

  it('defaults redis.connectedLeaseMs to 60 s or leaseMs if longer, and refuses one shorter than leaseMs', () => {
    const connectedLease = (redis: Record<string, unknown>) =>
      loadConfigFile(writeConfig({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379', ...redis } })).redis?.connectedLeaseMs;
    assert.equal(connectedLease({}), 60_000);
    assert.equal(connectedLease({ leaseMs: 90_000 }), 90_000);
    assert.equal(connectedLease({ leaseMs: 5000, connectedLeaseMs: 5000 }), 5000);
    refuses({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379', leaseMs: 20_000, connectedLeaseMs: 10_000 } }, ['redis.connectedLeaseMs', 'at least leaseMs']);
  });

  it('defaults redis.lostAfterMs to a quarter of leaseMs (at least 1 s) and lostCloseMs to leaseMs; refuses bad ones', () => {
    const redisOf = (redis: Record<string, unknown>) =>
      loadConfigFile(writeConfig({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379', ...redis } })).redis!;
    const lost = (redis: Record<string, unknown>) => [redisOf(redis).lostAfterMs, redisOf(redis).lostCloseMs];
    assert.deepEqual(lost({}), [2500, 10_000]);
    assert.deepEqual(lost({ leaseMs: 1000 }), [1000, 1000]);
    assert.deepEqual(lost({ leaseMs: 40_000 }), [10_000, 40_000]);
    assert.deepEqual(lost({ lostAfterMs: 800, lostCloseMs: 0 }), [800, 0]);
    for (const bad of [{ lostAfterMs: 50 }, { lostAfterMs: 1.5 }, { lostCloseMs: -1 }, { lostCloseMs: '10s' }]) {
      refuses({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379', ...bad } }, [`redis.${Object.keys(bad)[0]}`]);
    }
  });

  it('ingest: defaults filled (the dead-letter stream after the stream), Redis required, its apiUser configured', () => {
    const withIngest = (ingest: Record<string, unknown>, redis: Record<string, unknown> | undefined = { url: 'redis://127.0.0.1:6379' }) =>
      writeConfig({ ...shipped(), ...(redis ? { redis } : {}), ingest });
    const config = loadConfigFile(withIngest({ apiUser: 'bench' }));
    assert.deepEqual(config.ingest, {
      stream: 'herald:emits', group: 'herald', apiUser: 'bench', deadLetterStream: 'herald:emits:dead', deadLetterMaxLen: 10_000, batch: 100, blockMs: 1000, claimIdleMs: 10_000,
    });
    assert.equal(loadConfigFile(withIngest({ apiUser: 'bench', stream: '{app}:emits' })).ingest?.deadLetterStream, '{app}:emits:dead');
    refuses({ ...shipped(), ingest: { apiUser: 'bench' } }, ['ingest', 'set redis too']);
    refuses({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379' }, ingest: { apiUser: 'nobody' } }, ['ingest.apiUser', 'no API user nobody']);
    refuses({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379' }, ingest: {} }, ['ingest.apiUser']);
    refuses({ ...shipped(), redis: { url: 'redis://127.0.0.1:6379' }, ingest: { apiUser: 'bench', batch: 0 } }, ['ingest.batch']);
  });

  it('canary and status: defaults 5 s, 15 s and 2 s; integers in range taken, a timeout not past the interval and anything else refused', () => {
    const config = loadConfigFile(DEFAULT_CONFIG_FILE);
    assert.deepEqual([config.canary, config.status], [{ intervalMs: 5000, timeoutMs: 15_000 }, { intervalMs: 2000 }]);
    // Mostly plausible integers, so that valid combinations come up often; then anything a YAML file could hold.
    const value = fc.oneof(
      { arbitrary: fc.integer({ min: 50, max: 70_000 }), weight: 8 },
      fc.integer({ min: -10, max: 4_000_000 }),
      fc.double(),
      fc.string(),
      fc.constant(null),
    );
    const integerIn = (v: unknown, min: number, max: number): v is number => Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
    let valids = 0;
    fc.assert(
      fc.property(value, value, value, (intervalMs, timeoutMs, statusMs) => {
        const raw = { ...shipped(), canary: { intervalMs, timeoutMs }, status: { intervalMs: statusMs } };
        const parsed = configSchema.safeParse(raw);
        const valid =
          integerIn(intervalMs, 100, 3_600_000) && integerIn(timeoutMs, 100, 3_600_000) && timeoutMs > intervalMs && integerIn(statusMs, 100, 60_000);
        assert.equal(parsed.success, valid, JSON.stringify({ intervalMs, timeoutMs, statusMs }));
        if (parsed.success) assert.deepEqual([parsed.data.canary, parsed.data.status], [{ intervalMs, timeoutMs }, { intervalMs: statusMs }]);
        if (valid) valids++;
      }),
      { numRuns: 300 },
    );
    assert.ok(valids > 10, `only ${valids} valid combinations were tried`);
    refuses({ ...shipped(), canary: { intervalMs: 5000, timeoutMs: 5000 } }, ['canary.timeoutMs', 'longer than intervalMs']);
  });

  it('refuses a node id (HERALD_NODE_ID) holding the "," that Redis joins node ids with, or an empty one', async () => {
    const config = loadConfigFile(DEFAULT_CONFIG_FILE);
    for (const nodeId of ['node,1', '']) {
      await assert.rejects(Gateway.create(config, { nodeId, dataSources: new Map() }), (error: unknown) => {
        assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
        assert.match(error.message, /HERALD_NODE_ID: .*, got "/);
        return true;
      });
    }
  });

  it('refuses unknown keys, naming them', () => {
    const raw = shipped();
    raw.colour = 'blue';
    raw.websocket.frameLimit = 10;
    refuses(raw, ['colour', 'frameLimit']);
  });

  it('refuses auth without a secret or a key pair', () => {
    const raw = shipped();
    raw.auth = { privateKey: 'only half of a pair' };
    refuses(raw, ['auth']);
  });

  it('refuses a token generator naming an undeclared collection', () => {
    const raw = shipped();
    raw.tokenGenerators.customers.collection = 'clients';
    refuses(raw, ['tokenGenerators.customers', 'mongodb/am_bench/clients']);
  });

  it('refuses invalid YAML and a missing file', () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, 'userPath: [unclosed');
    assert.throws(() => loadConfigFile(file), ConfigError);
    assert.throws(() => loadConfigFile(join(dir, 'absent.yaml')), ConfigError);
  });

  it('in production, refuses the shipped secrets, naming each', () => {
    assert.throws(
      () => loadConfigFile(DEFAULT_CONFIG_FILE, { production: true }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message.includes('auth.secret') &&
        error.message.includes('apiUsers.bench.password'),
    );
    // A new secret alone is not enough while the shipped password remains.
    refuses(shipped(), ['apiUsers.bench.password'], { production: true, secret: 'a-production-secret-0123' });
  });

  it('in production, loads once the secret and passwords are new', () => {
    const raw = shipped();
    raw.apiUsers.bench.password = 'a-production-password';
    const file = writeConfig(raw);
    const config = loadConfigFile(file, { production: true, secret: 'a-production-secret-0123' });
    assert.equal(config.auth.secret, 'a-production-secret-0123');
    raw.auth.secret = 'another-production-secret';
    assert.equal(loadConfigFile(writeConfig(raw), { production: true }).auth.secret, 'another-production-secret');
  });

  it('applies overrides over the file', () => {
    const config = loadConfigFile(DEFAULT_CONFIG_FILE, {
      port: 0,
      host: '127.0.0.1',
      reusePort: true,
      secret: 'an-overriding-secret-0123',
      mongodbUrl: 'mongodb://db.example:27017',
    });
    assert.equal(config.server.port, 0);
    assert.equal(config.server.host, '127.0.0.1');
    assert.equal(config.server.reusePort, true);
    assert.equal(config.auth.secret, 'an-overriding-secret-0123');
    assert.equal(config.instances.mongodb?.url, 'mongodb://db.example:27017');
  });

  it('resolves relative seed paths against the config file\'s directory', () => {
    const raw = shipped();
    raw.instances.mongodb.databases.am_bench.collections.customers.seed = 'data/people.json';
    raw.instances.other = { databases: { d: { collections: { absolute: { seed: '/srv/rows.json' }, bare: {} } } } };
    const config = loadConfigFile(writeConfig(raw));
    const seeds = (instance: string, database: string) => config.instances[instance]?.databases[database]?.collections;
    assert.equal(seeds('mongodb', 'am_bench')?.customers?.seed, join(dir, 'data/people.json'));
    assert.equal(seeds('other', 'd')?.absolute?.seed, '/srv/rows.json');
    assert.equal(seeds('other', 'd')?.bare?.seed, undefined);
  });

  it('emit: its defaults, and any maxBacklogBytes / whenBacklogged / idempotencyWindowSeconds / maxBatchEvents / maxLagMs taken exactly when valid, else refused naming the field', () => {
    const { emit, websocket } = loadConfigFile(DEFAULT_CONFIG_FILE);
    assert.deepEqual(emit, { maxBacklogBytes: 32 * 1024 * 1024, whenBacklogged: 'refuse', maxLagMs: 250, idempotencyWindowSeconds: 300, maxBatchEvents: 1000 });
    assert.equal(websocket.maxLagMs, 5000);
    const bytes = fc.oneof(fc.integer({ min: -1, max: 1 << 30 }), fc.double(), fc.constantFrom(65536, 131072, '1048576', null));
    const mode = fc.oneof(fc.constantFrom('refuse', 'wait'), fc.string());
    const count = fc.oneof(fc.integer({ min: -1, max: 200_000 }), fc.double(), fc.constantFrom(1, 86_400, 100_000, '5'));
    const lag = fc.oneof(fc.integer({ min: -1, max: 20_000 }), fc.double(), fc.constantFrom(10, 100, 4999, 5000, '250'));
    const inRange = (value: unknown, min: number, max: number) => Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max;
    fc.assert(
      fc.property(bytes, fc.integer({ min: 1024, max: 1 << 26 }), mode, count, count, lag, lag, (maxBacklogBytes, maxBufferedBytes, whenBacklogged, idempotencyWindowSeconds, maxBatchEvents, maxLagMs, maxConnectionLagMs) => {
        const raw = shipped();
        raw.emit = { maxBacklogBytes, whenBacklogged, idempotencyWindowSeconds, maxBatchEvents, maxLagMs };
        raw.websocket = { maxBufferedBytes, maxLagMs: maxConnectionLagMs };
        const valid = Number.isSafeInteger(maxBacklogBytes) && (maxBacklogBytes as number) >= 65536
          && (maxBacklogBytes as number) >= 2 * maxBufferedBytes && (whenBacklogged === 'refuse' || whenBacklogged === 'wait')
          && inRange(idempotencyWindowSeconds, 1, 86_400) && inRange(maxBatchEvents, 1, 100_000)
          && inRange(maxLagMs, 10, Infinity) && inRange(maxConnectionLagMs, 100, Infinity) && (maxLagMs as number) < (maxConnectionLagMs as number);
        try {
          const config = parseConfig(raw, dir);
          assert.ok(valid, `took ${JSON.stringify(raw.emit)} with maxBufferedBytes ${maxBufferedBytes}`);
          assert.deepEqual(config.emit, { maxBacklogBytes, whenBacklogged, idempotencyWindowSeconds, maxBatchEvents, maxLagMs });
          assert.equal(config.websocket.maxLagMs, maxConnectionLagMs);
        } catch (error) {
          assert.ok(error instanceof ConfigError, String(error));
          assert.ok(!valid, error.message);
          assert.match(error.message, /emit\.(maxBacklogBytes|whenBacklogged|idempotencyWindowSeconds|maxBatchEvents|maxLagMs)|websocket\.maxLagMs/);
        }
      }),
      { numRuns: Number(process.env.HERALD_FUZZ_RUNS ?? 100) },
    );
  });
});
