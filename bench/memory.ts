/** Scenario 1: memory per client, the levels from 0 to 18,000 clients on one node, twice. */
import { readFileSync } from 'node:fs';
import { median, rssKb, sleep, type Proc } from './procs.ts';
import { prefix, serverStats, type BenchContext, type Target } from './context.ts';
import type { Level } from './results.ts';

/** Kernel slab (/proc/meminfo), KB: every TCP socket lives there, both ends of a loopback connection alike. */
function slabKb(): number {
  return Number(/^Slab:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1]);
}

/** Grow to `clients`, force a GC in the server, and read RSS, heap, Redis and the kernel's slab. */
async function memoryLevel(ctx: BenchContext, t: Target, clients: number, fills: Proc[], held: number): Promise<Level> {
  await ctx.growFill(t, clients, fills, held);
  // The servers run with bench/gc-preload.ts: SIGUSR2 makes them collect, so heap and RSS hold live data only.
  // Twice: what the first collection frees only through weak callbacks and finalizers goes in the second.
  t.server!.child.kill('SIGUSR2');
  await sleep(1000);
  t.server!.child.kill('SIGUSR2');
  await sleep(2000);
  const stats = await serverStats(t);
  const level: Level = { clients, rssKb: rssKb(t.server!.child.pid!), redisUsedMemory: Number(/used_memory:(\d+)/.exec(await ctx.redis!.info('memory'))?.[1]), slabKb: slabKb() };
  if (stats.heapUsed !== undefined) level.heapUsed = stats.heapUsed;
  return level;
}

/** KB per client between 6k (or the first level with clients) and the last level. */
function slopeKb(levels: Level[], value: (l: Level) => number | undefined): number | undefined {
  const from = levels.find((l) => l.clients === 6000 && l !== levels.at(-1)) ?? levels.find((l) => l.clients > 0);
  const to = levels.at(-1);
  if (!from || !to || from === to) return undefined;
  const [a, b] = [value(from), value(to)];
  return a === undefined || b === undefined ? undefined : (b - a) / (to.clients - from.clients);
}

/** One pass over the levels, from a fresh server (the caller's): each level's reading. */
async function memoryLevels(ctx: BenchContext, t: Target, run: number): Promise<Level[]> {
  const levels: Level[] = [];
  const fills: Proc[] = [];
  try {
    for (const clients of ctx.options.levels) {
      ctx.sampler.phase = `${t.name} memory ${run} ${clients}`;
      levels.push(await memoryLevel(ctx, t, clients, fills, levels.at(-1)?.clients ?? 0));
    }
  } finally {
    await ctx.stopFills(t, fills);
  }
  return levels;
}

const MEMORY_FIGURES: Array<[figure: string, value: (l: Level) => number | undefined]> = [
  ['node_rss_kb_per_client', (l) => l.rssKb],
  ['node_heap_kb_per_client', (l) => (l.heapUsed === undefined ? undefined : l.heapUsed / 1024)],
  ['redis_kb_per_client', (l) => l.redisUsedMemory / 1024],
  ['kernel_slab_kb_per_connection', (l) => l.slabKb],
];

/**
 * The levels twice, each pass on a fresh server, and each slope the median of the two passes (as the rates are): one
 * pass's slope swings on the same code. The table and chart show the last pass; results.json keeps both.
 */
export async function memoryScenario(ctx: BenchContext, t: Target): Promise<void> {
  const { results } = ctx;
  const passes: Level[][] = [];
  for (let run = 1; run <= ctx.options.rateRuns; run++) {
    if (run > 1) await ctx.freshTarget(t);
    const levels = await memoryLevels(ctx, t, run);
    passes.push(levels);
    results.runs[`${t.name} memory ${run}`] = Object.fromEntries(MEMORY_FIGURES.map(([figure, value]) => [figure, slopeKb(levels, value)]));
  }
  results.memory[t.name] = passes.at(-1)!;
  for (const [figure, value] of MEMORY_FIGURES) {
    ctx.record(`${prefix(t)}${figure}`, median(passes.map((levels) => slopeKb(levels, value)).filter((slope) => slope !== undefined)));
  }
}
