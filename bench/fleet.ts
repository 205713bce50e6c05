#!/usr/bin/env node
/**
 * Issue 36: the scenario of AnyCable's broker benchmark on a fleet (make bench-fleet; docs/benchmarks/fleet.md). One
 * redis-server, three gateway nodes and HAProxy in front of them as `make cluster` configures it, all on this machine;
 * `wsload channels` through HAProxy: 1,500 clients on 5 channels (routes of an event with history, added to the
 * default config), half of them senders, each client fetching its channel's last 80 notifications when it joins. The senders' rate goes
 * level by level (a multiple of 0.7 broadcasts a second each); every level is run `--rounds` times on the same fleet,
 * each figure the median of its rounds, and every process's CPU is sampled over each measured window.
 *
 *   node bench/fleet.ts [--levels 0.1,0.2,0.5,1,10] [--rounds 2] [--duration 30] [--record]
 *
 * Free ports, found at start. Logs and each wsload report in bench/.run/fleet/, and the run's figures and CPU shares
 * in bench/.run/fleet/fleet.json; with --record, the figures also go into docs/benchmarks/results.json (fleet_* keys,
 * added, no other figure touched). The run is bounded (each wsload is killed past its own time) and stops every
 * process it started, also on failure and on SIGINT or SIGTERM.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { parseArgs } from 'node:util';
import type { RunReport } from '@herald/loadgen';
import { freePort } from '../packages/gateway/test/support/redis.ts';
import { defaultConfigWith } from './exactly-once.ts';
import { startBalancer, startGateway, type FleetLayout } from './failover.ts';
import { recordFigures, type FleetLevel } from './fleet-figures.ts';
import { median, ROOT, Sampler, startLoad, startRedis, stopAll, type Sample } from './procs.ts';

const WSLOAD = `${ROOT}packages/loadgen/src/cli.ts`;
const RUN_DIR = `${ROOT}bench/.run/fleet`;
const NODES = 3;
const CLIENTS = 1500;
/** The reference's per-sender rate; a level is a multiple of it. */
const SEND_RATE = 0.7;
const CONNECT_RATE = 500;
const WARMUP_S = 5;
const GRACE_S = 3;
/**
 * The channels' event: a history deep enough that a client joining `HISTORY` behind the latest position its load
 * process has seen is replayed, not capped, while the notifications it has not yet read pile up at 10× (default.yaml's
 * announcements-kept keeps 100).
 */
const EVENT = 'fleet-channels';
const HISTORY_SIZE = 2000;
const HISTORY = 80;

interface FleetOptions { levels: number[]; rounds: number; durationS: number; record: boolean }

function parseOptions(argv: readonly string[]): FleetOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      levels: { type: 'string', default: '0.1,0.2,0.5,1,10' },
      rounds: { type: 'string', default: '2' },
      duration: { type: 'string', default: '30' },
      record: { type: 'boolean', default: false },
    },
  });
  const levels = values.levels.split(',').map(Number);
  if (levels.some((level) => !(level > 0))) throw new Error(`--levels must be positive multiples, got ${values.levels}`);
  return { levels, rounds: Math.max(1, Number(values.rounds)), durationS: Math.max(1, Number(values.duration)), record: values.record };
}

/** HAProxy's port and the next NODES ports all free (the layout `make cluster` renders), and a stats port. */
async function freeLayout(): Promise<FleetLayout> {
  for (;;) {
    const port = await freePort();
    const taken = await Promise.all(Array.from({ length: NODES }, (_, i) => isTaken(port + 1 + i)));
    if (!taken.some(Boolean) && port + NODES < 65536) return { port, nodes: NODES, statsPort: await freePort() };
  }
}

function isTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer().once('error', () => resolve(true));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(false)));
  });
}

/** Redis, the nodes and HAProxy, each watched by the sampler. */
async function startFleet(layout: FleetLayout, sampler: Sampler): Promise<void> {
  const redisPort = await freePort();
  const redis = await startRedis('redis', redisPort, `${RUN_DIR}/redis.log`);
  sampler.watch('redis', redis.child.pid!);
  const launch = { runDir: RUN_DIR, sampler };
  const config = defaultConfigWith(RUN_DIR, 'fleet', (raw) => {
    raw.events[EVENT] = { groups: { register: ['bench'], emit: ['bench'] }, history: { size: HISTORY_SIZE, ttlSeconds: 600 } };
  });
  const env = { REDIS_URL: `redis://127.0.0.1:${redisPort}`, HERALD_CONFIG: config };
  await Promise.all(Array.from({ length: NODES }, (_, i) => startGateway(launch, `node-${i + 1}`, layout.port + 1 + i, { ...env, HERALD_NODE_ID: `fleet-node-${i + 1}` })));
  const balancers = await startBalancer(RUN_DIR, layout, CLIENTS, 'fleet');
  balancers.forEach((proc, k) => sampler.watch(`haproxy-${k + 1}`, proc.child.pid!));
}

