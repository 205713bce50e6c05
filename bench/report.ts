/** docs/benchmarks/README.md, memory.svg, latency.svg and reconnect.svg from a run's results (the charts: bench/chart.ts). */
import { execFileSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { writeFileSync } from 'node:fs';
import { lineChart } from './chart.ts';
import { parseBenchOptions } from './options.ts';
import { GATEWAY_NODE_ARGS } from './procs.ts';
import {
  clientsTable, codeTable, connectedTable, costTable, cpuTable, exactlyOnceTable, failoverTable, FIGURES, figuresTable, fleetTable, floorTable, fmt, historyTable, idleTable, meets,
  memoryTable,
} from './report-tables.ts';
import type { LatencySummary } from '@herald/loadgen';
import type { Level, LoadReport, Results } from './results.ts';

/** How the runs measure, written by hand; the README links its sections. */
const METHODOLOGY = 'methodology.md';

/** How many runs named `run` and a number results.json holds: the rounds of that step. */
const roundsOf = (r: Results, run: string): number =>
  Object.keys(r.runs).filter((name) => name.startsWith(`${run} `) && /^\d+$/.test(name.slice(run.length + 1))).length;

/** Names of the clients-back series in the chart. */
const SERIES_NAMES: Record<string, string> = {
  restart: 'restart, new process first',
  restart_cold: 'restart, stop then start',
  kill: 'kill -9, 1 of 3',
};

/** Each run's 18k broadcasts' last one told (wsload's per-emit tallies), or nothing for a run without them. */
function broadcastsLine(r: Results): string {
  const runs = Object.entries(r.runs)
    .filter(([key]) => /^gateway broadcast-18k \d+$/.test(key))
    .map(([, run]) => (run as LoadReport).perEmit?.each ?? [])
    .filter((each) => each.length > 0);
  if (runs.length === 0) return '';
  const told = [...new Set(runs.flat().map((broadcast) => broadcast.told.toLocaleString('en-US')))].join(' or ');
  const lasts = runs.map((each, i) => `run ${i + 1}: ${each.map(({ lastMs }) => Math.round(lastMs).toLocaleString('en-US')).join(', ')}`).join('; ');
  return `\nOne broadcast a second to every client (${told} told by each), ${runs[0]!.length} of them ${runs.length === 1 ? 'in one run' : `in each of ${runs.length} runs`}: the last one
told ${lasts} ms, in the order sent. Over the runs (medians), the median broadcast ${fmt(r.figures.broadcast_18k_last_p50_ms)} ms, and
the slowest of a run (\`broadcast_18k_last_ms\`, the figure) ${fmt(r.figures.broadcast_18k_last_ms)} ms.
`;
}

/** Delivery latency by percentile: the paced runs of every target, and the gateway's one-person emits during the 18k broadcast. */
function latencySeries(r: Results): Array<{ name: string; points: Array<[number, number]> }> {
  const delivery = (key: string): LatencySummary | undefined => (r.runs[key] as LoadReport | undefined)?.latency?.delivery;
  const wanted: Array<[string, string]> = [
    ['gateway notify-paced 1', 'gateway, 1,000/s'], ['socketio notify-paced 1', 'Socket.IO, 1,000/s'], ['bare notify-paced 1', 'bare ws, 1,000/s'],
    ['gateway every-client notify-paced 1', 'gateway, 1,000/s, 18k connected'], ['gateway person-during-broadcast 1', 'gateway, during 18k broadcasts'],
  ];
  return wanted.flatMap(([key, name]) => {
    const d = delivery(key);
    const points = PERCENTILES.flatMap(([, field], i): Array<[number, number]> => (d?.[field] === undefined ? [] : [[i, d[field]]]));
    return points.length > 0 ? [{ name, points }] : [];
  });
}
const PERCENTILES: Array<[string, keyof LatencySummary]> = [['p50', 'p50'], ['p90', 'p90'], ['p99', 'p99'], ['p99.9', 'p99_9'], ['max', 'max']];

function machine(): string {
  const redis = execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).split(' ')[2] ?? '?';
  return `${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(1)} GB, Node.js ${process.version}, redis-server ${redis}, linux; loopback only`;
}

