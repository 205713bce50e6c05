#!/usr/bin/env node
/**
 * Scale on one machine (`make scale CLIENTS=800000`): one redis-server and as many gateway nodes as a process's
 * open files call for, then wsload's workers add clients at a steady rate, level by level (each with both tokens
 * and a subscription of its own), and each level is sampled: every node, Redis, the kernel's socket memory, the
 * load generator, what is left. It stops adding clients at the target, or when MemAvailable falls under the
 * reserve. With every client connected: one-person notifications at 1,000/s and unpaced, broadcasts to everyone,
 * a rolling restart of every node, and every client leaving at once. Then docs/benchmarks/scale.md, scale.json and
 * the charts. `--dry-run` prints the plan and starts nothing; the plan is printed before every run too.
 *
 * Bounded: --max-minutes (default 90) in all, each wait its own timeout. Everything it starts is stopped in the
 * end, on failure and on Ctrl-C too (the nodes, Redis, the workers, any wsload), and the kernel settings it raised
 * are written back; bench/scale.sh, which `make scale` runs, also ends the whole process group if this one dies.
 * Logs in bench/.run/scale/.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describeMachine, type HoldOptions, machine, parseCommand, type PoolSnapshot, prepareRoster, WorkerPools } from '@herald/loadgen';
import { GATEWAY_NODE_ARGS, ROOT, stopAll } from './procs.ts';
import { applySysctls, COMPILE_CACHE, Fleet, restoreSysctls, warmCompileCache } from './scale-fleet.ts';
import { MemorySeries, type Watched } from './scale-memory.ts';
import { broadcastPhase, fillLevels, leavePhase, notifyRun, restartPhase, sampleLevel, type RunContext } from './scale-phases.ts';
import { ASSUMED_COSTS, formatPlan, makePlan, NOTIFY_LISTENERS, parseScaleArgs, thisMachine, USAGE } from './scale-plan.ts';
import { writeScaleReport } from './scale-report.ts';
import { costsFrom, type ScaleResults } from './scale-results.ts';

const RUN_DIR = `${ROOT}bench/.run/scale`;
/** The kernel settings' old values while they are raised (bench/scale.sh restores them if this process cannot). */
const SYSCTLS_RESTORE = `${RUN_DIR}/sysctls.restore`;
const began = Date.now();
const log = (line: string): void => void process.stderr.write(`[scale ${((Date.now() - began) / 1000).toFixed(0).padStart(5)} s] ${line}\n`);

