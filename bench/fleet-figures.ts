/**
 * bench/fleet.ts's figures: per level of the send rate, the median over its rounds of what AnyCable's broker
 * benchmark reports (docs/benchmarks/fleet.md maps each one to theirs), and, with --record, the same in
 * docs/benchmarks/results.json, added beside the other figures. Their targets: FLEET_FIGURES in report-tables.ts.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { RunReport } from '@herald/loadgen';
import { ROOT } from './procs.ts';

/**
 * One round of one level: wsload's report, each process's mean CPU over its window (100 = one core), and how many
 * times HAProxy took a node out meanwhile.
 */
export interface FleetLevel { level: number; round: number; report: RunReport; cpu: Record<string, number>; nodesTakenOut: number }

const RESULTS = `${ROOT}docs/benchmarks/results.json`;

/** The scenario itself (1×) is `fleet_`; another level `fleet_<level>x_`, its point an underscore (0.1 → `fleet_0_1x_`). */
export const prefixOf = (level: number): string => (level === 1 ? 'fleet_' : `fleet_${String(level).replace('.', '_')}x_`);

/** A round's figures by name, without the level's prefix. */
function figuresOf(r: RunReport, cpu: Record<string, number>): Record<string, number | undefined> {
  const { counts, rates, latency } = r;
  return {
    rtt_p95_ms: latency.rtt?.p95,
    broadcast_p95_ms: latency.broadcast?.p95,
    broadcast_last_p95_ms: latency.lastTold?.p95,
    history_p95_ms: latency.history?.p95,
    broadcasts_received_per_s: rates.broadcastsReceivedPerSecond,
    broadcasts_sent_per_s: rates.broadcastsSentPerSecond,
    delivered_pct: counts.expected ? (100 * (counts.received ?? 0)) / counts.expected : undefined,
    machine_cpu_pct: cpu.machine,
  };
}

/** Each level's figures, the median of its rounds; written into results.json when `record`. */
export function recordFigures(levels: readonly FleetLevel[], median: (values: number[]) => number | undefined, record: boolean): Record<string, number> {
  const rounds = new Map<string, number[]>();
  for (const { level, report, cpu } of levels) {
    for (const [name, value] of Object.entries(figuresOf(report, cpu))) {
      if (value === undefined || !Number.isFinite(value)) continue;
      const key = `${prefixOf(level)}${name}`;
      rounds.set(key, [...(rounds.get(key) ?? []), value]);
    }
  }
  const figures = Object.fromEntries([...rounds].map(([key, values]) => [key, Math.round(median(values)! * 1000) / 1000]));
  if (record) addToResults(figures);
  return figures;
}

/** Only these keys added (or replaced): the other figures, and results.json's layout, stay as they were. */
function addToResults(fleet: Record<string, number>): void {
  const json = JSON.parse(readFileSync(RESULTS, 'utf8')) as Record<string, unknown> & { figures: Record<string, number> };
  const figures = { ...json.figures, ...fleet };
  const rest = Object.fromEntries(Object.entries(json).filter(([key]) => !(key in figures)));
  writeFileSync(RESULTS, `${JSON.stringify({ ...figures, ...rest, figures }, null, 2)}\n`);
}
