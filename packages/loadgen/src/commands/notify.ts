/**
 * `wsload notify`: listeners and the emitter in one run, so that what was sent and what arrived are counted
 * in one place. N listeners connect and register (in this process, or in workers past --per-worker); then
 * the emitter calls emit-event-ws for d seconds, each call naming the next listener's recipientId (or a
 * broadcast); then it waits up to --grace seconds for notifications still on their way. Reports delivery
 * latency (now − sentAt at the listener), notifications a second, and how many never arrived.
 *
 * With --await-return S, the emitter waits for a failover first: listeners dropped (a node restarted or died)
 * and every one of them back registered. It then names the listeners that were ready before the drop, so a
 * listener that did not come back, or came back without its subscription, counts as missing.
 */
import { clockMs } from '../frames.ts';
import { Emitter, type EmitterStats } from '../emitter.ts';
import { Histogram } from '../histogram.ts';
import type { NotifyOptions } from '../options.ts';
import { pause, prepareRoster } from '../prepare.ts';
import { Progress } from '../progress.ts';
import { RateSamples } from '../rates.ts';
import { EmitTallies } from '../emit-tallies.ts';
import { DeliveryPace } from '../pace.ts';
import { addReconnect, count, publicOptions, type CommandResult, type ReportBody } from '../report.ts';
import type { PoolSnapshot } from '../snapshot.ts';
import type { ClientGroup } from '../pool.ts';
import { clientGroup } from '../worker-pools.ts';

/**
 * A notification counts in `notificationsOnTimePerSecond` when it arrived within this long of its emit: the figure of
 * a run that a growing queue (emits taken faster than they are delivered) cannot raise.
 */
export const ON_TIME_MS = 1000;

interface Audience {
  recipients: string[];
  weights: number[];
}

/** Whom the emitter names in turn, and how many ready listeners each call reaches. */
function audienceOf(listeners: PoolSnapshot, broadcast: boolean): Audience {
  const ready = listeners.recipients ?? {};
  if (broadcast) return { recipients: [''], weights: [ready[''] ?? 0] };
  const recipients = Object.keys(ready).sort((a, b) => Number(a) - Number(b) || a.localeCompare(b));
  return { recipients, weights: recipients.map((recipient) => ready[recipient]!) };
}

/** Wait until the listeners have everything they should, or the grace period is over. */
async function drain(group: ClientGroup, expected: number, graceS: number): Promise<PoolSnapshot> {
  const until = performance.now() + graceS * 1000;
  for (;;) {
    const snapshot = await group.snapshot();
    if (snapshot.received >= expected || performance.now() >= until) return snapshot;
    await pause(100, undefined);
  }
}

/**
 * Until listeners were dropped and none is away any more, or `seconds` passed. It reads the progress tick's
 * latest snapshot rather than taking its own: a snapshot serialises every worker's histograms, and the workers
 * are busiest during the very return this waits for. The figures come from the clients' own timestamps, not
 * from when this notices.
 */
async function awaitReturn(latest: () => PoolSnapshot | undefined, seconds: number, signal: AbortSignal | undefined): Promise<void> {
  const until = performance.now() + seconds * 1000;
  for (;;) {
    const snapshot = latest();
    if ((snapshot && snapshot.dropped > 0 && snapshot.back === snapshot.dropped) || performance.now() >= until || signal?.aborted) return;
    await pause(1000, signal);
  }
}

function emitter(options: NotifyOptions, apiToken: string, audience: Audience, durationS: number, pace: DeliveryPace | undefined): Emitter {
  const made: Emitter = new Emitter({
    httpBase: options.tokenApi.httpBase,
    userPath: options.tokenApi.userPath,
    apiToken,
    connections: options.connections,
    durationS,
    rate: options.rate,
    event: options.event ?? 'announcements',
    recipients: audience.recipients,
    weights: audience.weights,
    timeoutMs: options.timeoutMs,
    hold: pace && (() => pace.holds(made.stats.expected)),
    idempotent: options.idempotent,
    batch: options.batch,
  });
  return made;
}

export async function notify(options: NotifyOptions, signal?: AbortSignal): Promise<CommandResult> {
  const roster = await prepareRoster(options, options.wsUrl);
  const { connectRate: rate, perAddress, timeoutMs, reconnect } = options;
  // Paced broadcasts are told apart at the listeners, so that each one's last told can be reported.
  const tallyEmits = options.broadcast && options.rate !== undefined;
  const group = clientGroup({ roster, first: 0, count: options.clients, rate, perAddress, timeoutMs, reconnect, tallyEmits, resume: options.resume, client: options.client, readRate: options.readRate }, options.perWorker);
  const progress = new Progress(options.quiet);
  const emits = new RateSamples();
  const notifications = new RateSamples();
  let running: Emitter | undefined;
  let latest: PoolSnapshot | undefined;
  const pace = options.keepWithinMs === undefined ? undefined : new DeliveryPace(group, options.keepWithinMs);
  progress.start(async (elapsedS) => {
    const snapshot = (latest = await group.snapshot());
    const away = reconnect ? `, ${count(snapshot.dropped)} dropped, ${count(snapshot.dropped - snapshot.back)} away` : '';
    const head = `notify ${elapsedS.toFixed(0)}s: ${count(snapshot.ready)}/${count(options.clients)} listeners ready, ${count(snapshot.failed)} failed${away}`;
    if (!running) return head;
    const now = performance.now();
    const perSecond = `${count(emits.sample(running.stats.ok, now))} emits/s, ${count(notifications.sample(snapshot.received, now))} notifications/s`;
    return `${head}; ${count(running.stats.ok)} emits, ${count(snapshot.received)}/${count(running.stats.expected)} received, ${perSecond}`;
  });
  try {
    await group.open(signal);
    const listeners = await group.snapshot(true);
    const audience = audienceOf(listeners, options.broadcast);
    if (audience.weights.every((weight) => weight === 0)) throw new Error(`no listener is ready: ${JSON.stringify(listeners.failures)}`);
    if (options.awaitReturnS > 0) await awaitReturn(() => latest, options.awaitReturnS, signal);
    pace?.start();
    if (options.warmupS > 0 && !signal?.aborted) {
      const warm = await emitter(options, roster.apiToken, audience, options.warmupS, pace).run(signal);
      await drain(group, warm.expected, options.graceS);
      await group.resetDelivery();
      pace?.start();
    }
    const measured = emitter(options, roster.apiToken, audience, options.durationS, pace);
    const emitStart = clockMs();
    emits.begin(0, performance.now());
    notifications.begin(0, performance.now());
    running = measured;
    const stats = await measured.run(signal);
    // The figures per second are the emitter's seconds: the wait for stragglers would add empty ones.
    running = undefined;
    pace?.stop();
    const final = await drain(group, stats.expected, options.graceS);
    progress.stop();
    // Every client goes at once in `finally`, right after this: the bench times what the node does from here.
    const leftAt = new Date().toISOString();
    return result(options, listeners, final, stats, emitStart, { emits, notifications }, leftAt);
  } finally {
    progress.stop();
    pace?.stop();
    await group.close();
  }
}

