/**
 * What a scale run (bench/scale.ts) measured, as written to scale.json, and the arithmetic on it that the report
 * and the next run's plan share: what a client costs each part (slopes between levels), and where the machine's
 * memory would let the fleet go with its load generator here or elsewhere.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { LatencySummary } from '@herald/loadgen';
import { kernelKb, type Reading } from './scale-memory.ts';
import type { Costs, Plan } from './scale-plan.ts';

/** A level: the reading after two forced collections in every process, and what the nodes and Redis counted. */
export interface Level extends Reading {
  connections: number;
  subscriptions: number;
  redisKeys: number;
  /** Clients of the load generator that never got ready, so far. */
  failed: number;
  /** Clients a second while this level filled, as the clients saw it. */
  fillRate?: number;
}

export interface BroadcastResult {
  told: number;
  of: number;
  /** The emit call's answer, and the clients' reads (from the call's write), ms. */
  answeredMs: number;
  firstMs: number;
  halfMs: number;
  lastMs: number;
  /** The fleet's sweeps while it ran (every node's counters, added up); absent in runs from before they were read. */
  sweeps?: FleetSweeps;
}

/** Lapsed nodes spared (once per node and sweep lock), live or dead nodes' routes swept, nodes that wrote their routes again. */
export interface FleetSweeps {
  spared: number;
  sweptRoutes: number;
  resyncs: number;
}

export interface ScaleResults {
  command: string;
  startedAt: string;
  endedAt?: string;
  commit: string;
  machine: string;
  plan: Omit<Plan, 'options'> & { options: Plan['options'] };
  planText: string;
  nodeArgs: string[];
  levels: Level[];
  stoppedBy?: 'target' | 'memory' | 'failures' | 'time' | 'error' | 'interrupted';
  held?: number;
  notify: Record<string, { delivery: LatencySummary; notificationsPerSecond: number; expected: number; missing: number; command: string }>;
  subscription?: { clients: number; accepted: number; refused: number; seconds: number; before: Level; after: Level };
  broadcasts: BroadcastResult[];
  restart?: {
    nodes: number; rollS: number; dropped: number; back: number; away: number; allBackS: number | null;
    awayMs: LatencySummary; named: number; received: number; lost: number; drainsS: number[]; series: Array<[number, number]>;
  };
  leave?: { clients: number; socketsClosedS: number; redisCleanS: number };
  sysctls: Array<{ key: string; from: string; to: string }>;
  series: Reading[];
  commands: string[];
  errors: string[];
}

export interface PerClient {
  from: Level;
  to: Level;
  /** KB per client more, between the two levels. */
  nodeRssKb: number;
  nodeAnonKb: number;
  redisKb: number;
  /** Both ends of each loopback connection. */
  kernelKb: number;
  loadgenKb: number;
  /** MemTotal − MemAvailable: everything on the machine. */
  machineKb: number;
}

/** Per client between the first level with at least a quarter of the last level's clients and the last (as the reference: 200k to 600k of 800k). */
export function perClient(levels: readonly Level[]): PerClient | undefined {
  const to = levels.at(-1);
  const from = to && levels.find((level) => level.clients > 0 && level.clients >= to.clients / 4 && level !== to);
  if (!to || !from) return undefined;
  const slope = (value: (level: Level) => number): number => (value(to) - value(from)) / (to.clients - from.clients);
  return {
    from, to,
    nodeRssKb: slope((l) => l.nodes.rssKb),
    nodeAnonKb: slope((l) => l.nodes.anonKb),
    redisKb: slope((l) => l.redis.usedMemory / 1024),
    kernelKb: slope((l) => kernelKb(l.kernel)),
    // Its own memory, not RSS: a level may start workers, and each maps the Node.js binary's pages, there once.
    loadgenKb: slope((l) => l.loadgen.anonKb),
    machineKb: slope((l) => l.machine.totalKb - l.machine.availableKb),
  };
}

/** The next plan's costs from a run's results: its per-client slopes and its processes' base memory. */
export function costsFrom(file: string): Costs | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const results = JSON.parse(readFileSync(file, 'utf8')) as ScaleResults;
    const slopes = perClient(results.levels);
    const loaded = results.levels.at(-1);
    if (!slopes || !loaded || loaded.nodes.processes === 0 || loaded.loadgen.processes === 0) return undefined;
    // A process's base: what its part held at the last level less its clients' share (never below nothing: where a
    // level started processes, their bases are already in the slope).
    const base = (kb: number, perClientKb: number, processes: number): number => Math.max(0, (kb - loaded.clients * perClientKb) / processes);
    return {
      nodeBaseKb: base(loaded.nodes.anonKb, slopes.nodeAnonKb, loaded.nodes.processes),
      nodeKbPerClient: slopes.nodeAnonKb,
      redisKbPerClient: slopes.redisKb,
      kernelKbPerClient: slopes.kernelKb,
      loadgenBaseKb: base(loaded.loadgen.anonKb, slopes.loadgenKb, loaded.loadgen.processes),
      loadgenKbPerClient: slopes.loadgenKb,
    };
  } catch {
    return undefined;
  }
}

export interface Projection {
  /** What the machine holds that is neither the fleet nor the load generator (the system, other processes), KB. */
  restKb: number;
  /** KB a node process costs with no client (its anonymous memory), and the clients a node holds. */
  nodeBaseKb: number;
  perNode: number;
  /** Per client, with the load generator elsewhere: node, Redis, and the node's end of the connection. */
  serverKbPerClient: number;
  /** Memory for `clients` on this machine with the load generator elsewhere, KB, and the most that would fit. */
  serverKb(clients: number): number;
  fitsServerOnly: number;
}

/**
 * Where the fleet would be with its load generator on another machine, as the reference ran: the nodes (their
 * base for each node the clients need, and their share per client), Redis, half the kernel's per-connection memory
 * (only the node's end of each connection), and what was on the machine before the run; within `usablePct` of it.
 */
export function project(results: ScaleResults, usablePct: number): Projection | undefined {
  const slopes = perClient(results.levels);
  const rest = results.levels[0];
  if (!slopes || !rest || rest.nodes.processes === 0) return undefined;
  const used = rest.machine.totalKb - rest.machine.availableKb;
  const restKb = used - rest.nodes.anonKb - rest.redis.rssKb - rest.loadgen.anonKb;
  const nodeBaseKb = rest.nodes.anonKb / rest.nodes.processes;
  const perNode = results.plan.perNode;
  const serverKbPerClient = slopes.nodeAnonKb + slopes.redisKb + slopes.kernelKb / 2;
  const serverKb = (clients: number): number => restKb + rest.redis.rssKb + Math.ceil(clients / perNode) * nodeBaseKb + clients * serverKbPerClient;
  const usable = (rest.machine.totalKb * usablePct) / 100;
  // The base per node spread over its clients: each client costs serverKbPerClient + nodeBaseKb / perNode.
  const fitsServerOnly = Math.floor((usable - restKb - rest.redis.rssKb) / (serverKbPerClient + nodeBaseKb / perNode));
  return { restKb, nodeBaseKb, perNode, serverKbPerClient, serverKb, fitsServerOnly };
}
