/**
 * A node's status record: what the back end's /status page shows of it, sampled from the node's own metrics. Rates,
 * latency quantiles and drops are over the window since the previous sample, so every node's record says what
 * happened lately, in a few hundred bytes, whatever the node's uptime.
 */
import type { Counter, Histogram } from 'prom-client';
import type { Metrics } from '../metrics.ts';

export interface StatusRecord {
  nodeId: string;
  /** When it was sampled, ms since the epoch. */
  at: number;
  startedAt: number;
  ready: boolean;
  connections: number;
  subscriptions: number;
  /** Per second, over the window. */
  emitsPerSecond: number;
  notificationsPerSecond: number;
  /** Fan-out (an emit's arrival at this node to its last write), quantiles over the window, in ms; null without any. */
  fanOutP50Ms: number | null;
  fanOutP99Ms: number | null;
  /** How far behind busy connections were (lag probes answered), quantiles over the window, in ms; null without any. */
  lagP50Ms: number | null;
  lagP99Ms: number | null;
  /** Canary round trips over the window, median, in ms; null without any. */
  canarySelfMs: number | null;
  canaryPeerMs: number | null;
  /** What was dropped over the window, by metric and reason (e.g. `notifications:slow_client`); only what is not 0. */
  drops: Record<string, number>;
}

type Totals = Map<string, number>;

interface Sample {
  at: number;
  counters: Totals;
  buckets: Map<string, Totals>;
}

export interface SamplerOptions {
  metrics: Metrics;
  nodeId: string;
  ready: () => boolean;
}

export class StatusSampler {
  readonly #options: SamplerOptions;
  readonly #startedAt = Date.now();
  #last: Sample | undefined;

  constructor(options: SamplerOptions) {
    this.#options = options;
  }

  async sample(): Promise<StatusRecord> {
    const { metrics, nodeId, ready } = this.#options;
    const now: Sample = { at: Date.now(), counters: await countersOf(metrics), buckets: await bucketsOf(metrics) };
    const last = this.#last ?? { at: this.#startedAt, counters: new Map(), buckets: new Map() };
    this.#last = now;
    const seconds = Math.max(0.001, (now.at - last.at) / 1000);
    const delta = (key: string) => (now.counters.get(key) ?? 0) - (last.counters.get(key) ?? 0);
    const window = (histogram: string) => subtract(now.buckets.get(histogram), last.buckets.get(histogram));
    const dropped = [...now.counters.keys()].filter((key) => DROPPED.some((name) => key.startsWith(`${name}:`)) && delta(key) > 0);
    const drops = Object.fromEntries(dropped.map((key) => [key.replace(/:$/, ''), delta(key)]));
    return {
      nodeId,
      at: now.at,
      startedAt: this.#startedAt,
      ready: ready(),
      connections: await gaugeOf(metrics, 'connections'),
      subscriptions: await gaugeOf(metrics, 'subscriptions'),
      emitsPerSecond: round(delta('emits:') / seconds),
      notificationsPerSecond: round(delta('sent:') / seconds),
      fanOutP50Ms: quantileMs(window('fanout:'), 0.5),
      fanOutP99Ms: quantileMs(window('fanout:'), 0.99),
      lagP50Ms: quantileMs(window('lag:'), 0.5),
      lagP99Ms: quantileMs(window('lag:'), 0.99),
      canarySelfMs: quantileMs(window('canary:self'), 0.5),
      canaryPeerMs: quantileMs(window('canary:peer'), 0.5),
      drops,
    };
  }
}

/** The counters of what was dropped or refused on the way to a client: each is a key prefix below. */
const DROPPED = ['notifications', 'replies', 'canary_missed', 'emits_failed', 'slow_clients_closed'];

/** Every counter the record reads, as `<name>:<label value>` -> total (labels summed where the record needs no split). */
async function countersOf(metrics: Metrics): Promise<Totals> {
  const totals: Totals = new Map();
  const add = async (name: string, counter: Counter, label?: string) => {
    for (const { labels, value } of (await counter.get()).values) {
      const key = `${name}:${label === undefined ? '' : String(labels[label] ?? '')}`;
      totals.set(key, (totals.get(key) ?? 0) + value);
    }
  };
  await add('emits', metrics.emits);
  await add('sent', metrics.notificationsOut);
  await add('notifications', metrics.drops, 'reason');
  await add('replies', metrics.repliesDropped, 'reason');
  await add('canary_missed', metrics.canaryMissed, 'target');
  await add('emits_failed', metrics.emitsFailed);
  await add('slow_clients_closed', metrics.shed, 'reason');
  return totals;
}

/** Cumulative bucket counts (upper bound in seconds -> count) of the histograms the record reads. */
async function bucketsOf(metrics: Metrics): Promise<Map<string, Totals>> {
  const histograms = new Map<string, Totals>();
  const add = async (name: string, histogram: Histogram, label?: string) => {
    for (const { labels, value, metricName } of (await histogram.get()).values) {
      if (!metricName?.endsWith('_bucket')) continue;
      const key = `${name}:${label === undefined ? '' : String(labels[label] ?? '')}`;
      let buckets = histograms.get(key);
      if (!buckets) histograms.set(key, (buckets = new Map()));
      buckets.set(String(labels.le), value);
    }
  };
  await add('fanout', metrics.fanOutSeconds);
  await add('lag', metrics.deliveryLag);
  await add('canary', metrics.canaryRoundTrip, 'target');
  return histograms;
}

async function gaugeOf(metrics: Metrics, name: 'connections' | 'subscriptions'): Promise<number> {
  return (await metrics[name].get()).values[0]?.value ?? 0;
}

function subtract(now: Totals | undefined, before: Totals | undefined): Totals {
  return new Map([...(now ?? [])].map(([le, count]) => [le, count - (before?.get(le) ?? 0)]));
}

/**
 * The upper bound of the bucket holding quantile q, in ms (a histogram knows no finer; past the last bound, that
 * bound); null for an empty window.
 */
function quantileMs(cumulative: Totals, q: number): number | null {
  const bounds = [...cumulative].map(([le, count]) => [le === '+Inf' ? Infinity : Number(le), count] as const).sort((a, b) => a[0] - b[0]);
  const total = bounds.at(-1)?.[1] ?? 0;
  if (total <= 0) return null;
  const bucket = bounds.find(([, count]) => count >= q * total)?.[0] ?? Infinity;
  const bound = Number.isFinite(bucket) ? bucket : (bounds.at(-2)?.[0] ?? 0);
  return round(bound * 1000);
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