function result(
  options: NotifyOptions,
  listeners: PoolSnapshot,
  final: PoolSnapshot,
  stats: EmitterStats,
  emitStart: number,
  samples: { emits: RateSamples; notifications: RateSamples },
  leftAt: string,
): CommandResult {
  const emitS = (stats.endedAt - stats.startedAt) / 1000;
  // Notifications a second over the time they took to arrive: from the first call to the last arrival.
  const deliveryS = final.lastReceivedAt > emitStart ? (final.lastReceivedAt - emitStart) / 1000 : emitS;
  const errors = Object.values(stats.errors).reduce((sum, n) => sum + n, 0);
  const missing = Math.max(0, stats.expected - final.received);
  const delivery = Histogram.from(final.delivery);
  const onTime = delivery.countAtMost(ON_TIME_MS);
  const held = options.keepWithinMs === undefined ? '' : `, held to ${count(options.keepWithinMs)} ms of reading outstanding`;
  const pace = `${options.rate === undefined ? 'unpaced' : `${count(options.rate)}/s`}${held}`;
  const failures = { ...listeners.failures, ...Object.fromEntries(Object.entries(stats.errors).map(([k, v]) => [`emit ${k}`, v])) };
  const summary = [
    `${count(listeners.ready)} of ${count(options.clients)} listeners ready (${count(listeners.failed)} failed, ${count(final.dropped)} dropped)`,
    `${options.broadcast ? 'broadcast' : 'one recipient each'}, ${options.connections} connections, ${pace}: ${count(stats.ok)} emits answered 2xx in ` +
      `${emitS.toFixed(1)} s (${count(stats.ok / emitS)}/s), ${count(stats.non2xx)} non-2xx (${count(stats.refused)} refused 503), ${count(errors)} errors`,
    `${count(stats.expected)} notifications expected, ${count(final.received)} received (${count(final.received / deliveryS)}/s), ${count(missing)} missing`,
    `${count(onTime)} within ${ON_TIME_MS} ms of their emit (${count(onTime / deliveryS)}/s)`,
  ];
  const body: ReportBody = {
    command: 'notify',
    durationS: emitS,
    window: { from: emitStart, to: emitStart + emitS * 1000 },
    options: publicOptions(options),
    counts: {
      listeners: options.clients, listenersReady: listeners.ready, listenersFailed: listeners.failed, listenersDropped: final.dropped,
      emitsSent: stats.sent, emitsOk: stats.ok, emitsNon2xx: stats.non2xx, emitsRefused: stats.refused, emitErrors: errors,
      expected: stats.expected, received: final.received, timed: final.timed, onTime, missing, extra: Math.max(0, final.received - stats.expected),
    },
    failures,
    rates: { emitsPerSecond: stats.ok / emitS, notificationsPerSecond: final.received / deliveryS, notificationsOnTimePerSecond: onTime / deliveryS },
    latency: { delivery: delivery.summary(), http: stats.latency.summary() },
    perSecond: { emits: samples.emits.summary(), notifications: samples.notifications.summary() },
    leftAt,
  };
  if (final.emits.length > 0) addPerEmit(body, summary, final);
  if (options.reconnect) addReconnect(body, summary, final);
  if (options.resume) addHistory(body, summary, final);
  return { body, summary };
}

/** --resume: what the returning listeners' histories did; repeats were dropped, so `received` counts each once. */
function addHistory(body: ReportBody, summary: string[], final: PoolSnapshot): void {
  const { duplicate = 0, skipped = 0, recovered = 0, unrecovered = 0 } = final.history;
  Object.assign(body.counts, { duplicates: duplicate, skipped, recovered, unrecovered });
  summary.push(`resume: ${count(recovered)} recovered, ${count(unrecovered)} not; ${count(duplicate)} repeats dropped, ${count(skipped)} gaps in the offsets`);
}

function addPerEmit(body: ReportBody, summary: string[], final: PoolSnapshot): void {
  const perEmit = EmitTallies.from(final.emits).summary();
  body.perEmit = perEmit;
  summary.push(
    `per broadcast (${count(perEmit.emits)}), the last one told: p50 ${perEmit.lastTold.p50} ms, slowest ${perEmit.lastTold.max} ms`,
  );
}
