/**
 * Issue 35 on a gateway node of its own (one redis-server, the default config with the emit stream on), each figure
 * beside the plain emit measured on the same node in the same run:
 *
 *   idempotent  unpaced one-person notify (1,000 listeners, one route each, -c 100) plain and with an Idempotency-Key
 *               per emit (wsload notify --idempotent), in turn, the order alternating from round to round:
 *               emit_idempotent_per_s and its ratio to the plain run beside it, emit_idempotent_vs_plain.
 *   batch       the same with 100 emits a call (wsload notify --batch 100, -c 10): batch_100_notifications_per_s and
 *               its ratio, batch_100_vs_plain.
 *   key bytes   Redis used_memory before and after 20,000 emits, each with a new key, to a route nobody holds:
 *               idempotency_redis_bytes_per_key.
 *   ingest      1,000 listeners (wsload listen, one route each); 50,000 entries XADDed at once, each naming the next
 *               listener: from the first XADD to the last entry acknowledged, ingest_per_s and its ratio to the plain
 *               notify rate, ingest_vs_plain; then 1,000 entries a second for 10 s, each carrying when it was added:
 *               the listeners' delivery p99, ingest_lag_p99_ms (at 1,000/s).
 *
 * Ports 25140-25149. Logs in the run directory.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { parse, stringify } from 'yaml';
import { HttpConnection, jsonPostHead, type RunReport } from '@herald/loadgen';
import type { BenchContext, Target } from './context.ts';
import { startGateway } from './failover.ts';
import { median, ROOT, sleep, startLoad, startRedis, stop, waitFor } from './procs.ts';

const PORT = 25140;
const REDIS_PORT = 25141;
const STREAM = 'herald:emits';
const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
const DEFAULT_CONFIG = `${ROOT}packages/gateway/config/default.yaml`;
const LISTENERS = 1000;

/** A config file's top level, as a scenario changes it. */
export interface ConfigDocument { events: Record<string, object>; instances?: Record<string, object>; [key: string]: unknown }

/**
 * The default config changed by `change`, its relative paths made absolute (the copy lives in the run directory, as
 * `<name>.yaml`): a scenario's own config without a copy of the default one in the repository.
 */
export function defaultConfigWith(runDir: string, name: string, change: (raw: ConfigDocument) => void): string {
  const raw = parse(readFileSync(DEFAULT_CONFIG, 'utf8')) as ConfigDocument;
  const base = dirname(DEFAULT_CONFIG);
  for (const event of Object.values(raw.events) as Array<{ canConnect?: { file?: string } }>) {
    if (event.canConnect?.file) event.canConnect.file = resolve(base, event.canConnect.file);
  }
  for (const instance of Object.values(raw.instances ?? {}) as Array<{ databases: Record<string, { collections: Record<string, { seed?: string }> }> }>) {
    for (const database of Object.values(instance.databases)) for (const collection of Object.values(database.collections)) if (collection.seed) collection.seed = resolve(base, collection.seed);
  }
  change(raw);
  const file = `${runDir}/${name}.yaml`;
  writeFileSync(file, stringify(raw));
  return file;
}

export async function exactlyOnceScenario(ctx: BenchContext): Promise<void> {
  const { runDir } = ctx.options;
  const redisProc = await startRedis('exactly-once-redis', REDIS_PORT, `${runDir}/exactly-once-redis.log`);
  const redis = new Redis(`redis://127.0.0.1:${REDIS_PORT}`);
  const node = await startGateway({ runDir, sampler: ctx.sampler }, 'exactly-once', PORT, { REDIS_URL: `redis://127.0.0.1:${REDIS_PORT}`, HERALD_CONFIG: defaultConfigWith(runDir, 'exactly-once', (raw) => (raw.ingest = { apiUser: 'bench' })) });
  const t: Target = { name: 'gateway', port: PORT, redisPort: REDIS_PORT };
  try {
    const plain = await throughput(ctx, t);
    await keyBytes(ctx, redis);
    await ingest(ctx, t, redis, plain);
  } finally {
    await stop(node);
    redis.disconnect();
    await stop(redisProc);
  }
}

/** Plain, idempotent and batched unpaced notify in turn, rounds alternating; answers the plain rate's median. */
async function throughput(ctx: BenchContext, t: Target): Promise<number> {
  const { notifyS, notifyWarmupS, quick } = ctx.options;
  const run = async (label: string, extra: string[], connections: number): Promise<number> => {
    ctx.sampler.phase = `exactly-once ${label}`;
    const args = ['notify', `http://127.0.0.1:${t.port}`, '--clients', String(LISTENERS), '-c', String(connections), '-w', String(notifyWarmupS), '-d', String(notifyS), '--register', 'announcements', ...extra];
    const out = await ctx.runLoad(t, args, notifyS + notifyWarmupS + 120);
    ctx.results.runs[`exactly-once ${label}`] = out;
    return out.rates?.notificationsPerSecond ?? NaN;
  };
  const rates = { plain: [] as number[], idempotent: [] as number[], batch: [] as number[] };
  const ratios = { idempotent: [] as number[], batch: [] as number[] };
  for (let round = 1; round <= (quick ? 1 : 3); round++) {
    const kinds: Array<[keyof typeof rates, string[], number]> = [['plain', [], 100], ['idempotent', ['--idempotent'], 100], ['batch', ['--batch', '100'], 10]];
    if (round % 2 === 0) kinds.reverse();
    const got: Partial<Record<keyof typeof rates, number>> = {};
    for (const [kind, extra, connections] of kinds) got[kind] = await run(`${kind} ${round}`, extra, connections);
    for (const kind of Object.keys(rates) as Array<keyof typeof rates>) rates[kind].push(got[kind]!);
    ratios.idempotent.push(got.idempotent! / got.plain!);
    ratios.batch.push(got.batch! / got.plain!);
  }
  ctx.record('exactly_once_plain_per_s', median(rates.plain));
  ctx.record('emit_idempotent_per_s', median(rates.idempotent));
  ctx.record('emit_idempotent_vs_plain', median(ratios.idempotent));
  ctx.record('batch_100_notifications_per_s', median(rates.batch));
  ctx.record('batch_100_vs_plain', median(ratios.batch));
  return median(rates.plain) ?? NaN;
}