/** Per part for the gateway (RSS, heap, Redis, the kernel's slab in its run), RSS alone for the peers. */
function memorySeries(r: Results): Array<{ name: string; points: Array<[number, number]> }> {
  const line = (levels: Level[], value: (l: Level) => number | undefined): Array<[number, number]> =>
    levels.flatMap((l): Array<[number, number]> => (value(l) === undefined ? [] : [[l.clients, value(l)!]]));
  const gateway = r.memory.gateway ?? [];
  const parts = [
    { name: 'gateway RSS', points: line(gateway, (l) => l.rssKb / 1024) },
    { name: 'gateway heap', points: line(gateway, (l) => l.heapUsed && l.heapUsed / 1048576) },
    { name: 'Redis (gateway)', points: line(gateway, (l) => l.redisUsedMemory / 1048576) },
    { name: 'kernel slab, both ends', points: line(gateway, (l) => l.slabKb && l.slabKb / 1024) },
    ...Object.entries(r.memory).filter(([name]) => name !== 'gateway').map(([name, levels]) => ({ name: `${name} RSS`, points: line(levels, (l) => l.rssKb / 1024) })),
  ];
  return parts.filter((part) => part.points.length > 0);
}

/** Each missed figure, linked to why (methodology.md has an entry per figure analysed). */
function missedSection(r: Results): string {
  const missed = FIGURES.filter(([name, , op, target]) => r.figures[name] !== undefined && !meets(r.figures[name], op, target));
  if (missed.length === 0) return '';
  const lines = missed.map(([name]) => `- [\`${name}\`](${METHODOLOGY}#${name})`);
  return `\n### Where a figure is missed\n\nWhy, with the profile that shows it: [${METHODOLOGY}](${METHODOLOGY}#where-a-figure-is-missed-and-why).\n\n${lines.join('\n')}\n`;
}

/** memory.svg, latency.svg and reconnect.svg; whether the run has the failover scenarios' series. */
function writeCharts(r: Results, dir: string): boolean {
  writeFileSync(`${dir}/memory.svg`, lineChart('Memory as clients grow (each with its own subscription)', 'clients', 'MB', memorySeries(r)));
  const latency = latencySeries(r);
  if (latency.length > 0) {
    writeFileSync(`${dir}/latency.svg`, lineChart('Delivery latency, one person each (emit written → client read)', 'percentile', 'ms (log)', latency,
      { xTicks: PERCENTILES.map(([label], i) => [i, label]), logY: true }));
  }
  const back = Object.entries(r.reconnect ?? {}).map(([name, run]) => ({ name: SERIES_NAMES[name] ?? name, points: run.series }));
  if (back.length > 0) writeFileSync(`${dir}/reconnect.svg`, lineChart('Clients back over time', 's since the first drop', 'clients connected and registered', back));
  return back.length > 0;
}

const how = (anchor: string, text = 'how'): string => `[${text}](${METHODOLOGY}#${anchor})`;
const count = (n: number): string => n.toLocaleString('en-US');

function headSection(r: Results): string {
  return `# Benchmarks

Produced by \`${r.quick ? 'make bench-quick' : 'make bench'}\` (\`bench/run.ts\`) on ${r.startedAt}. How each scenario measures, and
why: [${METHODOLOGY}](${METHODOLOGY}). Every figure, with each load generator's report, is in [results.json](results.json);
the load reports in full and a sample a second of each process's RSS and CPU, the machine's CPU and Redis
\`used_memory\`, in [samples.json.gz](samples.json.gz). Backpressure on emits, and wsload's raw clients against clients on the \`ws\`
library, measured by hand beside these runs: [clients.md](clients.md).

**Read with care** (${how('read-with-care', 'why')}): the load generators run on the same ${cpus().length} cores as the servers they
measure, so every rate here is a floor set partly by the client side, and rates swing by up to 2× from one run to the
next. The \`_vs_socketio\` ratios are not the ratios of the rates in the table but the medians of
${roundsOf(r, 'gateway pairs notify-person')} round(s) of side-by-side pairs (\`<target> pairs <step> N\` in results.json; ${how('side-by-side-pairs')}).
`;
}