/** One level's wsload run, its report, and the mean CPU of each process over its measured window. */
async function runLevel(layout: FleetLayout, sampler: Sampler, level: number, round: number, durationS: number, commands: string[]): Promise<FleetLevel> {
  const args = ['channels', `http://127.0.0.1:${layout.port}`, '--clients', String(CLIENTS), '--send-rate', String(SEND_RATE * level),
    '--connect-rate', String(CONNECT_RATE), '--register', EVENT, '--history', String(HISTORY), '-w', String(WARMUP_S), '-d', String(durationS), '--grace', String(GRACE_S)];
  commands.push(`node packages/loadgen/src/cli.ts ${args.join(' ')}`);
  const name = `wsload-${level}x-${round}`;
  const jsonFile = `${RUN_DIR}/${name}.json`;
  const timeoutS = CLIENTS / CONNECT_RATE + WARMUP_S + durationS + GRACE_S + 90;
  const downBefore = nodesTakenOut();
  const { proc, done } = startLoad<RunReport>(name, WSLOAD, [...args, '--quiet', '--json', jsonFile], { logFile: `${RUN_DIR}/${name}.log`, timeoutS, jsonFile });
  sampler.watch('wsload', proc.child.pid!);
  const report = await done;
  sampler.unwatch('wsload');
  const { from, to } = report.window!;
  const cpu = meanCpu(sampler.samples.filter((sample) => sample.t > from && sample.t <= to));
  return { level, round, report, cpu, nodesTakenOut: nodesTakenOut() - downBefore };
}

/**
 * How many times HAProxy has taken a node out so far (its health check, /readyz, unanswered within `timeout check`,
 * 1 s): a node too busy to answer it in time gets no new connection or emit until its next good check.
 */
function nodesTakenOut(): number {
  const logs = readdirSync(RUN_DIR).filter((file) => /^haproxy-\d+\.log$/.test(file));
  return logs.reduce((sum, file) => sum + (readFileSync(`${RUN_DIR}/${file}`, 'utf8').match(/ is DOWN/g)?.length ?? 0), 0);
}

/** Each process's mean CPU over `samples` (100 = one core), the whole machine's, and what other processes took of it. */
function meanCpu(samples: Sample[]): Record<string, number> {
  const names = new Set(samples.flatMap((sample) => Object.keys(sample.procs)));
  const mean = (values: number[]): number => Math.round(values.reduce((a, b) => a + b, 0) / Math.max(1, values.length));
  const cpu: Record<string, number> = Object.fromEntries([...names].map((name) => [name, mean(samples.flatMap((s) => s.procs[name]?.cpuPct ?? []))]));
  const ours = Object.values(cpu).reduce((a, b) => a + b, 0);
  cpu.machine = mean(samples.flatMap((s) => s.machine?.cpuPct ?? []));
  // What the rest of the machine ran meanwhile (it is shared): the machine's busy time that none of these had.
  cpu.others = Math.max(0, cpu.machine - ours);
  cpu.steal = mean(samples.flatMap((s) => s.machine?.stealPct ?? []));
  return cpu;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  // Each run's logs are its own: the HAProxy log is read for the nodes it took out.
  rmSync(RUN_DIR, { recursive: true, force: true });
  mkdirSync(RUN_DIR, { recursive: true });
  const sampler = new Sampler(async () => undefined);
  const levels: FleetLevel[] = [];
  const commands: string[] = [];
  const startedAt = new Date().toISOString();
  try {
    const layout = await freeLayout();
    await startFleet(layout, sampler);
    for (let round = 1; round <= options.rounds; round++) {
      for (const level of options.levels) {
        console.error(`bench-fleet: ${level}× (${(SEND_RATE * level).toFixed(2)} broadcasts/s a sender), round ${round}`);
        levels.push(await runLevel(layout, sampler, level, round, options.durationS, commands));
      }
    }
  } finally {
    sampler.close();
    await stopAll();
  }
  const figures = recordFigures(levels, median, options.record);
  writeFileSync(`${RUN_DIR}/fleet.json`, `${JSON.stringify({ startedAt, commands: [...new Set(commands)], figures, levels }, null, 2)}\n`);
  console.error(`bench-fleet: figures ${JSON.stringify(figures, null, 2)}`);
}

const stopOnSignal = (): void => void stopAll().finally(() => process.exit(130));
process.once('SIGINT', stopOnSignal);
process.once('SIGTERM', stopOnSignal);
await main();
