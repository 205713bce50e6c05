import { median, stopAll, type Proc } from './procs.ts';
import { churnStep, notifySteps } from './steps.ts';
import { CHURN_S, CHURN_WARMUP_S, closeRedisClient, CONNECTED, growFill, NOTIFY_CLIENTS, NOTIFY_S, NOTIFY_WARMUP_S, prefix, QUICK, record, recordMedians, results, runLoad, sampler, startTarget, stopFills, type Step, type Target } from './suite.ts';

/**
 * The `_vs_socketio` ratios, from runs made side by side. Each target's own runs above are 10-20 minutes from the
 * other's, and rates here swing up to 2× from one run to the next (Socket.IO's unpaced one-person notify read
 * 16,082 then 8,883/s in two consecutive runs of 2026-12-01): the ratio of such medians fell either side of its
 * target (2.28× and 1.71× half an hour apart). So the gateway and Socket.IO are both started and run the steps of
 * their own runs in the same order, as the reference's server does: churn, then a fill of 9,000 idle clients each
 * (held), the unpaced one-person notify, the unpaced broadcast to 1,000. In each round of a step the two run one
 * after the other, the gateway first in odd rounds and Socket.IO first in even ones, so that a drift within a round
 * does not lean every ratio the same way; each ratio is the median of its rounds' ratios. The server not measured
 * idles meanwhile (its clients' pings only). The churn comes first, as in the targets' own runs, so that the pairs
 * measure servers in the state those runs do: one that has seen clients come and go is not a fresh one (by hand on
 * 2026-12-02, two Socket.IO servers side by side, one after two churns: 9,550, 12,022 and 13,033/s against the
 * fresh one's 12,110, 13,451 and 14,330/s; the notify ratio of the first full run so made, 1.57×, is within what
 * three rounds on fresh servers had read, 1.62-2.00×). `--only pairs` runs them all.
 */
const PAIR_ROUNDS = QUICK ? 1 : 5;

export async function pairedRatios(pair: [Target, Target]): Promise<void> {
  const fills = new Map<Target, Proc[]>(pair.map((t) => [t, []]));
  // The pairs' own figures (rates, CPU per emit) apart from the targets' own runs': `pairs_…`, `socketio_pairs_…`.
  const named = (t: Target) => (name: string): string => `${prefix(t)}pairs_${name}`;
  const stepOf = (t: Target, name: string): Step => notifySteps(t, named(t)).find(([step]) => step === name)!;
  try {
    for (const t of pair) {
      await startTarget(t);
      // Its Redis client serves the memory levels and one target's sampling: one per target would leak the first.
      closeRedisClient();
    }
    await pairedRounds(pair, (t) => churnStep(t, named(t)), 'churn_subscribe_vs_socketio');
    for (const t of pair) {
      sampler.phase = `${t.name} pairs fill`;
      await growFill(t, CONNECTED - NOTIFY_CLIENTS, fills.get(t)!, 0, NOTIFY_CLIENTS);
    }
    await pairedRounds(pair, (t) => stepOf(t, 'notify-person'), 'notify_person_vs_socketio');
    await pairedRounds(pair, (t) => stepOf(t, 'broadcast-1k'), 'broadcast_1k_vs_socketio');
  } catch (error) {
    results.errors.push(`pairs: ${(error as Error).message}`);
  } finally {
    for (const [t, held] of fills) await stopFills(t, held);
    for (const t of pair) sampler.unwatch(t.name);
    await stopAll();
  }
}

/**
 * PAIR_ROUNDS rounds of one step on both targets, order alternating; `figure` is the median of ours / theirs, and
 * each target's figures of the step are the medians of its rounds.
 */
async function pairedRounds(pair: [Target, Target], stepFor: (t: Target) => Step, figure: string): Promise<void> {
  const steps = new Map(pair.map((t) => [t, stepFor(t)]));
  const taken = new Map(pair.map((t): [Target, Array<Record<string, number | undefined>>] => [t, []]));
  const ratios: number[] = [];
  for (let round = 1; round <= PAIR_ROUNDS; round++) {
    const rates = new Map<Target, number | undefined>();
    for (const t of round % 2 === 1 ? pair : pair.toReversed()) {
      const [name, args, take] = steps.get(t)!;
      sampler.phase = `${t.name} pairs ${name}`;
      const out = await runLoad(t, args, CHURN_WARMUP_S + NOTIFY_WARMUP_S + Math.max(CHURN_S, NOTIFY_S) + 120);
      results.runs[`${t.name} pairs ${name} ${round}`] = out;
      taken.get(t)!.push(take(out));
      rates.set(t, out.rates?.notificationsPerSecond ?? out.rates?.clientsPerSecond);
    }
    const [ours, theirs] = pair.map((t) => rates.get(t));
    if (ours !== undefined && theirs) ratios.push(ours / theirs);
  }
  record(figure, median(ratios));
  for (const t of pair) recordMedians(taken.get(t)!);
}

