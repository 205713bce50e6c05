/**
 * The end of every run: autocannon-style tables (latency percentiles, per-second throughput), the counts,
 * the command line and the machine on stdout; and, with --json, every figure as one JSON document for a
 * bench suite to collect.
 */
import { writeFileSync } from 'node:fs';
import type { PerEmitFigures } from './emit-tallies.ts';
import { Histogram, type LatencySummary } from './histogram.ts';
import { describeMachine, machine, type Machine } from './machine.ts';
import type { CommonOptions } from './options.ts';
import type { RateSummary } from './rates.ts';
import { reconnectFigures, type ReconnectFigures } from './reconnect.ts';
import { attemptsFailedOf, type PoolSnapshot } from './snapshot.ts';

export interface RunReport {
  tool: 'wsload';
  command: string;
  commandLine: string;
  startedAt: string;
  /** Seconds of the measured part of the run. */
  durationS: number;
  /** notify: the measured part's first and last moment (epoch ms), for a bench to read its own samples over it. */
  window?: { from: number; to: number };
  options: Record<string, unknown>;
  counts: Record<string, number>;
  /** Failures by reason (an error code, an HTTP status, a refusal code). */
  failures: Record<string, number>;
  /** Per second, over the whole measured part. */
  rates: Record<string, number>;
  /** Milliseconds. */
  latency: Record<string, LatencySummary>;
  /** Per-second samples taken while running. */
  perSecond: Record<string, RateSummary>;
  /** Paced broadcasts (notify --broadcast -R): each one's last told. */
  perEmit?: PerEmitFigures;
  /** With --reconnect: drops, returns, when the last one was back, clients over time. */
  reconnect?: ReconnectFigures;
  /** When the held clients were let go, all at once (ISO, fill, listen, notify): what the node does after is timed from here. */
  leftAt?: string;
  machine: Machine;
}

export type ReportBody = Omit<RunReport, 'tool' | 'commandLine' | 'machine' | 'startedAt'>;

/** What a command hands back: its figures, and its own summary lines for under the tables. */
export interface CommandResult {
  body: ReportBody;
  summary: string[];
}

/** The options as the JSON records them: all but the API user's password. */
export function publicOptions(options: CommonOptions): Record<string, unknown> {
  const { apiPassword: _, ...tokenApi } = options.tokenApi;
  return { ...options, tokenApi };
}

export function completeReport(body: ReportBody, argv: readonly string[], startedAt: Date): RunReport {
  return { tool: 'wsload', ...body, commandLine: commandLine(argv), startedAt: startedAt.toISOString(), machine: machine() };
}

function commandLine(argv: readonly string[]): string {
  const quote = (arg: string) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`);
  return ['wsload', ...argv].map(quote).join(' ');
}

const LABELS: Record<string, string> = {
  tcp: 'TCP connect',
  connected: 'CONNECTED',
  register: 'REGISTER',
  total: 'connect+register',
  left: 'left (close)',
  cycle: 'whole cycle',
  delivery: 'delivery',
  away: 'away (dropped → back)',
  http: 'HTTP emit',
  clients: 'clients',
  notifications: 'notifications',
  emits: 'HTTP emits',
  rtt: 'rtt (emit → answer)',
  broadcast: 'broadcast (each read)',
  lastTold: 'broadcast (last read)',
  echo: 'own broadcast back',
  history: 'history (since → replayed)',
  join: 'join (REGISTER → reply)',
};

function ms(value: number): string {
  if (value >= 100) return `${Math.round(value)} ms`;
  return `${value.toFixed(value >= 10 ? 1 : 2)} ms`;
}

export function count(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** A box-drawn table, as autocannon prints (cli-table3's look). */
export function table(header: readonly string[], rows: readonly string[][]): string {
  const widths = header.map((cell, column) => Math.max(cell.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (left: string, mid: string, right: string) => left + widths.map((w) => '─'.repeat(w + 2)).join(mid) + right;
  const row = (cells: readonly string[]) => `│${cells.map((cell, column) => ` ${cell.padEnd(widths[column]!)} `).join('│')}│`;
  return [line('┌', '┬', '┐'), row(header), line('├', '┼', '┤'), ...rows.map(row), line('└', '┴', '┘')].join('\n');
}

function latencyTable(latency: Record<string, LatencySummary>): string {
  const rows = Object.entries(latency)
    .filter(([, summary]) => summary.count > 0)
    .map(([key, s]) => [LABELS[key] ?? key, ms(s.p50), ms(s.p90), ms(s.p99), ms(s.p99_9), ms(s.mean), ms(s.stddev), ms(s.max), count(s.count)]);
  return rows.length === 0 ? '' : table(['Latency', '50%', '90%', '99%', '99.9%', 'Avg', 'Stdev', 'Max', 'Count'], rows);
}

function perSecondTable(perSecond: Record<string, RateSummary>): string {
  const rows = Object.entries(perSecond)
    .filter(([, summary]) => summary.samples > 0)
    .map(([key, s]) => [LABELS[key] ?? key, count(s.p1), count(s.p2_5), count(s.p50), count(s.p97_5), count(s.mean), count(s.stddev), count(s.min)]);
  return rows.length === 0 ? '' : table(['Per second', '1%', '2.5%', '50%', '97.5%', 'Avg', 'Stdev', 'Min'], rows);
}

/** The text report: tables, the command's own summary lines, failures, command line and machine. */
export function formatReport(report: RunReport, summary: readonly string[]): string {
  const tables = [latencyTable(report.latency), perSecondTable(report.perSecond)].filter((text) => text !== '');
  const failures = Object.entries(report.failures).map(([reason, n]) => `${count(n)} × ${reason}`);
  const lines = [...summary, ...(failures.length > 0 ? [`failures: ${failures.join(', ')}`] : [])];
  lines.push(`command: ${report.commandLine}`, `machine: ${describeMachine(report.machine)}`);
  return `${[...tables, '', ...lines].join('\n')}\n`;
}

export function writeJson(file: string, report: RunReport): void {
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
}

/** The reconnect part of a fill, listen or notify report: its figures, the away latency, failed attempts, a line. */
export function addReconnect(body: ReportBody, summary: string[], s: PoolSnapshot): void {
  const figures = reconnectFigures(s);
  const away = Histogram.from(s.away).summary();
  body.reconnect = figures;
  body.latency.away = away;
  for (const [reason, n] of Object.entries(s.retryFailures)) body.failures[`reconnect ${reason}`] = n;
  const attemptsFailed = attemptsFailedOf(s);
  const back = figures.allBackS === null ? `${count(figures.away)} still away` : `the last ${figures.allBackS.toFixed(1)} s after the first drop`;
  summary.push(
    `reconnect: ${count(figures.dropped)} dropped, ${count(figures.back)} back registered, ${back}; ` +
      `away p50 ${Math.round(away.p50)} ms, p99 ${Math.round(away.p99)} ms; ${count(attemptsFailed)} attempts refused or failed`,
  );
}
