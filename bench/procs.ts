/**
 * The processes a bench run starts, and their sampling. Every child is recorded at spawn so that `stopAll` can
 * end exactly those pids, whatever failed on the way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** The repository's root, with a trailing slash. */
export const ROOT = new URL('..', import.meta.url).pathname;

export interface Proc { name: string; child: ChildProcess; stdout: string; exited: Promise<unknown> }

const started: Proc[] = [];
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Spawn with stderr (and stdout, also kept in memory) appended to a log file. */
export function start(name: string, command: string, args: string[], env: Record<string, string>, logFile: string): Proc {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(logFile, { flags: 'a' });
  const proc: Proc = { name, child, stdout: '', exited: once(child, 'exit') };
  child.stdout!.on('data', (chunk: Buffer) => { proc.stdout += chunk; log.write(chunk); });
  child.stderr!.pipe(log);
  started.push(proc);
  return proc;
}

/** SIGTERM (or the given signal), then SIGKILL if it is still there after `graceMs`. */
export async function stop(proc: Proc, signal: NodeJS.Signals = 'SIGTERM', graceMs = 10_000): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  proc.child.kill(signal);
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), graceMs);
  await proc.exited;
  clearTimeout(timer);
}

/** A load generator running in the background, and its report once it has exited 0. */
export interface LoadRun<Report> { proc: Proc; done: Promise<Report> }

/**
 * Start a load generator (`node script ...args`), killed after `timeoutS`. Its report is the file given as
 * `jsonFile` (wsload `--json`), or else its last line on stdout (peer-load). `done` rejects when it fails; a
 * caller that stops waiting on the way (a failed scenario) leaves no unhandled rejection behind.
 */
export function startLoad<Report>(name: string, script: string, args: string[], out: { logFile: string; timeoutS: number; jsonFile?: string }): LoadRun<Report> {
  const proc = start(name, 'node', [script, ...args], {}, out.logFile);
  const timer = setTimeout(() => void stop(proc, 'SIGKILL'), out.timeoutS * 1000);
  const done = proc.exited.then(() => {
    clearTimeout(timer);
    if (proc.child.exitCode !== 0) throw new Error(`${name} exited with ${proc.child.exitCode ?? proc.child.signalCode}; see ${out.logFile}`);
    return JSON.parse(out.jsonFile ? readFileSync(out.jsonFile, 'utf8') : proc.stdout.trim().split('\n').at(-1)!) as Report;
  });
  done.catch(() => {});
  return { proc, done };
}

/**
 * Everything started, newest first and one at a time: a server drains, writing to its Redis, before that Redis
 * stops (stopped together, the gateway logged "a Redis write failed" at every scenario's end).
 */
export async function stopAll(): Promise<void> {
  for (const proc of started.splice(0).reverse()) await stop(proc, 'SIGTERM', 5000);
}

/**
 * Poll `check` every `everyMs` until it is true, or fail after `timeoutMs`, or at once when `feeder` (the process
 * that makes it come true) has exited; answers when it was first seen true (epoch ms).
 */
export async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 200, feeder?: Proc): Promise<number> {
  for (const end = Date.now() + timeoutMs; Date.now() < end; await sleep(everyMs)) {
    try { if (await check()) return Date.now(); } catch { /* not up yet */ }
    const code = feeder?.child.exitCode ?? feeder?.child.signalCode;
    if (code != null) throw new Error(`${feeder!.name} exited (${code}) while waiting for ${what}`);
  }
  throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
}

/** A gateway node's Node.js options, as its launch commands give them (main.ts's shebang, make run, the Dockerfile). */
export const GATEWAY_NODE_ARGS = ['--no-node-snapshot', '--max-semi-space-size=16'] as const;

/** One unlabelled Prometheus figure from a gateway's /metrics; undefined when it is not there. */
export async function metric(port: number, name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1];
  return value === undefined ? undefined : Number(value);
}

/** A redis-server that keeps nothing on disk, once it accepts connections. */
export async function startRedis(name: string, port: number, logFile: string): Promise<Proc> {
  const proc = start(name, 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {}, logFile);
  // Connect only once it listens: an ioredis client that met ECONNREFUSED first would retry in the background.
  await waitFor(`${name} on ${port}`, () => proc.stdout.includes('Ready to accept'), 10_000);
  return proc;
}

export function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

/** CPU time in clock ticks, in user space and in the kernel (system calls, and the loopback's TCP work they do). */
interface Ticks { user: number; sys: number }

/**
 * utime + cutime and stime + cstime: with its children that have exited and been waited for (fields 14-17,
 * counted after the ")" that ends the command name), so they only grow as children come and go.
 */
