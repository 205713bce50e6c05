/** The bench's options, parsed once from the command line by bench/run.ts; methodology: docs/benchmarks/methodology.md. */
import { parseArgs } from 'node:util';
import { ROOT } from './procs.ts';

export interface BenchOptions {
  /** `--quick`: levels 0-6k, shorter runs, each once (make bench-quick). */
  quick: boolean;
  /** `--only a,b`: just these scenarios, the earlier run's results kept for the rest. */
  only: ReadonlySet<string> | undefined;
  /** `--report-only`: README.md and the charts again from the results in outDir, nothing measured. */
  reportOnly: boolean;
  /** The memory levels: clients held. */
  levels: number[];
  churnS: number;
  /** A server started afresh is slower while it warms up: the seconds of each churn run not counted. */
  churnWarmupS: number;
  notifyS: number;
  /** The paced one-person runs' length: their figure is a p99, which a short run leaves to its few slowest. */
  pacedS: number;
  /** Emits before each notify run, not counted: the collections right after its listeners connect pause the server. */
  notifyWarmupS: number;
  /** Each churn and notify run is made this many times, each figure the median of its runs. */
  rateRuns: number;
  /** The clients connected during the notify runs (scenario 3). */
  connected: number;
  /** Scenario 4: the notify runs again with every client of the last level connected (not with --quick). */
  everyClient: number | undefined;
  /** Logs and load outputs. */
  runDir: string;
  /** results.json, README.md and the charts. */
  outDir: string;
}

export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: { quick: { type: 'boolean', default: false }, only: { type: 'string' }, 'report-only': { type: 'boolean', default: false } },
  });
  const quick = values.quick;
  const levels = quick ? [0, 2000, 6000] : [0, 2000, 6000, 10000, 14000, 18000];
  return {
    quick,
    only: values.only === undefined ? undefined : new Set(values.only.split(',')),
    reportOnly: values['report-only'],
    levels,
    churnS: quick ? 10 : 20,
    churnWarmupS: quick ? 2 : 5,
    notifyS: quick ? 5 : 10,
    pacedS: quick ? 5 : 60,
    notifyWarmupS: quick ? 1 : 2,
    rateRuns: quick ? 1 : 2,
    connected: quick ? 2000 : 10_000,
    everyClient: quick ? undefined : levels.at(-1)!,
    runDir: `${ROOT}bench/.run`,
    outDir: `${ROOT}docs/benchmarks`,
  };
}
