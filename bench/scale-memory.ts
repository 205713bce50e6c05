/**
 * Where a scale run's memory goes, read from /proc: the nodes, the load generator, Redis, the kernel (its slab
 * holds every socket, both ends of a loopback connection) and the machine as a whole; once a second for the
 * chart, and at each level for the table.
 *
 * A process's RSS counts the pages of the node binary it maps (~45 MB), which every Node.js process shares with
 * the others through the page cache: summed over 90 processes that would count 4 GB that is there once. So each
 * part is its processes' anonymous memory (RssAnon: their heaps, stacks, buffers), with RSS beside it as `ps`
 * shows it, and at each level the proportional set size (Pss), which shares the binary out between them.
 */
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { Redis } from 'ioredis';
import { machineTicks } from './procs.ts';
import { meminfo } from './scale-plan.ts';

/** A group of processes (the nodes, the load generator), KB. */
export interface PartMemory {
  processes: number;
  rssKb: number;
  anonKb: number;
  /** At levels only (smaps_rollup walks every page: too slow for once a second over 90 processes). */
  pssKb?: number;
}

export interface KernelMemory {
  slabKb: number;
  slabUnreclaimableKb: number;
  pageTablesKb: number;
  kernelStackKb: number;
  /** Socket buffers (pages the TCP stack holds, /proc/net/sockstat `mem`). */
  tcpBuffersKb: number;
  tcpSockets: number;
}

export interface Reading {
  /** ms since the run began. */
  t: number;
  phase: string;
  clients: number;
  nodes: PartMemory;
  loadgen: PartMemory;
  redis: { usedMemory: number; rssKb: number };
  kernel: KernelMemory;
  machine: { totalKb: number; availableKb: number };
  /** The whole machine's CPU since the reading before, % of one core (200 = both of two cores). */
  cpuPct?: number;
}

function statusFields(pid: number): Record<string, number> | undefined {
  try {
    const fields: Record<string, number> = {};
    for (const match of readFileSync(`/proc/${pid}/status`, 'utf8').matchAll(/^(VmRSS|RssAnon|RssShmem):\s+(\d+)/gm)) fields[match[1]!] = Number(match[2]);
    return fields;
  } catch {
    return undefined; // exited
  }
}

function pssKb(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

export function partMemory(pids: readonly number[], withPss = false): PartMemory {
  const part: PartMemory = { processes: 0, rssKb: 0, anonKb: 0 };
  for (const pid of pids) {
    const fields = statusFields(pid);
    if (!fields) continue;
    part.processes++;
    part.rssKb += fields.VmRSS ?? 0;
    part.anonKb += (fields.RssAnon ?? 0) + (fields.RssShmem ?? 0);
    if (withPss) part.pssKb = (part.pssKb ?? 0) + pssKb(pid);
  }
  return part;
}

export function kernelMemory(): KernelMemory {
  const info = meminfo();
  const sockstat = readFileSync('/proc/net/sockstat', 'utf8');
  const tcp = /^TCP: inuse (\d+) orphan \d+ tw \d+ alloc (\d+) mem (\d+)/m.exec(sockstat);
  return {
    slabKb: info.Slab ?? 0,
    slabUnreclaimableKb: info.SUnreclaim ?? 0,
    pageTablesKb: info.PageTables ?? 0,
    kernelStackKb: info.KernelStack ?? 0,
    tcpBuffersKb: Number(tcp?.[3] ?? 0) * 4,
    tcpSockets: Number(tcp?.[2] ?? 0),
  };
}

/** The kernel's share of a reading: slab, page tables, stacks and socket buffers. */
export const kernelKb = (k: KernelMemory): number => k.slabKb + k.pageTablesKb + k.kernelStackKb + k.tcpBuffersKb;

export interface Watched {
  nodes(): number[];
  loadgen(): number[];
  redis(): { pid: number; client: Redis } | undefined;
  clients(): number;
}

async function redisMemory(watched: Watched): Promise<Reading['redis']> {
  const redis = watched.redis();
  if (!redis) return { usedMemory: 0, rssKb: 0 };
  const usedMemory = await redis.client.info('memory').then((text) => Number(/used_memory:(\d+)/.exec(text)?.[1] ?? 0), () => 0);
  return { usedMemory, rssKb: statusFields(redis.pid)?.VmRSS ?? 0 };
}

export async function reading(watched: Watched, began: number, phase: string, withPss = false): Promise<Reading> {
  const info = meminfo();
  return {
    t: Date.now() - began,
    phase,
    clients: watched.clients(),
    nodes: partMemory(watched.nodes(), withPss),
    loadgen: partMemory(watched.loadgen(), withPss),
    redis: await redisMemory(watched),
    kernel: kernelMemory(),
    machine: { totalKb: info.MemTotal!, availableKb: info.MemAvailable! },
  };
}

/** A reading a second, with the machine's CPU over that second; `phase` names what the run is doing. */
export class MemorySeries {
  readonly readings: Reading[] = [];
  phase = 'start';
  readonly #timer: NodeJS.Timeout;
  #ticks = machineTicks();

  constructor(watched: Watched, began: number, onReading: (r: Reading) => void) {
    this.#timer = setInterval(() => {
      void reading(watched, began, this.phase).then((r) => {
        const ticks = machineTicks();
        r.cpuPct = Math.round(((ticks.busy - this.#ticks.busy) / Math.max(1, ticks.total - this.#ticks.total)) * cpus().length * 1000) / 10;
        this.#ticks = ticks;
        this.readings.push(r);
        onReading(r);
      });
    }, 1000);
  }

  close(): void {
    clearInterval(this.#timer);
  }
}
