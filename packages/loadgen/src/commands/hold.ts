/**
 * `wsload fill` and `wsload listen`: N clients, each with its tokens and its own subscription, connected R per
 * second and held for --hold seconds (or until Ctrl-C). fill reports how they got in; listen also reports
 * the notifications they received while held (delivery latency for those carrying `sentAt`). With
 * --reconnect, clients the node drops come back, and the report says how long they were away.
 */
import { Histogram } from '../histogram.ts';
import type { HoldOptions } from '../options.ts';
import { pause, prepareRoster } from '../prepare.ts';
import { Progress } from '../progress.ts';
import { RateSamples } from '../rates.ts';
import { addReconnect, count, publicOptions, type CommandResult, type ReportBody } from '../report.ts';
import type { PoolSnapshot } from '../snapshot.ts';
import { clientGroup } from '../worker-pools.ts';

/** `rate` is clients/s while they come in, then notifications/s while they are held. */
function progressLine(options: HoldOptions, s: PoolSnapshot, elapsedS: number, opened: boolean, rate: number): string {
  const line = `${options.command} ${elapsedS.toFixed(0)}s: ${count(s.started)}/${count(options.clients)} started, ` +
    `${count(s.ready)} ready, ${count(s.failed)} failed, ${count(s.dropped)} dropped${options.reconnect ? ` (${count(s.dropped - s.back)} away)` : ''}`;
  if (!opened) return `${line}, ${count(rate)} clients/s`;
  return options.command === 'listen' ? `${line}; holding, ${count(s.received)} received (${count(rate)}/s)` : `${line}; holding`;
}

export async function hold(options: HoldOptions, signal?: AbortSignal): Promise<CommandResult> {
  const roster = await prepareRoster(options, options.wsUrl);
  const { rate, maxPending, perAddress, timeoutMs, reconnect } = options;
  const group = clientGroup({ roster, first: options.first, count: options.clients, rate, maxPending, perAddress, timeoutMs, reconnect, tallyEmits: false, client: options.client, readRate: options.readRate }, options.perWorker);
  const clients = new RateSamples();
  const notifications = new RateSamples();
  const began = performance.now();
  clients.begin(0, began);
  notifications.begin(0, began);
  let opened = false;
  const progress = new Progress(options.quiet);
  progress.start(async (elapsedS) => {
    const snapshot = await group.snapshot();
    const now = performance.now();
    // Clients/s is sampled while they come in, notifications/s while they are held.
    if (opened) return progressLine(options, snapshot, elapsedS, true, notifications.sample(snapshot.received, now));
    notifications.begin(snapshot.received, now);
    return progressLine(options, snapshot, elapsedS, false, clients.sample(snapshot.ready, now));
  });
  try {
    await group.open(signal);
    const openedAt = performance.now();
    opened = true;
    await pause(options.holdS * 1000, signal);
    const heldS = (performance.now() - openedAt) / 1000;
    const final = await group.snapshot();
    progress.stop();
    // Every client goes at once in `finally`, right after this: the bench times what the node does from here.
    const leftAt = new Date().toISOString();
    return result(options, final, heldS, options.command === 'listen' ? notifications : undefined, clients, leftAt);
  } finally {
    progress.stop();
    await group.close();
  }
}

function result(options: HoldOptions, s: PoolSnapshot, heldS: number, notifications: RateSamples | undefined, clients: RateSamples, leftAt: string): CommandResult {
  // From the first client's start to the last one's ready, as the clients saw it (not the workers' start-up).
  const openS = Math.max(0.001, (s.lastReadyAt - s.firstStartAt) / 1000);
  const registered = options.event === undefined ? 0 : s.ready;
  const latency = Object.fromEntries(Object.entries(s.phases).map(([phase, data]) => [phase, Histogram.from(data).summary()]));
  const body: ReportBody = {
    command: options.command,
    durationS: openS + heldS,
    options: publicOptions(options),
    counts: { clients: options.clients, started: s.started, connected: s.connected, registered, ready: s.ready, failed: s.failed, dropped: s.dropped },
    failures: s.failures,
    rates: { clientsPerSecond: s.ready / openS },
    latency,
    perSecond: { clients: clients.summary() },
    leftAt,
  };
  const summary = [
    `${count(s.ready)} of ${count(options.clients)} clients ready (${count(s.connected)} connected, ${count(registered)} registered, ` +
      `${count(s.failed)} failed) in ${openS.toFixed(1)} s: ${count(s.ready / openS)} clients/s; held ${heldS.toFixed(1)} s, ${count(s.dropped)} dropped`,
  ];
  if (notifications) {
    body.counts.received = s.received;
    body.counts.timed = s.timed;
    body.rates.notificationsPerSecond = s.received / heldS;
    body.latency.delivery = Histogram.from(s.delivery).summary();
    body.perSecond.notifications = notifications.summary();
    summary.push(`${count(s.received)} notifications received in ${heldS.toFixed(1)} s (${count(s.timed)} with sentAt): ${count(s.received / heldS)}/s`);
  }
  if (options.reconnect) addReconnect(body, summary, s);
  return { body, summary };
}
