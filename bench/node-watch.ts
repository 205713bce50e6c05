/**
 * What the gateway itself reports over one load run, read from its /metrics: its fan-out time
 * (herald_fanout_duration_seconds, from an emit's arrival at the hub to the last write of its fan-out) over the run's
 * emits, and its delivery backlog (herald_delivery_backlog_bytes), read four times a second. Beside the clients'
 * delivery latency, the fan-out time is the node's part of it; the rest is the emitter's call, the kernel and the client.
 */

interface Buckets {
  /** [upper bound in seconds, cumulative count], by bound. */
  bounds: Array<[number, number]>;
  count: number;
}

export interface NodeFigures {
  /** The fan-out time's quantiles over the run, ms, each as the upper bound of its histogram bucket. */
  fanOutP50Ms: number | undefined;
  fanOutP99Ms: number | undefined;
  fanOuts: number;
  /** The delivery backlog's largest reading, bytes, and the median of the readings. */
  backlogMaxBytes: number;
  backlogP50Bytes: number;
  /** herald_emits_refused_total over the run. */
  refused: number;
}

const READ_EVERY_MS = 250;

async function scrape(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

function fanOutBuckets(text: string): Buckets {
  const bounds: Array<[number, number]> = [];
  for (const [, le, value] of text.matchAll(/^herald_fanout_duration_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)) {
    bounds.push([le === '+Inf' ? Infinity : Number(le), Number(value)]);
  }
  return { bounds, count: Number(/^herald_fanout_duration_seconds_count (\S+)$/m.exec(text)?.[1] ?? 0) };
}

const sumOf = (text: string, name: string): number =>
  [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce((sum, [, value]) => sum + Number(value), 0);

/** The bound (ms) of the bucket holding the `q` quantile of the observations between two readings. */
function quantileMs(before: Buckets, after: Buckets, q: number): number | undefined {
  const count = after.count - before.count;
  if (count <= 0) return undefined;
  const rank = Math.ceil(q * count);
  for (const [i, [bound, cumulative]] of after.bounds.entries()) {
    if (cumulative - (before.bounds[i]?.[1] ?? 0) >= rank) return bound * 1000;
  }
  return undefined;
}

/** Reads the node while `run` goes on; answers the run's outcome and what the node reported over it. */
export async function watchNode<T>(port: number, run: () => Promise<T>): Promise<{ outcome: T; node: NodeFigures }> {
  const first = await scrape(port);
  const backlog: number[] = [];
  let reading = true;
  const reader = (async () => {
    while (reading) {
      await new Promise((resolve) => setTimeout(resolve, READ_EVERY_MS));
      const text = await scrape(port).catch(() => '');
      if (text !== '') backlog.push(sumOf(text, 'herald_delivery_backlog_bytes'));
    }
  })();
  try {
    const outcome = await run();
    const last = await scrape(port);
    const [before, after] = [fanOutBuckets(first), fanOutBuckets(last)];
    backlog.sort((a, b) => a - b);
    return {
      outcome,
      node: {
        fanOutP50Ms: quantileMs(before, after, 0.5),
        fanOutP99Ms: quantileMs(before, after, 0.99),
        fanOuts: after.count - before.count,
        backlogMaxBytes: backlog.at(-1) ?? 0,
        backlogP50Bytes: backlog[Math.floor(backlog.length / 2)] ?? 0,
        refused: sumOf(last, 'herald_emits_refused_total') - sumOf(first, 'herald_emits_refused_total'),
      },
    };
  } finally {
    reading = false;
    await reader;
  }
}
