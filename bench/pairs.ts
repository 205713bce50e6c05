import { median, stopAll, type Proc } from './procs.ts';
import { churnStep, notifySteps } from './steps.ts';
import { NOTIFY_CLIENTS, prefix, type BenchContext, type Step, type Target } from './context.ts';
import type { Taken } from './results.ts';

/**
 * The `_vs_socketio` ratios, from runs made side by side: rates here swing up to 2× from one run to the next, and
 * each target's own runs are minutes apart. The gateway and Socket.IO are both started and run their own runs'
 * steps in the same order (churn, a fill, unpaced one-person notify, unpaced broadcast to 1,000), one after the
 * other in each round, the order alternating so that a drift within a round does not lean every ratio the same
 * way; each ratio is the median of its rounds'. Methodology: docs/benchmarks/methodology.md. `--only pairs`.
 */
const pairRounds = (ctx: BenchContext): number => (ctx.options.quick ? 1 : 5);

export async function pairedRatios(ctx: BenchContext): Promise<void> {
  const pair: [Target, Target] = [ctx.targets[0]!, ctx.targets[1]!];
  const fills = new Map<Target, Proc[]>(pair.map((t) => [t, []]));
  // The pairs' own figures (rates, CPU per emit) apart from the targets' own runs': `pairs_…`, `socketio_pairs_…`.
  const named = (t: Target) => (name: string): string => `${prefix(t)}pairs_${name}`;
  const stepOf = (t: Target, name: string): Step => notifySteps(ctx, t, named(t)).find(([step]) => step === name)!;
  try {
    for (const t of pair) {
      await ctx.startTarget(t);
      // Its Redis client serves the memory levels and one target's sampling: one per target would leak the first.
      ctx.closeRedisClient();
    }
    await pairedRounds(ctx, pair, (t) => churnStep(ctx, t, named(t)), 'churn_subscribe_vs_socketio');
    for (const t of pair) {
      ctx.sampler.phase = `${t.name} pairs fill`;
      await ctx.growFill(t, ctx.options.connected - NOTIFY_CLIENTS, fills.get(t)!, 0, NOTIFY_CLIENTS);
    }
    await pairedRounds(ctx, pair, (t) => stepOf(t, 'notify-person'), 'notify_person_vs_socketio');
    await pairedRounds(ctx, pair, (t) => stepOf(t, 'broadcast-1k'), 'broadcast_1k_vs_socketio');
  } catch (error) {
    ctx.failed('pairs', error);
  } finally {
    for (const [t, held] of fills) await ctx.stopFills(t, held);
    for (const t of pair) ctx.sampler.unwatch(t.name);
    await stopAll();
  }
}

/**
 * pairRounds rounds of one step on both targets, order alternating; `figure` is the median of ours / theirs, and
 * each target's figures of the step are the medians of its rounds.
 */
async function pairedRounds(ctx: BenchContext, pair: [Target, Target], stepFor: (t: Target) => Step, figure: string): Promise<void> {
  const steps = new Map(pair.map((t) => [t, stepFor(t)]));
  const taken = new Map(pair.map((t): [Target, Taken[]] => [t, []]));
  const { churnWarmupS, notifyWarmupS, churnS, notifyS } = ctx.options;
  const ratios: number[] = [];
  for (let round = 1; round <= pairRounds(ctx); round++) {
    const rates = new Map<Target, number | undefined>();
    for (const t of round % 2 === 1 ? pair : pair.toReversed()) {
      const [name, args, take] = steps.get(t)!;
      ctx.sampler.phase = `${t.name} pairs ${name}`;
      const out = await ctx.runLoad(t, args, churnWarmupS + notifyWarmupS + Math.max(churnS, notifyS) + 120);
      ctx.results.runs[`${t.name} pairs ${name} ${round}`] = out;
      taken.get(t)!.push(take(out));
      rates.set(t, out.rates?.notificationsPerSecond ?? out.rates?.clientsPerSecond);
    }
    const [ours, theirs] = pair.map((t) => rates.get(t));
    if (ours !== undefined && theirs) ratios.push(ours / theirs);
  }
  ctx.record(figure, median(ratios));
  for (const t of pair) ctx.recordMedians(taken.get(t)!);
}

