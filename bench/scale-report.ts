/** docs/benchmarks/scale.md and its charts from a scale run's results (bench/scale.ts; the charts: bench/chart.ts). */
import { writeFileSync } from 'node:fs';
import { barChart, lineChart } from './chart.ts';
import { kernelKb, type Reading } from './scale-memory.ts';
import { perClient, project, type Level, type PerClient, type ScaleResults } from './scale-results.ts';

const n = (value: number | undefined): string => (value === undefined || !Number.isFinite(value) ? '–' : Math.round(value).toLocaleString('en-US'));
const mb = (kb: number): string => n(kb / 1024);
const f2 = (value: number | undefined): string => (value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(2));
const s1 = (value: number | null | undefined): string => (value === undefined || value === null ? '–' : value.toFixed(1));
const usedKb = (r: Reading): number => r.machine.totalKb - r.machine.availableKb;
/** What the run's parts do not explain: the system, other processes, the page cache the processes' code is in. */
const restKb = (r: Reading): number => usedKb(r) - r.nodes.anonKb - r.loadgen.anonKb - r.redis.rssKb - kernelKb(r.kernel);

/** The issue's targets (issue 28). */
function targets(r: ScaleResults, slopes: PerClient | undefined): string {
  const fleetKb = slopes && slopes.nodeRssKb + slopes.redisKb;
  const paced = r.notify.paced?.delivery.p99;
  const rows: Array<[string, string, string, boolean | undefined]> = [
    ['clients held at once, on this machine with its load generator', n(r.held), '≥ 800,000', r.held === undefined ? undefined : r.held >= 800_000],
    ["the fleet's own cost per client (nodes' RSS + Redis), KB", f2(fleetKb), '≤ 3.5', fleetKb === undefined ? undefined : fleetKb <= 3.5],
    ['one-person delivery p99 at 1,000/s with every client connected, ms', f2(paced), '≤ 3', paced === undefined ? undefined : paced <= 3],
    ['clients not back after the rolling restart', n(r.restart?.away), '0', r.restart === undefined ? undefined : r.restart.away === 0],
    ['… and of those then named once each, not told', n(r.restart?.lost), '0', r.restart === undefined ? undefined : r.restart.lost === 0],
  ];
  return ['| figure | measured | target | met |', '|---|---:|---|---|',
    ...rows.map(([label, value, target, met]) => `| ${label} | ${value} | ${target} | ${met === undefined ? 'not measured' : met ? 'yes' : 'no'} |`)].join('\n');
}

function levelsTable(levels: readonly Level[]): string {
  const rows = levels.map((l) => `| ${l.clients === 0 ? 'none (at rest)' : n(l.clients)} | ${mb(l.nodes.rssKb)} | ${mb(l.nodes.anonKb)} | ${mb(l.redis.usedMemory / 1024)} | ` +
    `${mb(kernelKb(l.kernel))} | ${mb(l.loadgen.anonKb)} | ${mb(restKb(l))} | **${mb(usedKb(l))}** | ${mb(l.machine.availableKb)} | ${s1(l.cpuPct)}% | ${n(l.fillRate)} | ${n(l.failed)} |`);
  return ['| clients | nodes, RSS | nodes, own (anon) | Redis (used_memory) | kernel | load generator (anon) | the rest | machine, used | available | CPU busy | clients/s filling | never ready |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|', ...rows].join('\n');
}

/** The machine at rest and with every client, part by part (as the reference's "Memory when the server is full"). */
function fullTable(rest: Level, full: Level): string {
  const parts: Array<[string, (l: Level) => number]> = [
    [`nodes (${full.nodes.processes} processes, own memory)`, (l) => l.nodes.anonKb], ['… as RSS', (l) => l.nodes.rssKb],
    ['Redis (used_memory)', (l) => l.redis.usedMemory / 1024], ['kernel: slab, socket buffers, page tables, stacks', (l) => kernelKb(l.kernel)],
    [`load generator (${full.loadgen.processes} processes, own memory)`, (l) => l.loadgen.anonKb], ['the rest', restKb],
    ['**machine, used**', usedKb], ['available', (l) => l.machine.availableKb],
  ];
  const rows = parts.map(([part, kb]) => `| ${part} | ${mb(kb(rest))} MB | ${mb(kb(full))} MB | ${kb(full) >= kb(rest) ? '+' : '−'} ${mb(Math.abs(kb(full) - kb(rest)))} MB |`);
  return [`| part | at rest | ${n(full.clients)} clients | more |`, '|---|---:|---:|---:|', ...rows,
    `| TCP sockets | ${n(rest.kernel.tcpSockets)} | ${n(full.kernel.tcpSockets)} | |`, `| Redis keys | ${n(rest.redisKeys)} | ${n(full.redisKeys)} | |`].join('\n');
}

