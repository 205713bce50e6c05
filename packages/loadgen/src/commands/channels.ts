/**
 * `wsload channels`: clients on a few channels of an event with history, some of them senders broadcasting to their
 * own channel, each fetching its channel's recent history when it joins (src/channels.ts). After every client has
 * joined and `-w` seconds of warm-up, `-d` seconds of broadcasts and comings and goings are measured, then up to `--grace` seconds for the
 * deliveries still on their way. Reports, as AnyCable's broker benchmark does: rtt (a sender's emit to its answer),
 * broadcast duration (emit to each subscriber's read), history duration (REGISTER with since to the last replayed
 * notification), broadcasts received a second; and, besides, each broadcast's last subscriber and a sender reading
 * its own broadcast back.
 */
import { ChannelRun, type ChannelFigures } from '../channels.ts';
import type { ChannelsOptions } from '../options.ts';
import { pause, prepareRoster } from '../prepare.ts';
import { Progress } from '../progress.ts';
import { RateSamples } from '../rates.ts';
import { count, publicOptions, type CommandResult, type ReportBody } from '../report.ts';

export async function channels(options: ChannelsOptions, signal?: AbortSignal): Promise<CommandResult> {
  const roster = await prepareRoster(options, options.wsUrl);
  const { httpBase, userPath } = options.tokenApi;
  const run = new ChannelRun({ ...options, roster, httpBase, userPath });
  const progress = new Progress(options.quiet);
  const emits = new RateSamples();
  const received = new RateSamples();
  let measuring = false;
  progress.start((elapsedS) => {
    const head = `channels ${elapsedS.toFixed(0)}s: ${count(run.readyCount)}/${count(options.clients)} clients ready`;
    if (!measuring) return head;
    const { counts } = run.figures;
    const now = performance.now();
    return `${head}; ${count(emits.sample(counts.emitsOk, now))} emits/s, ${count(received.sample(counts.received, now))} broadcasts received/s, ${count(counts.historyFetches)} history fetches`;
  });
  try {
    await run.fill(signal);
    if (run.readyCount === 0) throw new Error(`no client is ready: ${JSON.stringify(run.figures.failures)}`);
    const readyAtStart = run.readyCount;
    run.start();
    // Not counted: the nodes settle after the fill, and the first sessions begin to end.
    await pause(options.warmupS * 1000, signal);
    run.measure();
    const from = Date.now();
    emits.begin(0, performance.now());
    received.begin(0, performance.now());
    measuring = true;
    await pause(options.durationS * 1000, signal);
    run.close();
    const to = Date.now();
    measuring = false;
    await pause(options.graceS * 1000, signal);
    progress.stop();
    return result(options, run.figures, readyAtStart, { from, to }, { emits, received });
  } finally {
    progress.stop();
    run.end();
  }
}

function result(
  options: ChannelsOptions,
  figures: ChannelFigures,
  readyAtStart: number,
  window: { from: number; to: number },
  samples: { emits: RateSamples; received: RateSamples },
): CommandResult {
  const { counts } = figures;
  const seconds = (window.to - window.from) / 1000;
  const lastTold = figures.tallies.summary().lastTold;
  const missing = Math.max(0, counts.expected - counts.received);
  const body: ReportBody = {
    command: 'channels',
    durationS: seconds,
    window,
    options: publicOptions(options),
    counts: { ...counts, clients: options.clients, readyAtStart, missing },
    failures: figures.failures,
    rates: {
      broadcastsSentPerSecond: counts.emitsOk / seconds,
      broadcastsReceivedPerSecond: counts.received / seconds,
      historyReceivedPerSecond: counts.historyReceived / seconds,
      joinsPerSecond: counts.joins / seconds,
    },
    latency: {
      rtt: figures.rtt.summary(),
      broadcast: figures.broadcast.summary(),
      lastTold,
      echo: figures.echo.summary(),
      history: figures.history.summary(),
      join: figures.join.summary(),
    },
    perSecond: { emits: samples.emits.summary(), notifications: samples.received.summary() },
  };
  const summary = [
    `${count(readyAtStart)} of ${count(options.clients)} clients ready on ${options.channels} channels; ${count(counts.joins)} joins in ${seconds.toFixed(1)} s, ` +
      `${count(counts.historyFetches)} with history (${count(counts.recovered)} recovered, ${count(counts.unrecovered)} not; ${count(counts.historyReceived)} notifications replayed)`,
    `${count(counts.emitsOk)} broadcasts answered 2xx (${count(counts.emitsOk / seconds)}/s), ${count(counts.emitsNon2xx)} non-2xx (${count(counts.emitsRefused)} refused 503), ` +
      `${count(counts.emitErrors)} errors, ${count(counts.emitsSkipped)} skipped (the sender's previous emit unanswered)`,
    `${count(counts.received)} broadcasts received (${count(counts.received / seconds)}/s) of ~${count(counts.expected)} expected (channel's clients ready at each emit), ` +
      `${count(counts.dropped)} clients dropped by a node`,
  ];
  return { body, summary };
}
