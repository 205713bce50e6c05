/**
 * The plan of a scale run (bench/scale.ts): its options, and what they come to on this machine before anything
 * starts: nodes and their ports, the load generator's processes and source addresses, the levels, the kernel
 * settings the run raises, and the memory it expects at its size. `make scale CLIENTS=N DRY_RUN=1` prints it.
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';

export interface ScaleOptions {
  /** Clients to reach, each with both tokens and a subscription of its own; the run stops earlier if memory runs short. */
  clients: number;
  /** Clients connected a second while a level fills. */
  rate: number;
  /** Clients connecting at once at most (wsload --max-pending): past it the fill slows to what the fleet takes. */
  maxPending: number;
  /** Most clients per node: the open-file limit of a process, less its own files, the notify runs' and restarts' room. */
  perNode: number;
  /** Most clients per load generator process (the same limit). */
  perWorker: number;
  /** Clients per source address (127.0.0.2, ...): the kernel's search for a free port to bind stays cheap below ~5,000. */
  perAddress: number;
  /** Redis on this port, node i on port + i. */
  port: number;
  /** Seconds each level waits before it is sampled (after two forced collections in every process). */
  settleS: number;
  /** MemAvailable below this share of MemTotal stops the clients coming (and leaves room for what follows). */
  reservePct: number;
  /** Seconds of one-person notifications at 1,000/s (delivery p50/p99), and of as many as the fleet takes. */
  pacedS: number;
  unpacedS: number;
  /** Broadcasts to every client, one after another. */
  broadcasts: number;
  /** Clients named once each after the rolling restart (none may be lost). */
  afterRestart: number;
  /** The whole run is stopped (and cleaned up) after this. */
  maxMinutes: number;
  /** The node processes' Node.js options (default: the gateway's launch options, bench/procs.ts). */
  nodeArgs: string[] | undefined;
  out: string;
  dryRun: boolean;
}

const DEFAULTS = {
  clients: 60_000, rate: 2000, 'max-pending': 2000, 'per-node': 19_000, 'per-worker': 19_000, 'per-address': 2000, port: 26100, settle: 10,
  'reserve-pct': 5, paced: 60, unpaced: 20, broadcasts: 3, 'after-restart': 20_000, 'max-minutes': 90,
} as const;

export const USAGE = `usage: node bench/scale.ts [--clients N] [--rate R] [--max-pending ${DEFAULTS['max-pending']}] [--dry-run] [--out DIR] [--node-args="ARGS"]
  [--per-node ${DEFAULTS['per-node']}] [--per-worker ${DEFAULTS['per-worker']}] [--per-address ${DEFAULTS['per-address']}] [--port ${DEFAULTS.port}]
  [--settle ${DEFAULTS.settle}] [--reserve-pct ${DEFAULTS['reserve-pct']}] [--paced ${DEFAULTS.paced}] [--unpaced ${DEFAULTS.unpaced}]
  [--broadcasts ${DEFAULTS.broadcasts}] [--after-restart ${DEFAULTS['after-restart']}] [--max-minutes ${DEFAULTS['max-minutes']}]`;

