/**
 * The benchmark's scenarios, in the order they run. A target's scenarios run on each target in turn (or on the
 * gateway only), its server and Redis started for them; the others start what they measure themselves, after the
 * targets. `--only` selects a scenario by any of its names.
 */
import { canConnectScenario } from './can-connect.ts';
import { exactlyOnceScenario } from './exactly-once.ts';
import type { BenchContext, Target } from './context.ts';
import { killGapScenario, killScenario, restartGapScenario, restartScenario, type FailoverContext } from './failover.ts';
import { historyScenario } from './history.ts';
import { idleScenario } from './idle.ts';
import { machineFloors } from './machine-floors.ts';
import { memoryScenario } from './memory.ts';
import { broadcastScenario, loadScenarios } from './notify.ts';
import { pairedRatios } from './pairs.ts';
import type { Taken } from './results.ts';
import { revokeScenario } from './revoke.ts';

/** Runs on a target's server: each target's in turn, or the gateway's only. */
export interface TargetScenario { names: readonly string[]; on: 'each target' | 'gateway'; run: (ctx: BenchContext, t: Target) => Promise<void> }
/** Starts what it measures itself, after the targets. */
export interface OwnScenario { names: readonly string[]; on: 'own processes'; run: (ctx: BenchContext) => Promise<void> }
export type Scenario = TargetScenario | OwnScenario;

/** A failover scenario made `rateRuns` times, each figure the median of its runs (the worst, for a loss). */
function repeated(name: string, scenario: (failover: FailoverContext) => Promise<void>): Scenario {
  return {
    names: [name],
    on: 'own processes',
    run: async (ctx) => {
      const taken: Taken[] = [];
      for (let run = 1; run <= ctx.options.rateRuns; run++) {
        console.error(`bench: gateway ${name} ${run}`);
        const figures: Taken = {};
        const { quick, runDir } = ctx.options;
        await scenario({ quick, run, runDir, sampler: ctx.sampler, results: ctx.results, record: (figure, value) => { figures[figure] = value; } });
        taken.push(figures);
      }
      ctx.recordMedians(taken);
    },
  };
}

export const SCENARIOS: readonly Scenario[] = [
  {
    names: ['memory'],
    on: 'each target',
    // The rate scenarios after it run on a fresh server and Redis, so that they measure themselves.
    run: async (ctx, t) => {
      try { await memoryScenario(ctx, t); } finally { await ctx.freshTarget(t); }
    },
  },
  {
    names: ['churn', 'ws-clients', 'notify-person', 'broadcast-1k', 'notify-paced', 'broadcast-paced', 'every-client'],
    on: 'each target',
    run: loadScenarios,
  },
  { names: ['broadcast-18k'], on: 'gateway', run: broadcastScenario },
  { names: ['can-connect'], on: 'gateway', run: canConnectScenario },
  { names: ['history'], on: 'gateway', run: historyScenario },
  { names: ['floors'], on: 'own processes', run: machineFloors },
  { names: ['pairs'], on: 'own processes', run: pairedRatios },
  repeated('restart', restartScenario),
  repeated('kill', killScenario),
  repeated('restart-gap', restartGapScenario),
  repeated('kill-gap', killGapScenario),
  repeated('revoke', revokeScenario),
  { names: ['exactly-once'], on: 'own processes', run: exactlyOnceScenario },
  { names: ['idle'], on: 'own processes', run: idleScenario },
];
