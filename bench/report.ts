/** docs/benchmarks/README.md, memory.svg, latency.svg and reconnect.svg from a run's results (the charts: bench/chart.ts). */
import { execFileSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { writeFileSync } from 'node:fs';
import { lineChart } from './chart.ts';
import { WHY_MISSED } from './missed.ts';
import { GATEWAY_NODE_ARGS, type CpuShare, type Sample } from './procs.ts';

export interface Level { clients: number; rssKb: number; heapUsed?: number; redisUsedMemory: number; slabKb?: number }
export interface Results {
  quick: boolean; startedAt: string; levels: number[];
  figures: Record<string, number>;
  memory: Record<string, Level[]>;
  runs: Record<string, unknown>;
  errors: string[]; commands: string[]; samples: Sample[];
  /** Per failover scenario (bench/failover.ts): its clients, and [s since the first drop, clients connected and registered]. */
  reconnect?: Record<string, { clients: number; series: Array<[number, number]> }>;
}

/** The figures of the issue: unit, direction and target. A `_vs_socketio` figure is the gateway's over Socket.IO's. */
const FIGURES: Array<[string, string, '≤' | '≥', number]> = [
  ['node_rss_kb_per_client', 'node RSS, KB per client', '≤', 3.3],
  ['node_heap_kb_per_client', 'node heap used, KB per client', '≤', 2.5],
  ['redis_kb_per_client', 'Redis used_memory, KB per client', '≤', 0.2],
  ['churn_subscribe_per_s', 'connect (both tokens) + subscribe + leave, clients/s', '≥', 6000],
  ['churn_subscribe_vs_socketio', '… × Socket.IO', '≥', 1.8],
  ['notify_person_per_s', 'one person each, unpaced, notifications/s', '≥', 20000],
  ['notify_person_vs_socketio', '… × Socket.IO', '≥', 1.8],
  ['paced_p50_ms', 'at 1,000/s, delivery p50, ms', '≤', 0.5],
  ['paced_p99_ms', 'at 1,000/s, delivery p99, ms', '≤', 2],
  ['broadcast_1k_per_s', 'broadcast to 1,000, unpaced: notifications/s delivered within 1 s of their emit', '≥', 180000],
  ['broadcast_1k_p99_ms', '… delivery p99, ms (issue 30)', '≤', 1000],
  ['broadcast_1k_vs_socketio', '… × Socket.IO', '≥', 2],
  ['broadcast_18k_last_ms', 'one broadcast to every client (18,000): the last one told, ms', '≤', 200],
  ['person_during_broadcast_ms', '… one-person notifications sent meanwhile (100/s): delivery p99, ms', '≤', 20],
  ['restart_all_back_s', 'restart of the node (new process first): every client back and registered, s after the first drop', '≤', 7],
  ['restart_lost', '… then 1,000/s, each for one client: notifications lost', '≤', 0],
  ['kill_all_back_s', 'kill -9 of one of 3 nodes: its clients back, s after the first drop', '≤', 7],
  ['kill_swept_s', '… its entries gone from Redis, s after the kill', '≤', 15],
  ['kill_next_emit_reached_pct', '… then each client named once: % reached', '≥', 100],
  ['revoke_all_nodes_ms', 'one call disconnects a person with connections on 3 nodes: the last socket closed, p99 ms', '≤', 100],
];

const meets = (value: number, op: '≤' | '≥', target: number): boolean => (op === '≤' ? value <= target : value >= target);
const fmt = (v: number | undefined): string => (v === undefined ? '–' : Math.abs(v) >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(2));

/** The measured servers, each with the prefix of its figures' names in results.json. */
const TARGETS: Array<[prefix: string, name: string]> = [['', 'gateway'], ['socketio_', 'Socket.IO'], ['bare_', 'bare ws']];

function table(r: Results): string {
  const rows = FIGURES.map(([name, label, op, target]) => {
    const ours = r.figures[name];
    const cells = TARGETS.map(([p]) => (p !== '' && name.endsWith('_vs_socketio') ? '' : fmt(r.figures[`${p}${name}`])));
    const met = ours === undefined ? 'not yet measured' : meets(ours, op, target) ? 'yes' : 'no';
    return `| \`${name}\` — ${label} | ${cells.join(' | ')} | ${op} ${target.toLocaleString('en-US')} | ${met} |`;
  });
  const head = `| figure | ${TARGETS.map(([, n]) => n).join(' | ')} | target (issue 4) | met |`;
  return [head, `|---|${TARGETS.map(() => '---:|').join('')}---|---|`, ...rows].join('\n');
}

/** How many runs named `run` and a number results.json holds: the rounds of that step. */
const roundsOf = (r: Results, run: string): number =>
  Object.keys(r.runs).filter((name) => name.startsWith(`${run} `) && /^\d+$/.test(name.slice(run.length + 1))).length;

/** Issue 5: the subscribe rate with can-connect code, side by side with no code. Targets only on the ratios. */
const CODE_FIGURES: Array<[string, string, number | undefined]> = [
  ['subscribe_no_code_per_s', 'no code (`announcements`)', undefined],
  ['subscribe_isolate_token_per_s', 'isolate, reads the person (`checked-token`)', 0.85],
  ['subscribe_isolate_database_per_s', 'isolate, reads the database (`checked-database`)', undefined],
  ['subscribe_sandbox_per_s', 'sandbox worker, reads the clock (`checked-sandbox`)', 0.6],
];

function codeTable(r: Results): string {
  const rows = CODE_FIGURES.map(([name, label, target]) => {
    const ratio = r.figures[name.replace(/_per_s$/, '_vs_no_code')];
    const met = target === undefined ? '' : ratio === undefined ? 'not yet measured' : ratio >= target ? 'yes' : 'no';
    return `| \`${name}\` — ${label} | ${fmt(r.figures[name])} | ${ratio === undefined ? '' : `${Math.round(ratio * 100)}%`} | ${target === undefined ? '' : `≥ ${target * 100}%`} | ${met} |`;
  });
  return ['| can-connect code | clients/s | of no code | target (issue 5) | met |', '|---|---:|---:|---|---|', ...rows].join('\n');
}

/** Issue 25: history and resume. [figure, label, target: direction and value, or none]. */
const HISTORY_FIGURES: Array<[string, string, ['≤' | '≥', number] | undefined]> = [
  ['restart_gap_recovered_pct', 'restart (new process first) while emits go on: % of what its clients missed that reached them once back', ['≥', 100]],
  ['restart_gap_missed', '… notifications the gap held (replayed + missing)', undefined],
  ['restart_gap_duplicates', '… repeats a client had to drop', ['≤', 0]],
  ['kill_gap_recovered_pct', 'kill -9 of one of 3 nodes while emits go on: % of what its clients missed that reached them once back', ['≥', 100]],
  ['kill_gap_missed', '… notifications the gap held (replayed + missing)', undefined],
  ['kill_gap_duplicates', '… repeats a client had to drop', ['≤', 0]],
  ['notify_person_history_per_s', 'one person each, unpaced, history on (announcements-kept), notifications/s', undefined],
  ['notify_person_history_vs_plain', '… over the run without history beside it (announcements)', ['≥', 0.75]],
  ['notify_person_history_us_per_emit', "… the node's CPU per emit with history, µs", undefined],
  ['notify_person_plain_us_per_emit', '… and without, µs', undefined],
  ['history_recover_100_p50_ms', 'a client that missed 100: REGISTER with since to the 100th replayed, p50 ms', undefined],
  ['history_recover_100_p99_ms', '… p99 ms', ['≤', 20]],
  ['history_redis_bytes_per_notification', 'Redis used_memory per notification kept (stream and position; eventData ~55 B)', undefined],
];

function historyTable(r: Results): string {
  const rows = HISTORY_FIGURES.map(([name, label, target]) => {
    const value = r.figures[name];
    const met = target === undefined ? '' : value === undefined ? 'not yet measured' : meets(value, ...target) ? 'yes' : 'no';
    return `| \`${name}\` — ${label} | ${fmt(value)} | ${target === undefined ? '' : `${target[0]} ${target[1]}`} | ${met} |`;
  });
  return ['| figure | gateway | target (issue 25) | met |', '|---|---:|---|---|', ...rows].join('\n');
}

/** Scenarios 5 and 6 side by side (the restart both ways): what the figures table has, and what has no target. */
const FAILOVER_ROWS: Array<[string, string | undefined, string | undefined, string | undefined]> = [
  ['clients dropped', 'restart_dropped', 'restart_cold_dropped', 'kill_dropped'],
  ['every one back and registered, s after the first drop', 'restart_all_back_s', 'restart_cold_all_back_s', 'kill_all_back_s'],
  ['away, p50 ms (its own wait counted)', 'restart_away_p50_ms', 'restart_cold_away_p50_ms', 'kill_away_p50_ms'],
  ['away, p99 ms', 'restart_away_p99_ms', 'restart_cold_away_p99_ms', 'kill_away_p99_ms'],
  ['then: notifications lost / % of clients reached', 'restart_lost', 'restart_cold_lost', 'kill_next_emit_reached_pct'],
  ["the dead node's entries gone from Redis, s after the kill", undefined, undefined, 'kill_swept_s'],
  ['every client leaves at once: the node closed every socket after, s', 'leave_sockets_closed_s', undefined, undefined],
  ['… and Redis held nothing of them after, s', 'leave_redis_clean_s', undefined, undefined],
];

/** Names of the clients-back series in the chart. */
const SERIES_NAMES: Record<string, string> = {
  restart: 'restart, new process first',
  restart_cold: 'restart, stop then start',
  kill: 'kill -9, 1 of 3',
};

function failoverSection(r: Results): string {
  const cell = (name: string | undefined): string => (name === undefined ? '' : fmt(r.figures[name]));
  const rows = FAILOVER_ROWS.map(([label, ...names]) => `| ${label} | ${names.map(cell).join(' | ')} |`);
  const clients = (name: string): string => r.reconnect?.[name]?.clients.toLocaleString('en-US') ?? '–';
  return `## A restart, and a kill -9

![clients back over time](reconnect.svg)

wsload's clients come back as an application using the client SDK does (\`reconnectDelayAfter\`): a random wait of
0 to 1 s after a 1001 (the draining node has spread its closes in batches already), of 1 to 5 s after any other drop
(a node killed: 1006) and after each refused attempt (HTTP 503 while the node drains or admission is full,
ECONNREFUSED while it is down); the same URL and tokens, the same REGISTER. Once every dropped client is back,
the emitter names each client in turn, 1,000 a second, and the clients count what arrives (\`wsload notify
--await-return\`, bench/failover.ts). Each scenario runs twice (once quick): the table has the medians of the two
(for notifications lost and clients reached, the worse run), the chart the first run.

- **restart** (${clients('restart')} clients on one node), as a deploy does it: a new node process on the same port, both
  with \`server.reusePort\`, then SIGTERM to the old one, which stops listening (every new client reaches the new
  one), takes its routes out of Redis and closes its sockets with 1001 in batches (\`drain\` in docs/configuration.md);
  ${r.quick ? 5 : 20} s of emits; then every client leaves at once (a TCP reset each), timed from that moment to
  \`herald_connections\` 0 and to Redis back to its key count with no client.
- **restart, stop then start**, for comparison: the same without \`reusePort\`, the new process started once the old
  one has exited. Until it listens, each client's attempt is refused and it waits another 1 to 5 s.
- **kill -9** (${clients('kill')} clients on three nodes behind HAProxy): the node holding the most is killed; swept is timed
  from the kill to its \`gw:node:{id}:buckets\` and its \`gw:{nodes}\` entry gone; each client is then named once. The emits
  start as soon as every client is back, which may be before the sweep (routes then still name the dead node too).

| | restart | restart, stop then start | kill -9 |
|---|---:|---:|---:|
${rows.join('\n')}
`;
}

function memoryTable(r: Results): string {
  const head = `| clients | ${Object.keys(r.memory).map((n) => `${n} RSS MB | ${n} heap MB | ${n} Redis MB | ${n} kernel slab MB`).join(' | ')} |`;
  const sep = `|---:|${Object.keys(r.memory).map(() => '---:|---:|---:|---:').join('|')}|`;
  const mb = (b: number | undefined): string => (b === undefined ? '–' : (b / 1048576).toFixed(1));
  const rows = r.levels.map((clients) => `| ${clients.toLocaleString('en-US')} | ${Object.values(r.memory).map((levels) => {
    const l = levels.find((x) => x.clients === clients);
    return `${mb(l && l.rssKb * 1024)} | ${mb(l?.heapUsed)} | ${mb(l?.redisUsedMemory)} | ${mb(l?.slabKb && l.slabKb * 1024)}`;
  }).join(' | ')} |`);
  return [head, sep, ...rows].join('\n');
}

/**
 * What a client costs in all, as the reference counts it: the node's RSS, Redis, and the kernel's slab. On loopback
 * the slab holds both ends of each connection (the load generator's socket too), so the server's share is taken
 * as half of it.
 */
function costTable(r: Results): string {
  const rows = TARGETS.map(([p, name]) => {
    const [rss, heap, redisKb, slab] = ['node_rss_kb_per_client', 'node_heap_kb_per_client', 'redis_kb_per_client', 'kernel_slab_kb_per_connection'].map((f) => r.figures[`${p}${f}`]);
    const total = rss === undefined || redisKb === undefined || slab === undefined ? undefined : rss + redisKb + slab / 2;
    const perGb = total === undefined ? '–' : Math.round(1048576 / total).toLocaleString('en-US');
    return `| ${name} | ${fmt(rss)} | ${fmt(heap)} | ${fmt(redisKb)} | ${fmt(slab)} | ${fmt(total)} | ${perGb} |`;
  });
  return ['| | node RSS | node heap | Redis | kernel slab, both ends | in all (RSS + Redis + half the slab) | clients per GB |',
    '|---|---:|---:|---:|---:|---:|---:|', ...rows].join('\n');
}

/** The gateway's runs with wsload's raw clients and with clients on the `ws` library: [figure, label, the node's own figure]. */
const CLIENT_ROWS: Array<[string, string, string | undefined]> = [
  ['churn_subscribe_per_s', 'churn: connect (both tokens) + subscribe + leave, clients/s', undefined],
  ['notify_person_per_s', 'one person each, unpaced, notifications/s', 'notify_person_node_fanout_p99_ms'],
  ['notify_person_p99_ms', '… delivery p99, ms', undefined],
  ['paced_p50_ms', 'one person each at 1,000/s: delivery p50, ms', undefined],
  ['paced_p99_ms', '… p99, ms', 'paced_node_fanout_p99_ms'],
  ['broadcast_1k_per_s', 'broadcast to 1,000, unpaced: delivered within 1 s, notifications/s', 'broadcast_1k_node_fanout_p99_ms'],
  ['broadcast_1k_all_per_s', '… every one delivered, notifications/s', undefined],
  ['broadcast_1k_p99_ms', '… delivery p99, ms', undefined],
  ['broadcast_1k_refused_per_s', '… emits refused 503 a second (the emitter pauses 50 ms after each)', undefined],
  ['broadcast_1k_backlog_max_mb', "… the node's delivery backlog, the largest of four readings a second, MiB", undefined],
];

function clientsTable(r: Results): string {
  const rows = CLIENT_ROWS.map(([figure, label, node]) => {
    const nodeCells = node === undefined ? ' | ' : `${fmt(r.figures[node])} | ${fmt(r.figures[`ws_${node}`])}`;
    return `| ${label} | ${fmt(r.figures[figure])} | ${fmt(r.figures[`ws_${figure}`])} | ${nodeCells} |`;
  });
  return ['| gateway, 1,000 listeners | raw clients | `ws` clients | node fan-out p99, ms (raw run) | (`ws` run) |',
    '|---|---:|---:|---:|---:|', ...rows].join('\n');
}

/** Scenario 3 (10,000 clients connected) beside scenario 4 (every client: 18,000), per target. */
const CONNECTED_ROWS: Array<[string, string]> = [
  ['notify_person_per_s', 'one person each, unpaced, notifications/s'],
  ['paced_p50_ms', 'one person each at 1,000/s: delivery p50, ms'],
  ['paced_p99_ms', '… p99, ms'],
  ['broadcast_1k_per_s', 'broadcast to 1,000, unpaced, notifications/s'],
  ['broadcast_paced_p50_ms', 'broadcast to 1,000 at 5/s: delivery p50, ms'],
  ['broadcast_paced_last_ms', '… the last one told, ms'],
];

function connectedTable(r: Results, connected: number, every: number): string {
  const head = TARGETS.map(([, name]) => `${name}, ${connected.toLocaleString('en-US')} | ${name}, ${every.toLocaleString('en-US')}`).join(' | ');
  const rows = CONNECTED_ROWS.map(([figure, label]) =>
    `| ${label} | ${TARGETS.map(([p]) => `${fmt(r.figures[`${p}${figure}`])} | ${fmt(r.figures[`${p}every_client_${figure}`])}`).join(' | ')} |`);
  return [`| clients connected | ${head} |`, `|---|${TARGETS.map(() => '---:|---:').join('|')}|`, ...rows].join('\n');
}

/** Each run's 18k broadcasts' last one told (wsload's per-emit tallies), or nothing for a run without them. */
function broadcastsLine(r: Results): string {
  type Run = { perEmit?: { each: Array<{ told: number; lastMs: number }> } } | undefined;
  const runs = Object.entries(r.runs)
    .filter(([key]) => /^gateway broadcast-18k \d+$/.test(key))
    .map(([, run]) => (run as Run)?.perEmit?.each ?? [])
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
  const delivery = (key: string): Record<string, number> | undefined =>
    (r.runs[key] as { latency?: { delivery?: Record<string, number> } } | undefined)?.latency?.delivery;
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
const PERCENTILES: Array<[string, string]> = [['p50', 'p50'], ['p90', 'p90'], ['p99', 'p99'], ['p99.9', 'p99_9'], ['max', 'max']];

function machine(): string {
  const redis = execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).split(' ')[2] ?? '?';
  return `${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(1)} GB, Node.js ${process.version}, redis-server ${redis}, linux; loopback only`;
}

const IDLE: CpuShare = { cpuPct: 0, sysPct: 0 };

/**
 * Where the CPU went in each load phase (not the memory levels or fills), as the mean of the phase's samples:
 * the server, its Redis, the load generators (all of them, fills included), and the whole machine, each as
 * "% of a core (of which in the kernel)". The machine's cores are the ceiling every rate here meets.
 */
function cpuTable(r: Results): string {
  const phases = new Map<string, Sample[]>();
  for (const sample of r.samples) {
    const target = sample.phase.split(' ')[0]!;
    if (!sample.machine || !sample.procs[target] || / (memory|fill)\b/.test(sample.phase)) continue;
    const samples = phases.get(sample.phase);
    if (samples) samples.push(sample);
    else phases.set(sample.phase, [sample]);
  }
  const mean = (samples: Sample[], pick: (s: Sample) => CpuShare): string => {
    const average = (of: (cpu: CpuShare) => number): number => Math.round(samples.reduce((total, s) => total + of(pick(s)), 0) / samples.length);
    return `${average((cpu) => cpu.cpuPct)} (${average((cpu) => cpu.sysPct)})`;
  };
  const loads = (s: Sample): CpuShare => Object.entries(s.procs).filter(([name]) => name.startsWith('load'))
    .reduce((all, [, p]) => ({ cpuPct: all.cpuPct + p.cpuPct, sysPct: all.sysPct + p.sysPct }), IDLE);
  const stolen = (samples: Sample[]): string => (samples.every((s) => s.machine!.stealPct === undefined)
    ? '–'
    : String(Math.round(samples.reduce((total, s) => total + (s.machine!.stealPct ?? 0), 0) / samples.length)));
  const rows = [...phases].map(([phase, samples]) => {
    const target = phase.split(' ')[0]!;
    const cells = [(s: Sample) => s.procs[target]!, (s: Sample) => s.procs[`redis(${target})`] ?? IDLE, loads, (s: Sample) => s.machine!];
    return `| ${phase} | ${samples.length} | ${cells.map((pick) => mean(samples, pick)).join(' | ')} | ${stolen(samples)} |`;
  });
  return [
    `| phase | samples | server | its Redis | load generators | machine (of ${cpus().length * 100}) | of it stolen by the host |`,
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

/**
 * The gateway beside what this machine gives a server that does no protocol work, measured in the same run
 * (floorScenario, bench/machine-floors.ts); nothing when the run has no floors.
 */
function floorSection(r: Results): string {
  const f = r.figures;
  if (f.floor_notify_http_per_s === undefined && f.floor_broadcast_last_ms === undefined) return '';
  const everyone = r.levels.at(-1)!.toLocaleString('en-US');
  const rows: Array<[string, ...Array<number | undefined>]> = [
    ['one person each, unpaced: emits/s', f.floor_notify_http_per_s, f.floor_notify_fastify_per_s, f.floor_notify_raw_per_s, ...TARGETS.map(([p]) => f[`${p}notify_person_per_s`])],
    ['… the server\'s CPU per emit, µs (user + kernel)', f.floor_notify_http_us_per_emit, f.floor_notify_fastify_us_per_emit, f.floor_notify_raw_us_per_emit, ...TARGETS.map(([p]) => f[`${p}notify_person_us_per_emit`])],
    ['… the same in the side-by-side pairs (median of the rounds)', undefined, undefined, undefined, ...TARGETS.map(([p]) => f[`${p}pairs_notify_person_us_per_emit`])],
    // The broadcast to every client is the gateway's scenario alone.
    [`one broadcast to ${everyone}: the last one told, median of ten, ms`, f.floor_broadcast_last_p50_ms, undefined, undefined, ...TARGETS.map(([p]) => f[`${p}broadcast_18k_last_p50_ms`])],
    ['… the slowest of the ten, ms', f.floor_broadcast_last_ms, undefined, undefined, ...TARGETS.map(([p]) => f[`${p}broadcast_18k_last_ms`])],
  ];
  return `
### This machine's floors

Measured by \`make bench\` after the targets' own runs (floorScenario): a server that does no protocol work, on the
same cores with the same kind of load: \`node bench/plain-http-emit.ts\`
answers each emit (the gateway's body, 100 keep-alive connections, unpaced) on node:http, on fastify, or reading
HTTP/1.1 itself from plain sockets (as the gateway's emit fast path does), and writes one 150-byte frame to the one
of 1,000 plain TCP sockets it names; \`node bench/plain-socket-broadcast.ts\` writes one 150-byte message to each of ${everyone}
sockets from a plain \`net\` server, 128 at a time as the hub does, to three reader processes, in turn across
them as the gateway writes to wsload's three workers (written one reader's sockets after another, each write wakes a
reader far less often: see bench/plain-socket-broadcast.ts), ten rounds after two not counted (as the gateway's broadcast-18k
leaves out its first two broadcasts; its figures here are the medians of its two runs of ten). No WebSocket, no
tokens, no Redis. The floors time their own CPU over their measured seconds; a server's CPU per emit is the mean of
its samples (one a second) wholly inside its runs' measured seconds, over the emits answered a second, the median of
its runs. The floors run some minutes after the targets' own runs, and rates here swing that much from one
minute to the next (above): read them as a level, not to the percent.

| | floor: plain Node | floor: fastify | floor: own HTTP reader | ${TARGETS.map(([, name]) => name).join(' | ')} |
|---|---:|---:|---:|${TARGETS.map(() => '---:|').join('')}
${rows.map(([label, ...values]) => `| ${label} | ${values.map(fmt).join(' | ')} |`).join('\n')}
`;
}

/** Each missed figure with why, from bench/missed.ts (the issue asks for the profile that shows it). */
function missedSection(r: Results): string {
  const missed = FIGURES.filter(([name, , op, target]) => r.figures[name] !== undefined && !meets(r.figures[name], op, target));
  if (missed.length === 0) return '';
  const lines = missed.map(([name]) => `- \`${name}\`: ${WHY_MISSED[name] ?? 'not analysed yet.'}`);
  return `\n### Where a figure is missed, and why\n\n${lines.join('\n')}\n`;
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

export function writeReport(r: Results, dir: string): void {
  writeFileSync(`${dir}/memory.svg`, lineChart('Memory as clients grow (each with its own subscription)', 'clients', 'MB', memorySeries(r)));
  const latency = latencySeries(r);
  if (latency.length > 0) {
    writeFileSync(`${dir}/latency.svg`, lineChart('Delivery latency, one person each (emit written → client read)', 'percentile', 'ms (log)', latency,
      { xTicks: PERCENTILES.map(([label], i) => [i, label]), logY: true }));
  }
  const back = Object.entries(r.reconnect ?? {}).map(([name, run]) => ({ name: SERIES_NAMES[name] ?? name, points: run.series }));
  if (back.length > 0) writeFileSync(`${dir}/reconnect.svg`, lineChart('Clients back over time', 's since the first drop', 'clients connected and registered', back));
  const missing = FIGURES.map(([n]) => n).filter((n) => r.figures[n] === undefined);
  const md = `# Benchmarks

Produced by \`${r.quick ? 'make bench-quick' : 'make bench'}\` (\`bench/run.ts\`) on ${r.startedAt}. Every figure, with each load
generator's full output and a sample a second of each process's RSS and CPU (user and kernel), the machine's CPU
and Redis \`used_memory\`, is in [results.json](results.json). Backpressure on emits, and wsload's raw clients against
clients on the \`ws\` library, measured by hand beside these runs: [clients.md](clients.md).

**Read with care:** the load generator (wsload for the gateway, \`bench/peer-load.ts\` for the peers) runs on the
same ${cpus().length} cores as the server it measures, so every rate here is a floor set partly by the client side. The peers
check no token (a token must merely be present); the gateway verifies both JWTs and runs the API Maker protocol.
The two client sides differ too: wsload's clients are plain TCP sockets speaking WebSocket
(packages/loadgen/src/wire.ts; 250-270 µs of CPU per connect and REGISTER here, where a \`ws\` client took ~370 µs) and its
emitter writes raw HTTP/1.1; peer-load drives the bare peer with the same wire clients (with \`ws\` clients its churn
read ~5,300/s, the load generator the limit, against ~8,400/s) and Socket.IO with socket.io-client (that protocol's
own client), and emits through wsload's HTTP client for every peer (with Node's \`http.request\` its process spent ~45%
more CPU on a Socket.IO notify run). Where socket.io-client is the limit, this favours the gateway over Socket.IO;
Socket.IO's figures are what its usual client reaches. This machine's rates swing by up to 2× from one run to the
next of the same server (Socket.IO's unpaced notify read 16,082 then 8,883/s in two consecutive runs of 2026-12-01),
and each target runs its scenarios in turn, 10-20 minutes from the other's. So the \`_vs_socketio\` ratios are not
the ratios of the rates in the table: the gateway and Socket.IO run the same steps again side by side (both
started, churned, then filled; each step's runs alternated, the gateway first in odd rounds), and each ratio is the
median of ${roundsOf(r, 'gateway pairs notify-person')} round(s) of those pairs (\`<target> pairs <step> N\` in results.json). Each server's CPU per emit, in its own runs and in
the pairs, is in the floors table below, beside a server doing nothing but the HTTP call and the write.

## Figures

${table(r)}

Memory slopes are taken between 6,000 clients and the last level (${r.levels.at(-1)?.toLocaleString('en-US')}), or from the first level with
clients when there is no later one: quick runs stop at 6,000, so their slope is 2,000 → 6,000, not the issue's
6k → 18k. Heap is read as the process reports it (gateway: \`nodejs_heap_size_used_bytes\` on /metrics; peers:
\`process.memoryUsage().heapUsed\` on /stats), 2 s after two forced GCs a second apart (SIGUSR2 to the server, see bench/gc-preload.ts).
${r.quick ? '' : `Each memory figure is the median of two passes over the levels, each on a fresh server (\`<target> memory 1|2\` in results.json);
the tables and charts show the second pass.
`}${floorSection(r)}${missedSection(r)}${missing.length ? `\nNot yet measured in this run: ${missing.map((n) => `\`${n}\``).join(', ')}.\n` : ''}${r.errors.length ? `\nErrors in this run:\n\n${r.errors.map((e) => `- ${e}`).join('\n')}\n` : ''}
## Subscribing with can-connect code

Connect with both tokens, REGISTER, leave, 100 at a time, 2 s of warm-up each. Each event with code runs right beside
a run of the event without code, before it in one round and after it in the next, and its ratio is to that run (the
rate drifts 10-20% over minutes here; a pair a few seconds apart shares the drift); medians over ${roundsOf(r, 'gateway can-connect checked-token')} round(s) of
the rates and of the ratios (\`subscribe_*_vs_no_code\` in results.json, each run's output under \`runs\`).

${codeTable(r)}

## Missed notifications recovered (history and resume)

Events with \`history\` keep each route's last notifications in Redis; a client that comes back resumes from its last
position (docs/protocol.md 4.1). \`restart-gap\` and \`kill-gap\` are the failovers above with the emits going on through
them (1,000 a second, each to one listener, to \`announcements-kept\`), the listeners coming back as the SDK does with
\`since\` (\`wsload notify --resume\`, bench/failover.ts); \`history\` runs on the gateway target (bench/history.ts): unpaced
one-person notify with and without history in alternated pairs (${roundsOf(r, 'gateway history kept')} round(s)), a client that
missed 100 coming back (the time from its REGISTER to the 100th replayed), and Redis's bytes per notification kept.

${historyTable(r)}

## Notifications, and with more clients connected

![delivery latency](latency.svg)

Each notify run has 1,000 listeners (one person each, or the subscribers of the broadcast) among
${r.quick ? '2,000' : '10,000'} clients connected: the others are a fill, idle, each with both tokens and a subscription of its own.

### Raw clients and \`ws\` clients against the same node

wsload's raw clients read the node's frames in place and parse nothing; with \`--client ws\` its clients are built on the
\`ws\` library (masked frames, a close handshake when they leave, each message checked as UTF-8 and parsed as JSON, as
Node back ends and browsers do). The same node, the same runs (\`<target> ws-clients <step> N\` in results.json). The
node's fan-out time (\`herald_fanout_duration_seconds\`: from an emit's arrival at its hub to the last write of its
fan-out, read from /metrics before and after each run, as the upper bound of the bucket of its p99) is the node's part
of a delivery; what the \`ws\` clients add to a figure over the raw ones, against the same node, is the client's.

${clientsTable(r)}

${r.quick ? '' : `The same runs once more with every client connected (18,000; one run each, no target):

${connectedTable(r, 10_000, 18_000)}
`}${broadcastsLine(r)}
${back.length > 0 ? failoverSection(r) : ''}
## Where the CPU went

Each load phase's mean of the samples taken once a second: % of one core, in brackets the part spent in the
kernel (system calls; on loopback a write also runs the receiving end's TCP). A phase of ${cpus().length * 100}% on the machine has
no core left for anyone. "Stolen" is the hypervisor's share (steal in /proc/stat: this VM had work, the host ran
something else); it counts in the machine's figure, and the machine's figure less the processes named is what
ran elsewhere (the host, kernel threads, anything not watched): a phase where that is large measured the host.

${cpuTable(r)}

## Memory as clients grow

![memory](memory.svg)

What a client costs, KB (slopes between 6,000 clients and the last level). The kernel's slab is read from
/proc/meminfo and is the whole machine's: on loopback it holds both ends of each connection (the load generator's
socket is the same kernel objects as the server's), so "in all" counts half of it for the server, as the reference,
whose load generator ran on another machine, counts the server's kernel alone.

${costTable(r)}

${memoryTable(r)}

## What runs

- **gateway**: \`node ${GATEWAY_NODE_ARGS.join(' ')} packages/gateway/src/main.ts\` with \`PORT\`, \`LOG_LEVEL=warn\`, \`REDIS_URL\`.
- **Socket.IO**: \`bench/peers/socketio.ts\`, Socket.IO + \`@socket.io/redis-adapter\`, WebSocket transport only; \`register\`
  joins a room per recipientId; \`POST /emit\` does \`io.to(room).emit\` (a broadcast: the listeners' room).
- **bare ws**: \`bench/peers/bare-ws.ts\`, \`ws\` + ioredis, a Map by recipientId; \`POST /emit\` publishes on one Redis
  channel and the subscriber writes to the socket(s): no protocol work at all. It writes each frame to its socket
  at once, as \`ws\` does; the gateway holds a client's frames of one turn of the event loop and sends them in one
  system call (\`CoalescedWrites\`, packages/gateway/src/transport/frames.ts), which is why its unpaced broadcasts
  pass this "floor": the write system call per frame was 76% of the node's profile.
- Each server gets a fresh \`redis-server --save '' --appendonly no\`, ports 25001–25030.
- Memory levels: clients connected and registered (each its own recipientId), two forced GCs, then RSS
  (/proc/<pid>/status VmRSS), heap, Redis INFO used_memory and the kernel's Slab (/proc/meminfo); the clients of a
  level stay connected for the next, which adds the difference.
- Churn: 100 clients at a time connect, register, leave, for ${r.quick ? 10 : 20} s after ${r.quick ? 2 : 5} s not counted (the published
  methodology's warm-up: a server started afresh is slower for its first seconds). Notify: 1,000 listeners among
  ${r.quick ? '2,000' : '10,000'} clients connected, 100 HTTP connections, unpaced or paced (\`-R\`), ${r.quick ? 5 : 10} s each, but the paced
  one-person runs ${r.quick ? 5 : 60} s (the published runs' length: a p99 of 10 s is its 100 slowest deliveries); broadcasts reach the 1,000 listeners
  only (the peers' listeners join one room, as the gateway's register an event without criteria). Each run connects
  its listeners and emits ${r.quick ? 1 : 2} s before it counts (\`-w\`; the published runs' listeners were connected by another
  process before the load began): the collections right after 1,000 connections pause the server 4-10 ms.
  ${r.quick ? 'One run each.' : 'Each churn and notify run is made twice; the figure is the median of the two (their mean), as the issue asks.'}
  Each server is started afresh (with its Redis) after its memory levels, before these runs, so that each scenario
  measures itself (an earlier gateway read 20-35% lower after 18,000 clients came and left; today's churn does not).

## Commands

\`\`\`sh
make bench-quick     # node bench/run.ts --quick
make bench           # node bench/run.ts
${r.commands.join('\n')}
\`\`\`

## Machine

${machine()}.
`;
  writeFileSync(`${dir}/README.md`, md);
}