function costTable(slopes: PerClient): string {
  const fleet = slopes.nodeRssKb + slopes.redisKb;
  const rows: Array<[string, number, string]> = [
    ['**nodes** (RSS)', slopes.nodeRssKb, 'the socket, its session and tokens, its subscription in the hub'],
    ['Redis (used_memory)', slopes.redisKb, "the client's route in its bucket's hash"],
    ['**the fleet\'s own** (nodes + Redis)', fleet, 'what the gateway costs: the target, ≤ 3.5 KB'],
    ['kernel, both ends', slopes.kernelKb, 'two TCP sockets (the load generator\'s and the node\'s), their files and epoll entries: slab, socket buffers, page tables'],
    ['… the node\'s end alone (half)', slopes.kernelKb / 2, 'what a server with its clients elsewhere pays'],
    ['load generator (own memory)', slopes.loadgenKb, 'wsload: a client\'s socket and state, and a worker process per 19,000 clients'],
    ['**in all, on this machine**', slopes.machineKb, 'MemTotal − MemAvailable'],
  ];
  return [`Between ${n(slopes.from.clients)} and ${n(slopes.to.clients)} clients, each client more cost:`, '',
    '| where | KB per client | what it is |', '|---|---:|---|', ...rows.map(([where, kb, what]) => `| ${where} | ${f2(kb)} | ${what} |`)].join('\n');
}

function projection(r: ScaleResults, slopes: PerClient): string {
  const p = project(r, 100 - r.plan.options.reservePct);
  if (!p) return '';
  const target = Math.max(800_000, r.held ?? 0);
  const rest = r.levels[0]!;
  const nodesFor = Math.ceil(target / p.perNode);
  return `### With the load generator on another machine

As the reference ran it: only the nodes, Redis and the node's end of each connection on this machine. From this run:
what the machine held before the run (${mb(p.restKb)} MB: the system and everything else), Redis at rest
(${mb(rest.redis.rssKb)} MB), a node at rest ${mb(p.nodeBaseKb)} MB of its own (anon) for every ${n(p.perNode)} clients, and per client
${f2(slopes.nodeAnonKb)} KB in the node + ${f2(slopes.redisKb)} KB in Redis + ${f2(slopes.kernelKb / 2)} KB of kernel = ${f2(p.serverKbPerClient)} KB:

- ${n(target)} clients: ${nodesFor} nodes × ${mb(p.nodeBaseKb)} MB + ${n(target)} × ${f2(p.serverKbPerClient)} KB + ${mb(p.restKb + rest.redis.rssKb)} MB = **${mb(p.serverKb(target))} MB**
  of ${mb(rest.machine.totalKb)} MB (${Math.round((100 * p.serverKb(target)) / rest.machine.totalKb)}%);
- the most that would fit within ${100 - r.plan.options.reservePct}% of the memory: **${n(p.fitsServerOnly)} clients**.
`;
}