function figuresSection(r: Results): string {
  const missing = FIGURES.map(([n]) => n).filter((n) => r.figures[n] === undefined);
  // As memory.ts takes them: from 6,000 clients, or from the first level with clients when 6,000 is the last.
  const from = r.levels.includes(6000) && r.levels.at(-1) !== 6000 ? 6000 : r.levels.find((clients) => clients > 0);
  const slope = from === undefined ? '–' : `${count(from)} → ${count(r.levels.at(-1)!)}`;
  const floors = floorTable(r);
  return `
## Figures

${figuresTable(r)}

Memory slopes: ${slope} clients${r.quick ? '' : ', each the median of two passes on fresh servers'} (${how('memory')}).
${floors ? `\n### This machine's floors\n\nServers that do no protocol work, on the same cores (${how('this-machines-floors')}).\n\n${floors}\n` : ''}${missedSection(r)}${missing.length ? `\nNot yet measured in this run: ${missing.map((n) => `\`${n}\``).join(', ')}.\n` : ''}${r.errors.length ? `\nErrors in this run:\n\n${r.errors.map((e) => `- ${e}`).join('\n')}\n` : ''}
## Subscribing with can-connect code

Medians over ${roundsOf(r, 'gateway can-connect checked-token')} round(s) of the rates and of each rate's ratio to a run without code beside it
(${how('subscribing-with-can-connect-code')}).

${codeTable(r)}

## Missed notifications recovered (history and resume)

\`restart-gap\`, \`kill-gap\`, and \`history\` with ${roundsOf(r, 'gateway history kept')} round(s) of alternated pairs (${how('missed-notifications-recovered-history-and-resume')}).

${historyTable(r)}

## Exactly once at the back end's door (idempotency keys, batches, the emit stream)

\`exactly-once\`, on a node of its own with the emit stream on, ${roundsOf(r, 'exactly-once plain')} round(s) of alternated runs (${how('exactly-once-at-the-back-ends-door')}).

${exactlyOnceTable(r)}

## AnyCable's broker benchmark scenario on a fleet

\`make bench-fleet\` (bench/fleet.ts), measured apart from this suite: 3 nodes behind HAProxy, one Redis, 1,500 clients on 5
channels, half of them senders, history fetched at join; each figure the median of its rounds. The reference's figures
beside ours, how each maps to theirs, and where it saturates: [fleet.md](fleet.md).

${fleetTable(r)}
`;
}

function notifySection(r: Results, connected: number): string {
  return `
## Notifications, and with more clients connected

![delivery latency](latency.svg)

Each notify run has 1,000 listeners among ${count(connected)} clients connected (${how('notifications')}).

### Raw clients and \`ws\` clients against the same node

The same node, the same runs (\`<target> ws-clients <step> N\` in results.json; ${how('raw-clients-and-ws-clients-against-the-same-node')}).

${clientsTable(r)}

${r.quick ? '' : `The same runs once more with every client connected (${count(r.levels.at(-1)!)}; one run each, no target):

${connectedTable(r, connected, r.levels.at(-1)!)}
`}${broadcastsLine(r)}`;
}

function failoverSection(r: Results): string {
  const clients = (name: string): string => r.reconnect?.[name]?.clients.toLocaleString('en-US') ?? '–';
  return `
## A restart, and a kill -9

![clients back over time](reconnect.svg)

A restart of the node holding ${clients('restart')} clients (the new process first, and stopped then started), and kill -9 of one of three
nodes holding ${clients('kill')} clients in all; the medians of the runs, the chart the first run (${how('a-restart-and-a-kill--9')}).

${failoverTable(r)}
`;
}

function machineSection(r: Results): string {
  const run = parseBenchOptions(r.quick ? ['--quick'] : []);
  return `
## Where the CPU went

Each load phase's mean of its samples: % of one core, in brackets the part in the kernel; the machine has ${cpus().length * 100}
(${how('where-the-cpu-went')}).

${cpuTable(r)}

## Memory as clients grow

![memory](memory.svg)

What a client costs, KB; "in all" counts half the kernel's slab for the server (${how('memory', 'why')}).

${costTable(r)}

${memoryTable(r)}

### A node with no client

\`node bench/run.ts --only idle\`: each started afresh ${r.quick ? 'once' : 'three times'} after a start not counted (it fills the compile
cache), its RSS read 20 s after it answers, the figure the median (${how('a-node-with-no-client')}).

${idleTable(r)}

## What runs

The gateway (\`node ${GATEWAY_NODE_ARGS.join(' ')} packages/gateway/src/main.ts\`), Socket.IO + \`@socket.io/redis-adapter\` and bare
\`ws\` + ioredis, each on a fresh redis-server (${how('what-runs', 'more')}). This run: churn ${run.churnS} s after ${run.churnWarmupS} s not counted;
notify ${run.notifyS} s each, the paced one-person runs ${run.pacedS} s, each after ${run.notifyWarmupS} s of emits not counted; each churn
and notify run made ${run.rateRuns === 1 ? 'once' : `${run.rateRuns} times, the figure the median`}.

## Commands

\`\`\`sh
make bench-quick     # node bench/run.ts --quick
make bench           # node bench/run.ts
make bench-fleet     # node bench/fleet.ts: AnyCable's broker benchmark scenario on a fleet, apart (fleet.md)
${r.commands.join('\n')}
\`\`\`

## Machine

${machine()}.
`;
}

export function writeReport(r: Results, dir: string): void {
  const failover = writeCharts(r, dir);
  const connected = parseBenchOptions(r.quick ? ['--quick'] : []).connected;
  const md = [headSection(r), figuresSection(r), notifySection(r, connected), failover ? failoverSection(r) : '', machineSection(r)].join('');
  writeFileSync(`${dir}/README.md`, md);
}