export function parseScaleArgs(argv: string[], defaultOut: string): ScaleOptions {
  const numeric = Object.keys(DEFAULTS) as Array<keyof typeof DEFAULTS>;
  const { values } = parseArgs({
    args: argv,
    options: {
      ...Object.fromEntries(numeric.map((name) => [name, { type: 'string', default: String(DEFAULTS[name]) }])),
      'node-args': { type: 'string' },
      out: { type: 'string', default: defaultOut },
      'dry-run': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const given = values as Record<string, string | boolean | undefined>;
  const n = (name: keyof typeof DEFAULTS, min: number): number => {
    const value = Number(given[name]);
    if (!Number.isFinite(value) || value < min) throw new Error(`--${name} must be a number >= ${min}, got ${String(given[name])}\n${USAGE}`);
    return value;
  };
  const nodeArgs = values['node-args'] as string | undefined;
  return {
    clients: Math.floor(n('clients', 100)), rate: n('rate', 1), maxPending: Math.floor(n('max-pending', 1)), perNode: n('per-node', 100), perWorker: n('per-worker', 100),
    perAddress: n('per-address', 100), port: n('port', 1024), settleS: n('settle', 0), reservePct: n('reserve-pct', 1),
    pacedS: n('paced', 1), unpacedS: n('unpaced', 1), broadcasts: n('broadcasts', 0), afterRestart: n('after-restart', 0),
    maxMinutes: n('max-minutes', 1), nodeArgs: nodeArgs === undefined ? undefined : nodeArgs.split(/\s+/).filter(Boolean),
    out: values.out as string, dryRun: values['dry-run'] === true,
  };
}

/** What the plan needs of this machine. */
export interface Machine {
  cores: number;
  memTotalKb: number;
  memAvailableKb: number;
  /** A process's open-file limit (soft and hard: this machine's cannot be raised). */
  openFiles: number;
}

/** /proc/meminfo as KB by field. */
export function meminfo(): Record<string, number> {
  const fields: Record<string, number> = {};
  for (const line of readFileSync('/proc/meminfo', 'utf8').split('\n')) {
    const match = /^(\w+(?:\(\w+\))?):\s+(\d+)/.exec(line);
    if (match) fields[match[1]!] = Number(match[2]);
  }
  return fields;
}

export function thisMachine(): Machine {
  const info = meminfo();
  const limit = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
  return { cores: cpus().length, memTotalKb: info.MemTotal!, memAvailableKb: info.MemAvailable!, openFiles: Number(limit ?? 1024) };
}

/**
 * What a client and a process cost, KB, for the expected memory: the last run's figures (results JSON) when there
 * is one, else ASSUMED_COSTS, rounded up from the first small runs on this machine (docs/benchmarks/scale.md).
 * A process's base is what it holds under load with no client counted: a node's young generation, grown, is in it.
 */
export interface Costs {
  nodeBaseKb: number;
  nodeKbPerClient: number;
  redisKbPerClient: number;
  /** Both ends of a loopback connection: the load generator's socket and the node's. */
  kernelKbPerClient: number;
  loadgenBaseKb: number;
  loadgenKbPerClient: number;
}

export const ASSUMED_COSTS: Readonly<Costs> = {
  nodeBaseKb: 100_000, nodeKbPerClient: 3.6, redisKbPerClient: 0.1, kernelKbPerClient: 10, loadgenBaseKb: 35_000, loadgenKbPerClient: 2.6,
};

/** A kernel setting the run raises when it is below what the run needs; restored at the end. */
export interface Sysctl {
  key: string;
  current: string;
  wanted: string;
  raise: boolean;
  why: string;
}

export interface Plan {
  options: ScaleOptions;
  machine: Machine;
  nodes: number;
  perNode: number;
  perWorker: number;
  nodePorts: [number, number];
  workers: number;
  addresses: { count: number; first: string; last: string };
  levels: number[];
  sysctls: Sysctl[];
  costs: Costs;
  /** Where the costs come from: a run's results file, or the assumed ones. */
  costsFrom: string;
  expectedKb: { nodes: number; redis: number; kernel: number; loadgen: number; total: number; room: number };
}

/** The notify runs' listeners: clients 0..999 are theirs, the held clients are 1000 and up. */
export const NOTIFY_LISTENERS = 1000;

/** Client counts at which the run stops and samples: as the reference's 10k, 50k, 100k, 200k, ... of 800k. */
export function levelsOf(clients: number): number[] {
  const fractions = [1 / 80, 1 / 16, ...Array.from({ length: 8 }, (_, i) => (i + 1) / 8)];
  const levels = fractions.map((f) => Math.max(100, Math.round((clients * f) / 100) * 100));
  levels[levels.length - 1] = clients;
  return [...new Set(levels)].filter((level) => level <= clients);
}

/** The n-th source address (0: 127.0.0.2), as wsload numbers them (packages/loadgen/src/pool.ts). */
function address(n: number): string {
  const k = n + 2;
  return `127.${(k >> 16) & 255}.${(k >> 8) & 255}.${k & 255}`;
}

function readSysctl(key: string): string | undefined {
  try {
    return readFileSync(`/proc/sys/${key.replaceAll('.', '/')}`, 'utf8').trim().replace(/\s+/g, ' ');
  } catch {
    return undefined;
  }
}

/** A numeric setting (the last of its values for a list such as tcp_mem) raised to at least `wanted`. */
function atLeast(key: string, wanted: number, why: string, read = readSysctl): Sysctl | undefined {
  const current = read(key);
  if (current === undefined) return undefined;
  const values = current.split(' ').map(Number);
  if (values.at(-1)! >= wanted) return { key, current, wanted: current, raise: false, why };
  values[values.length - 1] = wanted;
  return { key, current, wanted: values.join(' '), raise: true, why };
}

const PAGE_KB = 4;

/** The kernel settings of a run of `clients` (both ends of every connection are on this machine). */
export function sysctlsFor(clients: number, read = readSysctl): Sysctl[] {
  const sockets = 2 * clients;
  const memPressure = read('net.ipv4.tcp_mem')?.split(' ').map(Number);
  const tcpMem: Sysctl | undefined = memPressure && (() => {
    // A broadcast leaves a frame (~1-2 KB of socket buffer) on every connection at once: pressure and max above that.
    const [min, pressure, max] = memPressure as [number, number, number];
    const wantPressure = Math.max(pressure, Math.ceil((clients * 2) / PAGE_KB));
    const wantMax = Math.max(max, Math.ceil((clients * 4) / PAGE_KB));
    const current = memPressure.join(' ');
    const wanted = `${min} ${wantPressure} ${wantMax}`;
    return { key: 'net.ipv4.tcp_mem', current, wanted, raise: wanted !== current, why: 'pages of socket buffers: a broadcast puts a frame on every connection at once' };
  })();
  return [
    atLeast('fs.file-max', sockets + 200_000, 'open files on the machine: two sockets per client (both ends are here)', read),
    atLeast('net.netfilter.nf_conntrack_max', sockets + 100_000, 'tracked connections, if anything makes Linux track loopback ones', read),
    tcpMem,
    atLeast('net.core.somaxconn', 4096, "a node's accept queue (server.backlog, 4096) is capped by it", read),
    atLeast('net.core.netdev_max_backlog', clients > 100_000 ? 16_384 : 1000, 'loopback packets queued per CPU: a broadcast writes every socket at once', read),
  ].filter((sysctl): sysctl is Sysctl => sysctl !== undefined);
}

export function makePlan(options: ScaleOptions, machine: Machine, costs: Costs = ASSUMED_COSTS, costsFrom = 'assumed'): Plan {
  const held = options.clients;
  const perNode = Math.min(options.perNode, machine.openFiles - 1000);
  const perWorker = Math.min(options.perWorker, machine.openFiles - 500);
  const nodes = Math.ceil(held / perNode);
  const workers = Math.ceil(held / perWorker);
  const count = Math.ceil((NOTIFY_LISTENERS + held) / options.perAddress);
  const expected = {
    nodes: nodes * costs.nodeBaseKb + held * costs.nodeKbPerClient,
    redis: 10_000 + held * costs.redisKbPerClient,
    kernel: held * costs.kernelKbPerClient,
    loadgen: (workers + 2) * costs.loadgenBaseKb + held * costs.loadgenKbPerClient,
  };
  const total = expected.nodes + expected.redis + expected.kernel + expected.loadgen;
  const room = machine.memAvailableKb - (machine.memTotalKb * options.reservePct) / 100;
  return {
    options, machine, nodes, perNode: Math.ceil(held / nodes), perWorker, nodePorts: [options.port + 1, options.port + nodes], workers,
    addresses: { count, first: address(0), last: address(count - 1) }, levels: levelsOf(held), sysctls: sysctlsFor(held), costs, costsFrom,
    expectedKb: { ...expected, total, room },
  };
}

const gb = (kb: number): string => `${(kb / 1048576).toFixed(1)} GB`;
const n = (value: number): string => Math.round(value).toLocaleString('en-US');

export function formatPlan(plan: Plan): string {
  const { options: o, machine: m, expectedKb: e } = plan;
  const lines = [
    `machine      ${m.cores} cores, ${gb(m.memTotalKb)} (${gb(m.memAvailableKb)} available), ${n(m.openFiles)} open files per process`,
    `clients      ${n(o.clients)}, each with both tokens and its own subscription, ${n(o.rate)}/s (at most ${n(o.maxPending)} connecting at once), levels ${plan.levels.map(n).join(', ')}`,
    `             stop early when MemAvailable < ${o.reservePct}% of MemTotal (${gb((m.memTotalKb * o.reservePct) / 100)})`,
    `redis        one redis-server on 127.0.0.1:${o.port}`,
    `nodes        ${plan.nodes} on 127.0.0.1:${plan.nodePorts[0]}-${plan.nodePorts[1]}, ~${n(plan.perNode)} clients each (at most ${n(o.perNode)}); client i to node (i mod ${plan.nodes})`,
    `             each with server.reusePort: a restart starts the new process on the same port, then stops the old one`,
    `load         ${plan.workers} wsload worker processes (at most ${n(o.perWorker)} clients each), driven by this process`,
    `addresses    ${n(plan.addresses.count)} source addresses ${plan.addresses.first} .. ${plan.addresses.last}, ${n(o.perAddress)} clients each ` +
      '(ip_local_port_range is left as it is: each address needs far fewer ports than it has)',
    'sysctl       ' + (plan.sysctls.map((s) => `${s.key}: ${s.raise ? `${s.current} -> ${s.wanted}` : `${s.current} (enough)`}  [${s.why}]`).join('\n             ') || 'none readable'),
    `expected     nodes ${gb(e.nodes)}, Redis ${gb(e.redis)}, kernel ${gb(e.kernel)}, load generator ${gb(e.loadgen)}: ${gb(e.total)} ` +
      `of the ${gb(e.room)} there is room for: ${e.total <= e.room ? 'fits' : `does not fit (about ${n((o.clients * e.room) / e.total)} clients would)`}`,
    `             (${plan.costsFrom}; per client: node ${plan.costs.nodeKbPerClient.toFixed(2)} KB, Redis ${plan.costs.redisKbPerClient.toFixed(2)}, kernel ${plan.costs.kernelKbPerClient.toFixed(2)} for both ends, ` +
      `load generator ${plan.costs.loadgenKbPerClient.toFixed(2)}; per process: node ${n(plan.costs.nodeBaseKb / 1024)} MB, load generator ${n(plan.costs.loadgenBaseKb / 1024)} MB)`,
    `then         one-person notifications at 1,000/s for ${o.pacedS} s and unpaced for ${o.unpacedS} s, ${o.broadcasts} broadcast(s) to everyone, ` +
      `a rolling restart of every node (${n(Math.min(o.afterRestart, o.clients))} clients named once after it), every client leaving at once`,
    `bounded      ${o.maxMinutes} min in all; results in ${o.out}/scale.md, scale.json and scale-*.svg`,
  ];
  return `${lines.join('\n')}\n`;
}