function commit(): string {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    return dirty ? `${sha} with uncommitted changes` : sha;
  } catch {
    return 'unknown';
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer().once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function preflight(ports: number[]): Promise<void> {
  execFileSync('redis-server', ['--version']);
  const taken = [];
  for (const port of ports) if (!(await portFree(port))) taken.push(port);
  if (taken.length > 0) throw new Error(`port(s) ${taken.join(', ')} in use: choose another --port`);
}

/** What the run shares before its clients exist (RunContext without them). */
type RunBase = Omit<RunContext, 'clients' | 'roster'>;

/** The run itself; `parts` says what has started, so that the caller can stop whatever did. */
async function run(base: RunBase, parts: { clients?: WorkerPools }): Promise<void> {
  const { plan, fleet } = base;
  log(`warming the compile cache (${COMPILE_CACHE.replace(ROOT, '')})`);
  await warmCompileCache({ runDir: RUN_DIR, nodeArgs: base.results.nodeArgs }, plan.options.port + plan.nodes + 1);
  log(`starting redis-server and ${plan.nodes} nodes`);
  await fleet.start((node) => log(`${node.id} listening on ${node.port} (pid ${node.proc.child.pid})`));
  const idleKeys = await fleet.redis!.db.dbsize();
  // The held clients as wsload's fill would make them (tokens, criteria, source addresses, reconnecting as the SDK does).
  const fill = parseCommand(['fill', fleet.wsUrls.join(','), '--clients', String(plan.options.clients), '--first', String(NOTIFY_LISTENERS),
    '--register', 'announcements', '--per-client', '--reconnect', '--per-address', String(plan.options.perAddress),
    '--max-pending', String(plan.options.maxPending)]) as HoldOptions;
  const roster = await prepareRoster(fill, fill.wsUrl);
  const { first, clients: count, rate, maxPending, perAddress, timeoutMs, reconnect } = fill;
  const clients = new WorkerPools({ roster, first, count, rate, maxPending, perAddress, timeoutMs, reconnect, tallyEmits: false }, plan.perWorker);
  parts.clients = clients;
  const ctx: RunContext = { ...base, clients, roster };
  base.series.phase = 'at rest';
  ctx.results.levels.push(await sampleLevel(ctx, 'at rest', undefined));
  const held = await fillLevels(ctx);
  ctx.results.held = held;
  log(`levels done: ${held.toLocaleString('en-US')} clients held (${ctx.results.stoppedBy})`);
  const phases: Array<[string, () => Promise<void>]> = [
    ['notify paced', () => notifyRun(ctx, 'paced', ['-c', '10', '-R', '1000'], plan.options.pacedS)],
    ['notify unpaced', () => notifyRun(ctx, 'unpaced', ['-c', '100'], plan.options.unpacedS)],
    ['broadcasts', () => broadcastPhase(ctx, held)],
    ['rolling restart', () => restartPhase(ctx, held)],
    ['every client leaves', () => leavePhase(ctx, held, idleKeys)],
  ];
  for (const [name, phase] of phases) {
    if (ctx.signal.aborted) break;
    try {
      await phase();
    } catch (error) {
      ctx.results.errors.push(`${name}: ${(error as Error).message}`);
      log(`${name} failed: ${(error as Error).message}`);
    }
  }
}

async function main(): Promise<number> {
  if (process.argv.includes('--help')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const options = parseScaleArgs(process.argv.slice(2), `${ROOT}docs/benchmarks`);
  const here = thisMachine();
  const last = `${options.out}/scale.json`;
  const measured = costsFrom(last);
  const plan = makePlan(options, here, measured ?? ASSUMED_COSTS, measured ? `as measured by the run in ${last.replace(ROOT, '')}` : 'assumed');
  const command = `node bench/scale.ts ${process.argv.slice(2).join(' ')}`.trim();
  const header = `${command}\n${describeMachine(machine())}\n${new Date().toISOString()}, commit ${commit()}\n`;
  const planText = formatPlan(plan);
  process.stderr.write(`${header}\n${planText}\n`);
  if (options.dryRun) return 0;
  await preflight(Array.from({ length: plan.nodes + 2 }, (_, i) => options.port + i));
  rmSync(RUN_DIR, { recursive: true, force: true });
  mkdirSync(RUN_DIR, { recursive: true });
  mkdirSync(options.out, { recursive: true });
  // Every process of the run inherits it: the nodes, the workers, wsload (see scale-fleet.ts).
  process.env.NODE_COMPILE_CACHE = COMPILE_CACHE;
  const gc = ['--expose-gc', '--import', `${ROOT}bench/gc-preload.ts`];
  const nodeArgs = [...gc, ...(options.nodeArgs ?? GATEWAY_NODE_ARGS)];
  const results: ScaleResults = {
    command, startedAt: new Date(began).toISOString(), commit: commit(), machine: describeMachine(machine()), plan, planText, nodeArgs,
    levels: [], notify: {}, broadcasts: [], sysctls: [], series: [], commands: [], errors: [],
  };
  const changed = applySysctls(plan.sysctls, log, SYSCTLS_RESTORE);
  results.sysctls = changed.map((s) => ({ key: s.key, from: s.current, to: s.wanted }));
  const aborted = new AbortController();
  const stopFor = (why: 'time' | 'interrupted') => () => {
    if (aborted.signal.aborted) return;
    log(why === 'time' ? `${options.maxMinutes} min are up: stopping` : 'interrupted: stopping and cleaning up (Ctrl-C again to leave at once)');
    // A stop after the levels (during the phases) leaves their reason as it was, and is told among the errors.
    if (results.stoppedBy === undefined) results.stoppedBy = why;
    else results.errors.push(`${why === 'time' ? `the ${options.maxMinutes}-minute bound` : 'an interrupt'} stopped the run during its phases`);
    aborted.abort();
  };
  const deadline = setTimeout(stopFor('time'), options.maxMinutes * 60_000);
  process.once('SIGINT', () => {
    stopFor('interrupted')();
    process.once('SIGINT', () => void stopAll().finally(() => process.exit(130)));
  });
  process.once('SIGTERM', stopFor('interrupted'));
  const fleet = new Fleet(plan, { runDir: RUN_DIR, nodeArgs });
  const parts: { clients?: WorkerPools } = {};
  const latest: { snapshot?: PoolSnapshot } = {};
  const watched: Watched = {
    nodes: () => fleet.pids(),
    loadgen: () => parts.clients?.pids() ?? [],
    redis: () => fleet.redis && { pid: fleet.redis.proc.child.pid!, client: fleet.redis.db },
    clients: () => latest.snapshot?.ready ?? 0,
  };
  const series = new MemorySeries(watched, began, () => {});
  const base: RunBase = { plan, fleet, results, series, watched, latest, runDir: RUN_DIR, began, log, signal: aborted.signal };
  let failed = false;
  try {
    const running = run(base, parts);
    running.catch(() => {});
    await Promise.race([running, new Promise((resolve) => aborted.signal.addEventListener('abort', resolve, { once: true }))]);
    await running.catch((error: unknown) => {
      if (aborted.signal.aborted) return;
      throw error;
    });
  } catch (error) {
    failed = true;
    results.stoppedBy ??= 'error';
    results.errors.push((error as Error).message);
    log(`failed: ${(error as Error).stack}`);
  } finally {
    clearTimeout(deadline);
    log('stopping everything this run started');
    await parts.clients?.close().catch(() => undefined);
    await fleet.stop().catch(() => undefined);
    await stopAll();
    series.close();
    restoreSysctls(changed, log, SYSCTLS_RESTORE);
    results.endedAt = new Date().toISOString();
    results.series = series.readings;
    writeFileSync(`${options.out}/scale.json`, `${JSON.stringify(results, null, 1)}\n`);
    writeScaleReport(results, options.out);
    log(`results: ${options.out.replace(ROOT, '')}/scale.md, scale.json, scale-*.svg`);
  }
  return failed || results.errors.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`scale: ${(error as Error).message}\n${(error as Error).message.includes('usage') ? '' : `${USAGE}\n`}`);
    process.exit(2);
  },
);
