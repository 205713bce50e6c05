/**
 * Issue 5: the subscribe rate (both tokens + REGISTER + leave, 100 at a time) of an event without code and of the
 * three events with can-connect code. Each event with code runs beside a run without code and its ratio is taken
 * against that run, since the rate drifts over minutes here and a pair seconds apart shares the drift; the pair's
 * order alternates from round to round so that a drift within pairs does not lean every ratio the same way. Figures:
 * the median over the rounds of each event's rate and of its ratio to its own no-code run.
 */
import type { BenchContext, Target } from './context.ts';
import { median } from './procs.ts';

const CODE_EVENTS: Array<[string, string]> = [
  ['checked-token', 'subscribe_isolate_token'],
  ['checked-database', 'subscribe_isolate_database'],
  ['checked-sandbox', 'subscribe_sandbox'],
];
const NO_CODE_EVENT = 'announcements';

export async function canConnectScenario(ctx: BenchContext, t: Target): Promise<void> {
  const seconds = ctx.options.quick ? 5 : 10;
  const churn = async (event: string, run: string): Promise<number> => {
    ctx.sampler.phase = `${t.name} can-connect ${event}`;
    const args = ['churn', `ws://127.0.0.1:${t.port}`, '-c', '100', '-w', '2', '-d', String(seconds), '--register', event, '--tokens', 'both'];
    const out = await ctx.runLoad(t, args, seconds + 60);
    ctx.results.runs[`${t.name} can-connect ${run}`] = out;
    return out.rates?.clientsPerSecond ?? NaN;
  };
  const noCode: number[] = [];
  const rates = new Map<string, number[]>(CODE_EVENTS.map(([, figure]) => [figure, []]));
  const ratios = new Map<string, number[]>(CODE_EVENTS.map(([, figure]) => [figure, []]));
  // Five rounds, as one pair's ratio still swings by ±15% here.
  for (let round = 1; round <= (ctx.options.quick ? 1 : 5); round++) {
    for (const [event, figure] of CODE_EVENTS) {
      const noCodeRun = (): Promise<number> => churn(NO_CODE_EVENT, `${NO_CODE_EVENT} beside ${event} ${round}`);
      const codeRun = (): Promise<number> => churn(event, `${event} ${round}`);
      const noCodeFirst = round % 2 === 1;
      const first = await (noCodeFirst ? noCodeRun() : codeRun());
      const second = await (noCodeFirst ? codeRun() : noCodeRun());
      const [base, rate] = noCodeFirst ? [first, second] : [second, first];
      noCode.push(base);
      rates.get(figure)!.push(rate);
      ratios.get(figure)!.push(rate / base);
    }
  }
  ctx.record('subscribe_no_code_per_s', median(noCode));
  for (const [, figure] of CODE_EVENTS) {
    ctx.record(`${figure}_per_s`, median(rates.get(figure)!));
    ctx.record(`${figure}_vs_no_code`, median(ratios.get(figure)!));
  }
}