function withEveryone(r: ScaleResults): string {
  const rows = Object.entries(r.notify).map(([name, x]) =>
    `| one person each, ${name === 'paced' ? '1,000/s' : 'as many as the fleet takes'} | ${n(x.notificationsPerSecond)} | ${f2(x.delivery.p50)} | ${f2(x.delivery.p99)} | ${f2(x.delivery.max)} | ${n(x.expected)} | ${n(x.missing)} |`);
  const broadcasts = r.broadcasts.map((b, i) =>
    `| ${i + 1} | ${n(b.told)} of ${n(b.of)} | ${n(b.answeredMs)} | ${n(b.firstMs)} | ${n(b.halfMs)} | **${n(b.lastMs)}** | ${n(b.told / (b.lastMs / 1000))} | ${b.sweeps ? `${n(b.sweeps.spared)} / ${n(b.sweeps.sweptRoutes)} / ${n(b.sweeps.resyncs)}` : '-'} |`);
  const sub = r.subscription;
  const subText = sub === undefined ? '' : `
Before the broadcasts every client joined \`everyone\` (a second REGISTER, without criteria): ${n(sub.accepted)} accepted,
${n(sub.refused)} refused, in ${s1(sub.seconds)} s. One more subscription cost per client: nodes
${f2((sub.after.nodes.rssKb - sub.before.nodes.rssKb) / sub.clients)} KB (RSS), Redis ${f2((sub.after.redis.usedMemory - sub.before.redis.usedMemory) / 1024 / sub.clients)} KB.
`;
  return `## With every client connected

Each notify run has 1,000 listeners of its own (spread over the nodes) besides the held clients, and emits through
the first node (so most notifications cross Redis to another node); delivery is from the call's write to the
listener's read.

| | notifications/s | delivery p50, ms | p99, ms | max, ms | expected | missing |
|---|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}
${subText}
One emit of \`everyone\` per broadcast; times from the call's write to each client's read. The last column adds up
the nodes' counters over each broadcast: a node whose heartbeat lapsed while the frames were written is spared while
Redis still holds its connection (\`redis.connectedLeaseMs\`); its routes swept would mean its clients missed the
broadcast until it wrote them again.

| broadcast | clients told | call answered after, ms | the first, ms | half of them, ms | the last, ms | told a second | lapsed nodes spared / routes swept / resyncs |
|---|---:|---:|---:|---:|---:|---:|---:|
${broadcasts.join('\n')}
`;
}

function restartSection(r: ScaleResults): string {
  const x = r.restart;
  if (!x) return '';
  return `## A rolling restart

Each of the ${x.nodes} nodes in turn, as a deploy does it: its new process on the same port (\`server.reusePort\`), then
SIGTERM to the old one, which stops listening, takes its routes out of Redis and closes its clients with 1001 in
batches; the next node once it has exited. The clients come back as the SDK does (0-1 s after a 1001, 1-5 s after
a refused attempt), to the same port: the new process. Then ${n(x.named)} of them, spread over every node, are named
once each (1,000/s).

![clients during the rolling restart](scale-restart.svg)

| nodes | the roll took, s | a node's drain, s (median) | clients dropped | back | not back | all back after the first drop, s | away p50 / p99, ms | named after | not told |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| ${x.nodes} | ${s1(x.rollS)} | ${s1(x.drainsS.toSorted((a, b) => a - b)[Math.floor(x.drainsS.length / 2)])} | ${n(x.dropped)} | ${n(x.back)} | **${n(x.away)}** | ${s1(x.allBackS)} | ${n(x.awayMs.p50)} / ${n(x.awayMs.p99)} | ${n(x.named)} | **${n(x.lost)}** |
`;
}

function leaveSection(r: ScaleResults): string {
  const x = r.leave;
  if (!x) return '';
  return `## Every client leaves at once

The ${n(x.clients)} held clients dropped in the same moment (a TCP reset each). The nodes had closed every socket
after **${s1(x.socketsClosedS)} s**, and Redis held nothing of them after **${s1(x.redisCleanS)} s** (the reference: 23.4 s
and 29.1 s for 596,916).
`;
}

function charts(r: ScaleResults, out: string, slopes: PerClient | undefined): void {
  // A point every few seconds at most: a long run's chart stays light.
  const step = Math.ceil(r.series.length / 400);
  const series = r.series.filter((_, i) => i % step === 0);
  const t = (reading: Reading): number => Math.round(reading.t / 1000);
  const line = (name: string, value: (reading: Reading) => number): { name: string; points: Array<[number, number]> } =>
    ({ name, points: series.map((reading) => [t(reading), Math.round(value(reading) / 1024)]) });
  writeFileSync(`${out}/scale-clients.svg`, lineChart('Clients connected and registered', 's since the run began', 'clients',
    [{ name: 'held clients', points: series.map((reading) => [t(reading), reading.clients]) }]));
  writeFileSync(`${out}/scale-memory.svg`, lineChart('Memory during the run', 's since the run began', 'MB', [
    line('machine, used', usedKb), line('nodes (anon)', (x) => x.nodes.anonKb), line('kernel', (x) => kernelKb(x.kernel)),
    line('load generator (anon)', (x) => x.loadgen.anonKb), line('Redis', (x) => x.redis.usedMemory / 1024), line('available', (x) => x.machine.availableKb),
  ]));
  if (slopes) {
    writeFileSync(`${out}/scale-cost.svg`, barChart('What a client costs, by part', 'KB per client', [
      ['nodes', slopes.nodeRssKb], ['Redis', slopes.redisKb], ['kernel, node end', slopes.kernelKb / 2],
      ['kernel, client end', slopes.kernelKb / 2], ['load generator', slopes.loadgenKb], ['in all, machine', slopes.machineKb],
    ]));
  }
  if (r.restart && r.restart.series.length > 0) {
    writeFileSync(`${out}/scale-restart.svg`, lineChart('Clients during the rolling restart', 's since the first drop', 'clients connected and registered',
      [{ name: 'held clients', points: r.restart.series }]));
  }
}