function cpuTicks(pid: number): Ticks {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return { user: fields[11]! + fields[13]!, sys: fields[12]! + fields[14]! };
}

/**
 * A process with its live children (wsload's worker processes, the node's sandbox workers): what it costs in
 * all. Throws when the process itself has exited; a child that exits meanwhile counts 0.
 */
function familyUsage(pid: number): Ticks & { rssKb: number } {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch { /* it exited: the reads below say so */ }
  const usage = { ...cpuTicks(pid), rssKb: rssKb(pid) };
  for (const child of children) {
    try {
      const ticks = cpuTicks(child);
      usage.user += ticks.user;
      usage.sys += ticks.sys;
      usage.rssKb += rssKb(child);
    } catch { /* exited meanwhile */ }
  }
  return usage;
}

/** CPU over the last second, 100 = one core, of which `sysPct` in the kernel. */
export interface CpuShare { cpuPct: number; sysPct: number }
/** A process over the last second: its RSS and its CPU. */
export interface ProcSample extends CpuShare { rssKb: number }
/**
 * The machine's share: busy, in the kernel, and stolen, the time the hypervisor ran something else while this VM
 * had work (steal in /proc/stat): a phase with much of it measures the host, not the code. Runs recorded before
 * the sampler read steal have none.
 */
export interface MachineShare extends CpuShare { stealPct?: number }
export interface Sample { t: number; phase: string; redisUsedMemory?: number; procs: Record<string, ProcSample>; machine?: MachineShare }

/** The whole machine's CPU ticks from /proc/stat, busy (not idle or waiting for I/O) and in the kernel (system, irq, softirq). */
export function machineTicks(): { total: number; busy: number; sys: number; steal: number } {
  const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const busy = user! + nice! + system! + irq! + softirq! + steal!;
  return { total: busy + idle! + iowait!, busy, sys: system! + irq! + softirq!, steal: steal! };
}

/**
 * Once a second: RSS and CPU of each watched process with its children, the whole machine's CPU, and Redis
 * used_memory, tagged with the current phase.
 */
export class Sampler {
  readonly samples: Sample[] = [];
  phase = 'idle';
  private readonly watched = new Map<string, { pid: number; ticks: Ticks; at: number }>();
  private readonly timer: NodeJS.Timeout;
  private readonly redisUsedMemory: () => Promise<number | undefined>;
  private machine = machineTicks();

  constructor(redisUsedMemory: () => Promise<number | undefined>) {
    this.redisUsedMemory = redisUsedMemory;
    this.timer = setInterval(() => void this.sample(), 1000);
  }

  watch(name: string, pid: number): void {
    const { user, sys } = familyUsage(pid);
    this.watched.set(name, { pid, ticks: { user, sys }, at: performance.now() });
  }
  unwatch(name: string): void { this.watched.delete(name); }
  close(): void { clearInterval(this.timer); }

  private async sample(): Promise<void> {
    const sample: Sample = { t: Date.now(), phase: this.phase, procs: {} };
    for (const [name, w] of this.watched) {
      try {
        const { user, sys, rssKb: rss } = familyUsage(w.pid);
        const at = performance.now();
        // Ticks are 1/100 s: percent of a core over the interval, to one decimal.
        const pct = (ticks: number): number => Math.round((ticks / ((at - w.at) / 1000)) * 10) / 10;
        sample.procs[name] = { rssKb: rss, cpuPct: pct(user - w.ticks.user + sys - w.ticks.sys), sysPct: pct(sys - w.ticks.sys) };
        Object.assign(w, { ticks: { user, sys }, at });
      } catch { this.watched.delete(name); } // it exited
    }
    const machine = machineTicks();
    // Ticks of all cores together: the share of one core is the share of the whole times the cores.
    const ofCores = (ticks: number): number => Math.round((ticks / (machine.total - this.machine.total)) * cpus().length * 1000) / 10;
    sample.machine = {
      cpuPct: ofCores(machine.busy - this.machine.busy),
      sysPct: ofCores(machine.sys - this.machine.sys),
      stealPct: ofCores(machine.steal - this.machine.steal),
    };
    this.machine = machine;
    try { sample.redisUsedMemory = await this.redisUsedMemory(); } catch { /* redis between runs */ }
    this.samples.push(sample);
  }
}

/** The middle value, or the mean of the two middle ones; undefined for none. */
export function median(values: number[]): number | undefined {
  const sorted = values.toSorted((a, b) => a - b);
  const middle = sorted.length / 2;
  return sorted.length === 0 ? undefined : Number.isInteger(middle) ? (sorted[middle - 1]! + sorted[middle]!) / 2 : sorted[Math.floor(middle)];
}
