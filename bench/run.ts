#!/usr/bin/env node
/**
 * The benchmark suite (issue 4): for the gateway and its two peers in turn, start a fresh redis-server and the
 * server, run the scenarios against it, sample it once a second, stop it; then the scenarios that start their own
 * processes. Then results.json, samples.json.gz, README.md and the charts in docs/benchmarks/ (how they are
 * measured: docs/benchmarks/methodology.md).
 *
 *   node bench/run.ts --quick     levels 0, 2k, 6k; churn 10 s; notify 5 s     (make bench-quick)
 *   node bench/run.ts             levels 0 .. 18k;  churn 20 s; notify 10 s; each twice, medians (make bench)
 *   node bench/run.ts --only restart,kill [--quick]    just these scenarios (their names: bench/scenarios.ts),
 *                                 the earlier run's results kept for the others
 *   node bench/run.ts --report-only    README.md and the charts again from docs/benchmarks' results
 *
 * Ports 25000+ (below the ephemeral range). Logs in bench/.run/. Everything started is stopped in `finally`.
 */
import { mkdirSync } from 'node:fs';
import { BenchContext, type Target } from './context.ts';
import { parseBenchOptions } from './options.ts';
import { stopAll } from './procs.ts';
import { writeReport } from './report.ts';
import { keepEarlierRun, readResults, writeResults } from './results.ts';
import { SCENARIOS, type OwnScenario, type Scenario } from './scenarios.ts';

const wantedOf = (ctx: BenchContext, scenario: Scenario): boolean => scenario.names.some((name) => ctx.wanted(name));

/** A target's scenarios on its own server and Redis; a failed one is listed and the next runs. */
async function benchTarget(ctx: BenchContext, t: Target): Promise<void> {
  try {
    await ctx.startTarget(t);
    for (const scenario of SCENARIOS) {
      if (scenario.on === 'own processes' || (scenario.on === 'gateway' && t.name !== 'gateway') || !wantedOf(ctx, scenario)) continue;
      try { await scenario.run(ctx, t); } catch (error) { ctx.failed(`${t.name} ${scenario.names[0]}`, error); }
    }
  } catch (error) {
    ctx.failed(t.name, error);
  } finally {
    await ctx.stopTarget(t);
  }
}

async function runBench(ctx: BenchContext): Promise<void> {
  const { options, results } = ctx;
  if (options.only) {
    const earlier = readResults(options.outDir);
    if (earlier) keepEarlierRun(results, earlier, [...options.only]);
  }
  const own = SCENARIOS.filter((scenario): scenario is OwnScenario => scenario.on === 'own processes');
  const targetsWanted = SCENARIOS.some((scenario) => scenario.on !== 'own processes' && wantedOf(ctx, scenario));
  try {
    for (const t of targetsWanted ? ctx.targets : []) {
      console.error(`bench: ${t.name}`);
      await benchTarget(ctx, t);
    }
    for (const scenario of own.filter((each) => wantedOf(ctx, each))) {
      console.error(`bench: ${scenario.names[0]}`);
      await scenario.run(ctx);
    }
  } finally {
    ctx.sampler.close();
    await stopAll();
    results.samples.push(...ctx.sampler.samples);
    // A command run twice (each rate run, an earlier run kept by --only) is listed once.
    results.commands = [...new Set(results.commands)];
    writeResults(options.outDir, results);
    writeReport(results, options.outDir);
    console.error(`bench: figures ${JSON.stringify(results.figures)}${results.errors.length ? `\nbench: errors ${results.errors.join('; ')}` : ''}`);
  }
}

const options = parseBenchOptions(process.argv.slice(2));
mkdirSync(options.runDir, { recursive: true });
mkdirSync(options.outDir, { recursive: true });
if (options.reportOnly) {
  const results = readResults(options.outDir);
  if (!results) throw new Error(`no results in ${options.outDir}`);
  writeReport(results, options.outDir);
} else {
  const stopOnSignal = (): void => void stopAll().finally(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  await runBench(new BenchContext(options));
}
