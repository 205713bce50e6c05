/** The README's tables, from a run's results (bench/report.ts puts them together). */
import { cpus } from 'node:os';
import type { CpuShare, Sample } from './procs.ts';
import type { Results } from './results.ts';

/** The figures of the issue: unit, direction and target. A `_vs_socketio` figure is the gateway's over Socket.IO's. */
export const FIGURES: Array<[string, string, '≤' | '≥', number]> = [
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
  ['ws_broadcast_1k_p99_ms', '… with `ws` clients in two processes: delivery p99, ms (issue 36)', '≤', 1000],
  ['slow_ws_broadcast_1k_p99_ms', '… those reading at half the rate they were sent: delivery p99, ms (issue 36)', '≤', 1000],
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

export const meets = (value: number, op: '≤' | '≥', target: number): boolean => (op === '≤' ? value <= target : value >= target);
export const fmt = (v: number | undefined): string => (v === undefined ? '–' : Math.abs(v) >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(2));

/** The measured servers, each with the prefix of its figures' names in results.json. */
export const TARGETS: Array<[prefix: string, name: string]> = [['', 'gateway'], ['socketio_', 'Socket.IO'], ['bare_', 'bare ws']];

export function figuresTable(r: Results): string {
  const rows = FIGURES.map(([name, label, op, target]) => {
    const ours = r.figures[name];
    const cells = TARGETS.map(([p]) => (p !== '' && name.endsWith('_vs_socketio') ? '' : fmt(r.figures[`${p}${name}`])));
    const met = ours === undefined ? 'not yet measured' : meets(ours, op, target) ? 'yes' : 'no';
    return `| \`${name}\` — ${label} | ${cells.join(' | ')} | ${op} ${target.toLocaleString('en-US')} | ${met} |`;
  });
  const head = `| figure | ${TARGETS.map(([, n]) => n).join(' | ')} | target (issue 4) | met |`;
  return [head, `|---|${TARGETS.map(() => '---:|').join('')}---|---|`, ...rows].join('\n');
}

/** Issue 5: the subscribe rate with can-connect code, side by side with no code. Targets only on the ratios. */
const CODE_FIGURES: Array<[string, string, number | undefined]> = [
  ['subscribe_no_code_per_s', 'no code (`announcements`)', undefined],
  ['subscribe_isolate_token_per_s', 'isolate, reads the person (`checked-token`)', 0.85],
  ['subscribe_isolate_database_per_s', 'isolate, reads the database (`checked-database`)', undefined],
  ['subscribe_sandbox_per_s', 'sandbox worker, reads the clock (`checked-sandbox`)', 0.6],
];

export function codeTable(r: Results): string {
  const rows = CODE_FIGURES.map(([name, label, target]) => {
    const ratio = r.figures[name.replace(/_per_s$/, '_vs_no_code')];
    const met = target === undefined ? '' : ratio === undefined ? 'not yet measured' : ratio >= target ? 'yes' : 'no';
    return `| \`${name}\` — ${label} | ${fmt(r.figures[name])} | ${ratio === undefined ? '' : `${Math.round(ratio * 100)}%`} | ${target === undefined ? '' : `≥ ${target * 100}%`} | ${met} |`;
  });
  return ['| can-connect code | clients/s | of no code | target (issue 5) | met |', '|---|---:|---:|---|---|', ...rows].join('\n');
}

/** [figure, label, target: direction and value, or none]. */
type TargetedFigures = Array<[string, string, ['≤' | '≥', number] | undefined]>;

/** Issue 25: history and resume. */
const HISTORY_FIGURES: TargetedFigures = [
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

/** Issue 35: exactly once at the back end's door. */
const EXACTLY_ONCE_FIGURES: TargetedFigures = [
  ['exactly_once_plain_per_s', 'one person each, unpaced, plain emits, notifications/s (on this scenario\'s node: what the rest is beside)', undefined],
  ['emit_idempotent_per_s', '… each emit with an Idempotency-Key of its own, notifications/s', undefined],
  ['emit_idempotent_vs_plain', '… over the plain run beside it', ['≥', 0.85]],
  ['batch_100_notifications_per_s', '100 emits a call (emit-events-ws), notifications/s', undefined],
  ['batch_100_vs_plain', '… over the plain run beside it', ['≥', 3]],
  ['idempotency_redis_bytes_per_key', 'Redis used_memory per remembered key', undefined],
  ['ingest_per_s', 'the emit stream: entries published a second, 50,000 XADDed at once (one notification each)', undefined],
  ['ingest_vs_plain', '… over the plain emits', ['≥', 1]],
  ['ingest_lag_p99_ms', '… at 1,000 entries a second: from XADD to the listener, p99 ms', undefined],
];

/**
 * Issue 36: AnyCable's broker benchmark scenario on a fleet (bench/fleet.ts, docs/benchmarks/fleet.md). Targets: the
 * reference's multi-node Redis broker run (p95 rtt 8 ms, broadcast 10 ms, history 5 ms; 11,573 broadcasts received a
 * second), the latencies the same at 10×, the rate ten times.
 */
const FLEET_FIGURES: TargetedFigures = [
  ['fleet_0_1x_broadcasts_sent_per_s', '0.1× (0.07 broadcasts/s a sender, the reference\'s measured ~50/s): broadcasts sent/s', undefined],
  ['fleet_0_1x_rtt_p95_ms', '… rtt (emit → its answer), p95 ms', ['≤', 8]],
  ['fleet_0_1x_broadcast_p95_ms', '… broadcast duration (emit → each subscriber), p95 ms', ['≤', 10]],
  ['fleet_0_1x_history_p95_ms', '… history duration (REGISTER since → last replayed), p95 ms', ['≤', 5]],
  ['fleet_0_1x_broadcasts_received_per_s', '… broadcasts received/s', ['≥', 11573]],
  ['fleet_broadcasts_sent_per_s', '1× (0.7 broadcasts/s a sender, 525/s offered): broadcasts sent/s', undefined],
  ['fleet_rtt_p95_ms', '… rtt, p95 ms', ['≤', 8]],
  ['fleet_broadcast_p95_ms', '… broadcast duration, p95 ms', ['≤', 10]],
  ['fleet_history_p95_ms', '… history duration, p95 ms', ['≤', 5]],
  ['fleet_broadcasts_received_per_s', '… broadcasts received/s', ['≥', 11573]],
  ['fleet_10x_broadcasts_sent_per_s', '10× (7 broadcasts/s a sender, 5,250/s offered): broadcasts sent/s', undefined],
  ['fleet_10x_rtt_p95_ms', '… rtt, p95 ms', ['≤', 8]],
  ['fleet_10x_broadcast_p95_ms', '… broadcast duration, p95 ms', ['≤', 10]],
  ['fleet_10x_history_p95_ms', '… history duration, p95 ms', ['≤', 5]],
  ['fleet_10x_broadcasts_received_per_s', '… broadcasts received/s', ['≥', 115730]],
];

function targetedTable(r: Results, figures: TargetedFigures, issue: number): string {
  const rows = figures.map(([name, label, target]) => {
    const value = r.figures[name];
    const met = target === undefined ? '' : value === undefined ? 'not yet measured' : meets(value, ...target) ? 'yes' : 'no';
    return `| \`${name}\` — ${label} | ${fmt(value)} | ${target === undefined ? '' : `${target[0]} ${target[1]}`} | ${met} |`;
  });
  return [`| figure | gateway | target (issue ${issue}) | met |`, '|---|---:|---|---|', ...rows].join('\n');
}

/** Issue 36: a node with no client (bench/idle.ts). */
const IDLE_FIGURES: TargetedFigures = [
  ['node_idle_rss_mb', "the gateway as `make run` starts it (default config: in-process broker, events with code), no client: RSS, MB", ['≤', 100]],
  ['node_idle_redis_rss_mb', '… with REDIS_URL (a fleet node), MB', undefined],
  ['bare_node_idle_rss_mb', 'the bare `ws` peer (bench/peers/bare-ws.ts, ioredis), no client: RSS, MB', undefined],
];

export const idleTable = (r: Results): string => targetedTable(r, IDLE_FIGURES, 36);
export const historyTable = (r: Results): string => targetedTable(r, HISTORY_FIGURES, 25);
export const exactlyOnceTable = (r: Results): string => targetedTable(r, EXACTLY_ONCE_FIGURES, 35);
export const fleetTable = (r: Results): string => targetedTable(r, FLEET_FIGURES, 36);

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

export function failoverTable(r: Results): string {
  const cell = (name: string | undefined): string => (name === undefined ? '' : fmt(r.figures[name]));
  const rows = FAILOVER_ROWS.map(([label, ...names]) => `| ${label} | ${names.map(cell).join(' | ')} |`);
  return ['| | restart | restart, stop then start | kill -9 |', '|---|---:|---:|---:|', ...rows].join('\n');
}

export function memoryTable(r: Results): string {
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
export function costTable(r: Results): string {
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
  ['broadcast_1k_closed', '… listeners the node closed (1013: further behind than websocket.maxLagMs)', undefined],
  ['broadcast_1k_backlog_max_mb', "… the node's delivery backlog, the largest of four readings a second, MiB", undefined],
];

export function clientsTable(r: Results): string {
  const rows = CLIENT_ROWS.map(([figure, label, node]) => {
    const nodeCells = node === undefined ? ' | ' : `${fmt(r.figures[node])} | ${fmt(r.figures[`ws_${node}`])}`;
    return `| ${label} | ${fmt(r.figures[figure])} | ${fmt(r.figures[`ws_${figure}`])} | ${fmt(r.figures[`slow_ws_${figure}`])} | ${nodeCells} |`;
  });
  return ['| gateway, 1,000 listeners | raw clients | `ws` clients | slow `ws` clients | node fan-out p99, ms (raw run) | (`ws` run) |',
    '|---|---:|---:|---:|---:|---:|', ...rows].join('\n');
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

export function connectedTable(r: Results, connected: number, every: number): string {
  const head = TARGETS.map(([, name]) => `${name}, ${connected.toLocaleString('en-US')} | ${name}, ${every.toLocaleString('en-US')}`).join(' | ');
  const rows = CONNECTED_ROWS.map(([figure, label]) =>
    `| ${label} | ${TARGETS.map(([p]) => `${fmt(r.figures[`${p}${figure}`])} | ${fmt(r.figures[`${p}every_client_${figure}`])}`).join(' | ')} |`);
  return [`| clients connected | ${head} |`, `|---|${TARGETS.map(() => '---:|---:').join('|')}|`, ...rows].join('\n');
}

const IDLE: CpuShare = { cpuPct: 0, sysPct: 0 };

/**
 * Where the CPU went in each load phase (not the memory levels or fills), as the mean of the phase's samples:
 * the server, its Redis, the load generators (all of them, fills included), and the whole machine, each as
 * "% of a core (of which in the kernel)". The machine's cores are the ceiling every rate here meets.
 */
export function cpuTable(r: Results): string {
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
 * (bench/machine-floors.ts); nothing when the run has no floors.
 */
export function floorTable(r: Results): string {
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
  return `| | floor: plain Node | floor: fastify | floor: own HTTP reader | ${TARGETS.map(([, name]) => name).join(' | ')} |
|---|---:|---:|---:|${TARGETS.map(() => '---:|').join('')}
${rows.map(([label, ...values]) => `| ${label} | ${values.map(fmt).join(' | ')} |`).join('\n')}`;
}