export function writeScaleReport(r: ScaleResults, out: string): void {
  const slopes = perClient(r.levels);
  charts(r, out, slopes);
  const rest = r.levels[0];
  const full = r.levels.at(-1);
  const nodesAtRest = rest && rest.nodes.processes > 0 ? rest.nodes : undefined;
  const text = `# Scale on one machine: ${n(r.held)} clients

Produced by \`${r.command}\` (\`make scale CLIENTS=${r.plan.options.clients}\`) from ${r.startedAt} to ${r.endedAt ?? '?'}, commit ${r.commit}, on
${r.machine}. The load generator runs on the same machine as the fleet (the reference had a second one): its
memory and its half of every connection's kernel memory count against this machine, not against the fleet's figures.
Every figure, a reading a second and each load generator's output are in [scale.json](scale.json).
${r.errors.length > 0 ? `\n**Errors:** ${r.errors.join('; ')}\n` : ''}
${targets(r, slopes)}

The run stopped adding clients because: **${r.stoppedBy ?? '?'}** (\`target\`: it reached ${n(r.plan.options.clients)}; \`memory\`: MemAvailable fell
under ${r.plan.options.reservePct}% of the memory; \`failures\`: clients stopped getting in; \`time\`: --max-minutes).

## The plan, as printed before the run

\`\`\`text
${r.planText.trimEnd()}
\`\`\`

Kernel settings raised for the run and written back after it: ${r.sysctls.length === 0 ? 'none' : r.sysctls.map((s) => `\`${s.key}\` ${s.from} → ${s.to}`).join(', ')}.
Nodes run \`node ${r.nodeArgs.join(' ')} packages/gateway/src/main.ts\` with \`HERALD_CONFIG=bench/scale.yaml\`, \`HERALD_REUSE_PORT=1\`,
\`NODE_COMPILE_CACHE\` (every process of the run shares one compile cache) and \`REDIS_URL\`; \`--expose-gc\` and bench/gc-preload.ts
let the run collect garbage in every node and worker before it samples a level.

## How many clients fit

![clients over time](scale-clients.svg)

![memory over time](scale-memory.svg)

Clients connect ${n(r.plan.options.rate)} a second, level after level, each with both tokens and a subscription of its own; at each
level every process collects its garbage twice and the run waits ${r.plan.options.settleS} s, then samples. MB; nodes and the load
generator as their own memory (anonymous: heap, stacks, buffers), since the Node.js binary's pages (~45 MB a process)
are shared by all of them through the page cache; the nodes' RSS as \`ps\` shows it beside. Kernel: slab (every socket,
both ends of a loopback connection), socket buffers, page tables and stacks. The rest: the system and anything else
running, and the page cache the processes' code is in.

${levelsTable(r.levels)}
${nodesAtRest ? `\nA node at rest: ${mb(nodesAtRest.rssKb / nodesAtRest.processes)} MB RSS, ${mb(nodesAtRest.anonKb / nodesAtRest.processes)} MB of its own (anon), ${mb((nodesAtRest.pssKb ?? 0) / nodesAtRest.processes)} MB proportional (Pss).` : ''}
${full && rest && full !== rest ? `\n### Memory with every client\n\n${fullTable(rest, full)}\n` : ''}

${slopes ? `${costTable(slopes)}\n\n![cost per client by part](scale-cost.svg)\n\n${projection(r, slopes)}` : ''}
${withEveryone(r)}
${restartSection(r)}
${leaveSection(r)}
## Commands

The load generator's own runs, as one would type them (the held clients are wsload workers driven by bench/scale.ts):

\`\`\`sh
${r.commands.join('\n')}
\`\`\`
`;
  writeFileSync(`${out}/scale.md`, text.replace(/\n{3,}/g, '\n\n'));
}
