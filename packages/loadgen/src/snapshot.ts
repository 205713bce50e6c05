/**
 * What a group of clients has done so far, as plain data: a pool in this process and pools in worker
 * processes report the same shape, and the parent adds them up.
 */
import { EmitTallies, type EmitTallyData } from './emit-tallies.ts';
import { Histogram, type HistogramData } from './histogram.ts';
import { Timeline, type TimelineData } from './timeline.ts';

export const PHASES = ['tcp', 'connected', 'register', 'total'] as const;
export type Phase = (typeof PHASES)[number];

export interface PoolSnapshot {
  /** Clients given a start so far. */
  started: number;
  /** Clients that got CONNECTED (some of them may then have failed their REGISTER). */
  connected: number;
  /** Clients connected and, when they register, registered: the usable ones. */
  ready: number;
  failed: number;
  failures: Record<string, number>;
  /** Epoch ms (clockMs) of the first client's start and of the last ready, 0 before any: clients/s is over these. */
  firstStartAt: number;
  lastReadyAt: number;
  /** Ready clients whose socket closed without us asking (each drop counts: with --reconnect, one may drop again). */
  dropped: number;
  /** Per phase: tcp = start → TCP connect, connected = TCP connect → CONNECTED, register = REGISTER → reply, total = start → ready. */
  phases: Record<Phase, HistogramData>;
  /** NOTIFICATION frames received, and how many of them carried a sentAt. */
  received: number;
  timed: number;
  /** now − sentAt at arrival. */
  delivery: HistogramData;
  /** Per emit, when the pools tally them (PoolSpec.tallyEmits); else empty. */
  emits: EmitTallyData;
  /** Epoch ms (clockMs) of the last NOTIFICATION, 0 before any. */
  lastReceivedAt: number;
  /** With --reconnect: dropped clients connected and registered again (each return counts). */
  back: number;
  /** Answers to the clients' further REGISTER (Pool.subscribeAll): every entry accepted, or not. */
  subscribed: number;
  subscribeRefused: number;
  /** Reconnect attempts that failed, by reason (HTTP 503 while a node drains, ECONNREFUSED while it is down). */
  retryFailures: Record<string, number>;
  /** With --resume: repeats dropped, gaps seen, resumes answered recovered or not (load-client.ts HistoryOutcome). */
  history: Record<string, number>;
  /** Per return: from the drop to registered again. */
  away: HistogramData;
  /** Epoch ms (clockMs) of the first drop and of the last return, 0 before any. */
  firstDropAt: number;
  lastBackAt: number;
  /** Clients ready over time: how many got ready (joined or back) and were dropped, per 100 ms. */
  level: TimelineData;
  /** Ready clients per recipient key (only when asked for: it can be large). */
  recipients?: Record<string, number>;
}

export function emptySnapshot(): PoolSnapshot {
  const empty = new Histogram().toData();
  return {
    started: 0,
    connected: 0,
    ready: 0,
    failed: 0,
    failures: {},
    dropped: 0,
    firstStartAt: 0,
    lastReadyAt: 0,
    phases: { tcp: empty, connected: empty, register: empty, total: empty },
    received: 0,
    timed: 0,
    delivery: empty,
    emits: [],
    lastReceivedAt: 0,
    back: 0,
    subscribed: 0,
    subscribeRefused: 0,
    retryFailures: {},
    history: {},
    away: empty,
    firstDropAt: 0,
    lastBackAt: 0,
    level: [],
  };
}

function addCounts(into: Record<string, number>, from: Record<string, number>): void {
  for (const [key, count] of Object.entries(from)) into[key] = (into[key] ?? 0) + count;
}

/** The earlier of two instants where 0 means "not yet". */
function earliest(a: number, b: number): number {
  return a === 0 ? b : b === 0 ? a : Math.min(a, b);
}

/** Clients started and not yet ready nor refused for good: connecting, registering, or waiting to try again. */
export const connectingOf = (s: PoolSnapshot): number => s.started - s.ready - s.failed;

/** Connect attempts that were refused or failed and were tried again (--reconnect), whatever the reason. */
export const attemptsFailedOf = (s: PoolSnapshot): number => Object.values(s.retryFailures).reduce((sum, n) => sum + n, 0);

export function mergeSnapshots(snapshots: readonly PoolSnapshot[]): PoolSnapshot {
  const total = emptySnapshot();
  const phases = Object.fromEntries(PHASES.map((phase) => [phase, new Histogram()])) as Record<Phase, Histogram>;
  const delivery = new Histogram();
  const emits = new EmitTallies();
  const away = new Histogram();
  const level = new Timeline();
  let recipients: Record<string, number> | undefined;
  for (const one of snapshots) {
    total.started += one.started;
    total.connected += one.connected;
    total.ready += one.ready;
    total.failed += one.failed;
    total.dropped += one.dropped;
    total.received += one.received;
    total.timed += one.timed;
    addCounts(total.failures, one.failures);
    for (const phase of PHASES) phases[phase].add(one.phases[phase]);
    delivery.add(one.delivery);
    emits.add(one.emits);
    total.firstStartAt = earliest(total.firstStartAt, one.firstStartAt);
    total.lastReadyAt = Math.max(total.lastReadyAt, one.lastReadyAt);
    total.lastReceivedAt = Math.max(total.lastReceivedAt, one.lastReceivedAt);
    total.back += one.back;
    total.subscribed += one.subscribed;
    total.subscribeRefused += one.subscribeRefused;
    addCounts(total.retryFailures, one.retryFailures);
    addCounts(total.history, one.history);
    away.add(one.away);
    total.firstDropAt = earliest(total.firstDropAt, one.firstDropAt);
    total.lastBackAt = Math.max(total.lastBackAt, one.lastBackAt);
    level.add(one.level);
    if (one.recipients) addCounts((recipients ??= {}), one.recipients);
  }
  for (const phase of PHASES) total.phases[phase] = phases[phase].toData();
  total.delivery = delivery.toData();
  total.emits = emits.toData();
  total.away = away.toData();
  total.level = level.toData();
  if (recipients) total.recipients = recipients;
  return total;
}
