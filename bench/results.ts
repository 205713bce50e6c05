/**
 * A run's results and their files: results.json holds the figures, memory levels, errors, commands and each load
 * run's report without its raw series; samples.json.gz holds the samples and the runs in full, for the CPU table
 * and for `--only` and `--report-only` to read back.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { LatencySummary, PerEmitFigures, ReconnectFigures, RunReport } from '@herald/loadgen';
import type { NodeFigures } from './node-watch.ts';
import type { Sample } from './procs.ts';

/** One memory level of a target: clients held, and what the server, its Redis and the kernel's slab held then. */
export interface Level { clients: number; rssKb: number; heapUsed?: number; redisUsedMemory: number; slabKb?: number }

/**
 * A load run's report: wsload's (`--json`), or peer-load's last stdout line, which has the fields of wsload's it
 * measures; a gateway's run adds what the node reported over it (bench/node-watch.ts).
 */
export interface LoadReport extends Partial<Omit<RunReport, 'latency' | 'perEmit' | 'reconnect'>> {
  latency?: Partial<Record<string, LatencySummary>>;
  perEmit?: PerEmitFigures;
  reconnect?: ReconnectFigures;
  node?: NodeFigures;
}

/** A figure's value by name, as a scenario takes them from one run (undefined: not measured in it). */
export type Taken = Record<string, number | undefined>;

/** What results.json keeps of a run: a load report, or what a scenario of its own reports (memory slopes, floors, cycles). */
export type RunRecord = LoadReport | Record<string, unknown>;

export interface Results {
  quick: boolean;
  /** When the run began; with `--only`, followed by each scenario list measured again and when. */
  startedAt: string;
  levels: number[];
  figures: Record<string, number>;
  /** Each target's memory levels (its last pass). */
  memory: Record<string, Level[]>;
  /** Keyed "<target> <scenario or step> [N]". */
  runs: Record<string, RunRecord>;
  errors: string[];
  commands: string[];
  samples: Sample[];
  /** Per failover scenario (bench/failover.ts): its clients, and [s since the first drop, clients connected and registered]. */
  reconnect?: Record<string, { clients: number; series: Array<[number, number]> }>;
}

const RESULTS = 'results.json';
const RAW = 'samples.json.gz';
/** A load report's fields left out of results.json: per-second series and what the commands and README already say. */
const RAW_FIELDS = new Set(['perSecond', 'options', 'machine', 'commandLine', 'startedAt']);

const summary = (run: RunRecord): RunRecord =>
  Object.fromEntries(Object.entries(run).filter(([field]) => !RAW_FIELDS.has(field))) as RunRecord;

/** results.json with the figures also at its top level, by name, so a reader (or CI) finds them without the layout. */
export function writeResults(dir: string, r: Results): void {
  const { samples, runs, ...rest } = r;
  const summed = Object.fromEntries(Object.entries(runs).map(([key, run]) => [key, summary(run)]));
  writeFileSync(`${dir}/${RESULTS}`, `${JSON.stringify({ ...r.figures, ...rest, runs: summed }, null, 2)}\n`);
  writeFileSync(`${dir}/${RAW}`, gzipSync(JSON.stringify({ samples, runs })));
}

/** The results of `dir`, the runs in full and the samples from samples.json.gz; undefined when there are none. */
export function readResults(dir: string): Results | undefined {
  if (!existsSync(`${dir}/${RESULTS}`)) return undefined;
  const r = JSON.parse(readFileSync(`${dir}/${RESULTS}`, 'utf8')) as Results;
  const raw = existsSync(`${dir}/${RAW}`) ? (JSON.parse(gunzipSync(readFileSync(`${dir}/${RAW}`)).toString()) as Pick<Results, 'samples' | 'runs'>) : undefined;
  return { ...r, samples: raw?.samples ?? [], runs: raw?.runs ?? r.runs };
}

/**
 * `--only` measures some scenarios again: `r` keeps the earlier run's figures, memory levels and load outputs (a
 * run of the same mode), and the runs, samples and startedAt of the scenarios `again` replace theirs.
 */
export function keepEarlierRun(r: Results, earlier: Results, again: readonly string[]): void {
  if (earlier.quick !== r.quick) return;
  Object.assign(r.figures, earlier.figures);
  Object.assign(r.memory, earlier.memory);
  // The failover scenarios measured again replace their series; the others' stay for the chart.
  if (earlier.reconnect) r.reconnect = { ...earlier.reconnect };
  // Runs are keyed, and samples tagged, "<target> <phase words...>": one that names a scenario measured again goes,
  // also those it no longer makes (a changed design).
  const measuredAgain = (label: string): boolean => again.some((name) => label.split(' ').includes(name));
  for (const [key, run] of Object.entries(earlier.runs)) {
    if (!measuredAgain(key)) r.runs[key] = run;
  }
  r.commands.push(...earlier.commands);
  r.samples.push(...earlier.samples.filter((sample) => !measuredAgain(sample.phase)));
  // "<full run>, with <scenarios> measured again on <date>, ...": a scenario list measured again replaces its own.
  const remeasured = `with ${again.join(', ')} measured again on `;
  const history = earlier.startedAt.split(', with ').map((part, i) => (i === 0 ? part : `with ${part}`));
  r.startedAt = [...history.filter((part) => !part.startsWith(remeasured)), `${remeasured}${r.startedAt}`].join(', ');
}