/** Redis bytes of one remembered key: emits with a new key each, to a route nobody holds. */
async function keyBytes(ctx: BenchContext, redis: Redis): Promise<void> {
  ctx.sampler.phase = 'exactly-once key bytes';
  const keys = ctx.options.quick ? 5000 : 20_000;
  const usedMemory = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
  const token = await apiToken();
  const url = new URL(`http://127.0.0.1:${PORT}`);
  await sleep(500);
  const before = await usedMemory();
  let next = 0;
  const lane = async (): Promise<void> => {
    const connection = new HttpConnection({ host: url.hostname, port: PORT, timeoutMs: 10_000 });
    try {
      for (let i = next++; i < keys; i = next++) {
        const head = jsonPostHead(url, '/api/system-api/bench/emit-event-ws', { 'x-am-authorization': token, 'idempotency-key': `bytes-${process.pid}-${i}` });
        const body = `{"name":"announcements","eventData":{"recipientId":"nobody-${i}"}}`;
        const status = await new Promise<number>((done) => connection.send(`${head}${body.length}\r\n\r\n${body}`, (answer) => done(answer)));
        if (status !== 200) throw new Error(`a keyed emit was answered ${status}`);
      }
    } finally {
      connection.close();
    }
  };
  await Promise.all(Array.from({ length: 20 }, lane));
  await sleep(500);
  const after = await usedMemory();
  ctx.results.runs['exactly-once key bytes'] = { keys, usedMemoryBefore: before, usedMemoryAfter: after };
  ctx.record('idempotency_redis_bytes_per_key', (after - before) / keys);
}

async function apiToken(): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${PORT}/api/system-api/bench/token`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } }),
  });
  return ((await response.json()) as { data: { token: string } }).data.token;
}

/** 1,000 listeners held while `feed` XADDs; answers their report (its delivery latency). */
async function listening(ctx: BenchContext, label: string, holdS: number, feed: () => Promise<void>): Promise<RunReport> {
  const jsonFile = `${ctx.options.runDir}/exactly-once-${label}.json`;
  const args = ['listen', `ws://127.0.0.1:${PORT}`, '--clients', String(LISTENERS), '--register', 'announcements', '--per-client', '--hold', String(holdS), '--quiet', '--json', jsonFile];
  ctx.results.commands.push(`node packages/loadgen/src/cli.ts ${args.slice(0, -3).join(' ')}`);
  const { proc, done } = startLoad<RunReport>(`load-exactly-once-${label}`, WSLOAD, args, { logFile: `${ctx.options.runDir}/exactly-once-${label}.log`, timeoutS: holdS + 120, jsonFile });
  ctx.sampler.watch(`load-exactly-once-${label}`, proc.child.pid!);
  await waitFor('the listeners', async () => Number(/^herald_connections (\S+)/m.exec(await (await fetch(`http://127.0.0.1:${PORT}/metrics`)).text())?.[1]) >= LISTENERS, 60_000, 200, proc);
  await feed();
  return done;
}

/** Whether every entry added so far is acknowledged: none pending, none undelivered. */
async function drained(redis: Redis): Promise<boolean> {
  const [pending] = (await redis.xpending(STREAM, 'herald')) as [number];
  const groups = (await redis.xinfo('GROUPS', STREAM)) as Array<Array<string | number>>;
  const lag = Number(groups[0]![groups[0]!.indexOf('lag') + 1]);
  return Number(pending) === 0 && lag === 0;
}

async function ingest(ctx: BenchContext, _t: Target, redis: Redis, plainPerS: number): Promise<void> {
  const entries = ctx.options.quick ? 20_000 : 50_000;
  const entry = (i: number): string[] => ['name', 'announcements', 'eventData', `{"recipientId":"${i % LISTENERS}","sentAt":${(performance.timeOrigin + performance.now()).toFixed(3)}}`];
  ctx.sampler.phase = 'exactly-once ingest burst';
  let perS = NaN;
  await listening(ctx, 'ingest-burst', ctx.options.quick ? 20 : 40, async () => {
    const start = performance.now();
    for (let from = 0; from < entries; from += 1000) {
      const pipeline = redis.pipeline();
      for (let i = from; i < Math.min(entries, from + 1000); i++) pipeline.xadd(STREAM, '*', ...entry(i));
      await pipeline.exec();
    }
    await waitFor('every entry acknowledged', () => drained(redis), 120_000, 20);
    perS = entries / ((performance.now() - start) / 1000);
  });
  ctx.record('ingest_per_s', perS);
  ctx.record('ingest_vs_plain', perS / plainPerS);
  ctx.sampler.phase = 'exactly-once ingest paced';
  const seconds = ctx.options.quick ? 5 : 10;
  const paced = await listening(ctx, 'ingest-paced', seconds + 5, async () => {
    const start = performance.now();
    for (let i = 0; i < seconds * 1000; i++) {
      const wait = start + i - performance.now();
      if (wait > 1) await sleep(wait);
      await redis.xadd(STREAM, '*', ...entry(i));
    }
  });
  ctx.results.runs['exactly-once ingest paced'] = paced;
  ctx.record('ingest_lag_p99_ms', paced.latency.delivery?.p99);
}
