/**
 * Clients on a few channels, some of them senders, each fetching its channel's recent history when it joins: the
 * scenario of AnyCable's broker benchmark, on Herald's terms (docs/benchmarks/fleet.md). A channel is a route of an
 * event with history (criteria `recipientId` = the channel's number); a broadcast is an emit to that route
 * (emit-event-ws) made by a sender on an HTTP connection of its own, as a back end would on the sender's behalf;
 * a history fetch is a REGISTER with `since`, `history` notifications behind the latest position of the channel that
 * this run's clients have seen (the protocol resumes from a position, not from a time).
 *
 * Each client leaves after about `sessionS` and joins again at once, so that history fetches go on all through the
 * broadcasts, as the reference's virtual users came and went. Every figure is taken in the window between `measure`
 * and `close`: emits written then, and their deliveries whenever they arrive; joins whose REGISTER went then.
 */
import { API_TOKEN_HEADER, emitPath } from '@herald/protocol';
import { EmitTallies } from './emit-tallies.ts';
import { clockMs, sentAtOf, type FramePosition } from './frames.ts';
import { Histogram } from './histogram.ts';
import { HttpConnection, jsonPostHead } from './http-connection.ts';
import type { ClientObserver, HistoryOutcome, LoadClient } from './load-client.ts';
import type { ChannelsOptions } from './options.ts';
import { paced } from './pool.ts';
import { pause } from './prepare.ts';
import { planClient, type Roster } from './roster.ts';
import { sourceAddress } from './source-addresses.ts';
import { newClient } from './ws-client.ts';

/** A run: the options of `wsload channels` that shape it (options.ts says what each is), and where it emits. */
export type ChannelSpec = Pick<ChannelsOptions, 'clients' | 'channels' | 'sendersRatio' | 'sendRate' | 'history' | 'sessionS' | 'connectRate' | 'timeoutMs' | 'perAddress' | 'client'> & {
  roster: Roster;
  /** The load balancer's (or a node's) http://host:port: where senders emit. */
  httpBase: string;
  userPath: string;
};

/** The figures of a window; latencies in ms. */
export interface ChannelFigures {
  rtt: Histogram;
  broadcast: Histogram;
  echo: Histogram;
  history: Histogram;
  join: Histogram;
  tallies: EmitTallies;
  counts: Record<ChannelCount, number>;
  failures: Record<string, number>;
}

export type ChannelCount =
  | 'emitsSent' | 'emitsOk' | 'emitsNon2xx' | 'emitsRefused' | 'emitErrors' | 'emitsSkipped' | 'expected' | 'received'
  | 'historyFetches' | 'historyReceived' | 'recovered' | 'unrecovered' | 'joins' | 'dropped';

/** Each client's join: when its REGISTER went, and whether it asked for history. */
interface Join { withSince: boolean; replayTo: number | undefined }

const RETRY_MS = 1000;
/** Tallied emits at most (the last subscriber of each): a window at 10× the scenario's rate makes ~300,000. */
const TALLY_LIMIT = 1_000_000;

export const isSender = (index: number, ratio: number): boolean => Math.floor((index + 1) * ratio) > Math.floor(index * ratio);
export const channelOf = (index: number, channels: number): number => index % channels;

/** The latest position seen on each channel, from which a joining client asks `history` back. */
export class ChannelPositions {
  readonly #latest = new Map<number, FramePosition>();

  see(channel: number, position: FramePosition | undefined): void {
    const latest = this.#latest.get(channel);
    if (position && (!latest || latest.epoch !== position.epoch || position.offset > latest.offset)) this.#latest.set(channel, position);
  }

  sinceFor(channel: number, back: number): FramePosition | undefined {
    const latest = this.#latest.get(channel);
    return back <= 0 || !latest ? undefined : { epoch: latest.epoch, offset: Math.max(0, latest.offset - back) };
  }
}

function emptyFigures(): ChannelFigures {
  const counts = Object.fromEntries(
    (['emitsSent', 'emitsOk', 'emitsNon2xx', 'emitsRefused', 'emitErrors', 'emitsSkipped', 'expected', 'received', 'historyFetches',
      'historyReceived', 'recovered', 'unrecovered', 'joins', 'dropped'] as const).map((name) => [name, 0]),
  ) as Record<ChannelCount, number>;
  return { rtt: new Histogram(), broadcast: new Histogram(), echo: new Histogram(), history: new Histogram(), join: new Histogram(), tallies: new EmitTallies(TALLY_LIMIT), counts, failures: {} };
}

/** A sender's HTTP connection and the emits it made that it has not yet read back on its own socket. */
interface Sender { connection: HttpConnection; busy: boolean; own: Set<number>; timer: NodeJS.Timeout | undefined }

export class ChannelRun implements ClientObserver {
  figures = emptyFigures();
  readonly #spec: ChannelSpec;
  readonly #positions = new ChannelPositions();
  readonly #clients: Array<LoadClient | undefined> = [];
  readonly #joins = new Map<LoadClient, Join>();
  readonly #senders = new Map<number, Sender>();
  readonly #readyOn: number[];
  readonly #head: string;
  readonly #timers = new Set<NodeJS.Timeout>();
  #ready = 0;
  #running = true;
  /** The window, epoch ms: emits written in it count, with their deliveries. */
  #from = Infinity;
  #to = Infinity;

  constructor(spec: ChannelSpec) {
    this.#spec = spec;
    this.#readyOn = new Array<number>(spec.channels).fill(0);
    this.#head = jsonPostHead(new URL(spec.httpBase), emitPath(spec.userPath), { [API_TOKEN_HEADER]: spec.roster.apiToken });
  }

  get readyCount(): number {
    return this.#ready;
  }

  /** Every client joins, `connectRate` a second; answers once each is ready or has failed once. */
  async fill(signal: AbortSignal | undefined): Promise<void> {
    await paced(this.#spec.clients, this.#spec.connectRate, signal, (i) => this.#join(i));
    const until = performance.now() + this.#spec.timeoutMs;
    while (this.#ready + Object.values(this.figures.failures).reduce((a, b) => a + b, 0) < this.#spec.clients && performance.now() < until && !signal?.aborted) {
      await pause(100, signal);
    }
  }

  /** The figures start again from here: the window opens. */
  measure(): void {
    this.figures = emptyFigures();
    this.#from = clockMs();
  }

  /** Senders start, clients begin to come and go. */
  start(): void {
    const { clients, sendersRatio, sessionS } = this.#spec;
    for (let i = 0; i < clients; i++) {
      if (isSender(i, sendersRatio)) this.#startSender(i);
      // The first sessions end spread over one session's length, so that joins go on at an even pace.
      if (sessionS > 0) this.#later(Math.random() * sessionS * 1000, () => this.#rejoin(i));
    }
  }

  /** No more emits or joins; deliveries of the window's emits still count until `end`. */
  close(): void {
    this.#to = clockMs();
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    for (const sender of this.#senders.values()) clearTimeout(sender.timer);
  }

  /** Every client dropped, every connection closed. */
  end(): void {
    this.#running = false;
    this.close();
    for (const client of this.#clients) client?.terminate();
    for (const sender of this.#senders.values()) sender.connection.close();
  }

  #later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.#running) run();
    }, ms);
    this.#timers.add(timer);
  }

  #join(index: number): void {
    const { roster, channels, history, timeoutMs, perAddress, client: kind } = this.#spec;
    const channel = channelOf(index, channels);
    const plan = { ...planClient(roster, index), recipient: String(channel) };
    const since = this.#positions.sinceFor(channel, history);
    const client = newClient(index, plan, this, { localAddress: sourceAddress(index, perAddress), timeoutMs, resume: true, kind }, since);
    this.#clients[index] = client;
    this.#joins.set(client, { withSince: since !== undefined, replayTo: undefined });
    client.start();
  }

  /** The client's session is over: it leaves, and the next one joins at once. */
  #rejoin(index: number): void {
    const client = this.#clients[index];
    if (client?.state === 'ready') {
      this.#left(client);
      client.leave();
    } else if (client) {
      // Still joining (or waiting to try again): it gives way to the next one.
      this.#joins.delete(client);
      client.terminate();
    }
    this.#join(index);
    const { sessionS } = this.#spec;
    this.#later(sessionS * 1000 * (0.5 + Math.random()), () => this.#rejoin(index));
  }

  #left(client: LoadClient): void {
    if (!this.#joins.delete(client)) return;
    this.#ready--;
    this.#readyOn[Number(client.plan.recipient)]!--;
  }

  ready(client: LoadClient): void {
    const join = this.#joins.get(client);
    if (!join) return;
    this.#ready++;
    const channel = Number(client.plan.recipient);
    this.#readyOn[channel]!++;
    const reply = client.replyPosition;
    this.#positions.see(channel, reply);
    const counted = this.#inWindow(client.registerSentAt);
    if (counted) {
      this.figures.counts.joins++;
      this.figures.join.record(client.readyAt - client.registerSentAt);
    }
    if (!join.withSince) return;
    if (counted) this.figures.counts.historyFetches++;
    const behind = reply && client.position?.epoch === reply.epoch && client.position.offset < reply.offset;
    if (behind) join.replayTo = reply.offset;
    else if (counted) this.figures.history.record(client.readyAt - client.registerSentAt);
  }

  failed(client: LoadClient, reason: string): void {
    if (!this.#joins.delete(client)) return;
    this.figures.failures[reason] = (this.figures.failures[reason] ?? 0) + 1;
    this.#retry(client);
  }

  /** A close this run did not ask for (the node dropped the client): it joins again after a while, as an SDK does. */
  closed(client: LoadClient, code: number): void {
    if (!this.#joins.has(client)) return;
    this.#left(client);
    if (!this.#running || client.state === 'leaving') return;
    this.figures.counts.dropped++;
    this.figures.failures[`closed ${code}`] = (this.figures.failures[`closed ${code}`] ?? 0) + 1;
    this.#retry(client);
  }

  /** The client's slot joins again after a while, unless its session ended meanwhile and another took the slot. */
  #retry(client: LoadClient): void {
    this.#later(RETRY_MS, () => {
      if (this.#clients[client.index] === client) this.#join(client.index);
    });
  }

  history(_client: LoadClient, what: HistoryOutcome): void {
    if (what === 'recovered' || what === 'unrecovered') this.figures.counts[what]++;
  }

  notification(client: LoadClient, frame: Buffer): void {
    const join = this.#joins.get(client);
    if (!join) return;
    const position = client.position;
    this.#positions.see(Number(client.plan.recipient), position);
    if (join.replayTo !== undefined && position !== undefined && position.offset <= join.replayTo) return this.#replayed(client, join, position.offset);
    const sentAt = sentAtOf(frame);
    if (!(sentAt >= this.#from && sentAt <= this.#to)) return;
    const latency = clockMs() - sentAt;
    const { figures } = this;
    figures.counts.received++;
    figures.broadcast.record(latency);
    figures.tallies.record(sentAt, latency);
    if (this.#senders.get(client.index)?.own.delete(sentAt)) figures.echo.record(latency);
  }

  /** A notification of the history fetched at join; the last one ends the fetch. */
  #replayed(client: LoadClient, join: Join, offset: number): void {
    const counted = this.#inWindow(client.registerSentAt);
    if (counted) this.figures.counts.historyReceived++;
    if (offset < join.replayTo!) return;
    join.replayTo = undefined;
    if (counted) this.figures.history.record(performance.now() - client.registerSentAt);
  }

  /** A `performance.now()` instant within the window. */
  #inWindow(at: number): boolean {
    const epochMs = performance.timeOrigin + at;
    return epochMs >= this.#from && epochMs <= this.#to;
  }

  #startSender(index: number): void {
    const url = new URL(this.#spec.httpBase);
    let sender = this.#senders.get(index);
    if (!sender) {
      const connection = new HttpConnection({ host: url.hostname, port: Number(url.port || 80), timeoutMs: this.#spec.timeoutMs });
      this.#senders.set(index, (sender = { connection, busy: false, own: new Set(), timer: undefined }));
    }
    this.#schedule(index, sender, Math.random());
  }

  /** The next emit in `share` (mean 1) of a sender's mean interval. */
  #schedule(index: number, sender: Sender, share: number): void {
    sender.timer = setTimeout(() => {
      this.#send(index, sender);
      if (this.#running && clockMs() < this.#to) this.#schedule(index, sender, 0.5 + Math.random());
    }, (share * 1000) / this.#spec.sendRate);
  }

  /** A sender still waiting for its previous answer skips this emit (counted): its pace is what saturates first. */
  #send(index: number, sender: Sender): void {
    if (this.#clients[index]?.state !== 'ready') return;
    const { counts } = this.figures;
    if (sender.busy) {
      counts.emitsSkipped++;
      return;
    }
    const channel = Number(this.#clients[index]!.plan.recipient);
    const sentAt = clockMs().toFixed(3);
    const body = `{"name":"${this.#spec.roster.event}","eventData":{"recipientId":"${channel}","sentAt":${sentAt}}}`;
    sender.busy = true;
    sender.own.add(Number(sentAt));
    counts.emitsSent++;
    const writtenAt = performance.now();
    const audience = this.#readyOn[channel]!;
    sender.connection.send(`${this.#head}${body.length}\r\n\r\n${body}`, (status, error) => {
      sender.busy = false;
      this.#answered(status, error, performance.now() - writtenAt, audience);
    });
  }

  #answered(status: number, error: string | undefined, ms: number, audience: number): void {
    const { counts, failures } = this.figures;
    if (error !== undefined) {
      counts.emitErrors++;
      failures[`emit ${error}`] = (failures[`emit ${error}`] ?? 0) + 1;
      return;
    }
    this.figures.rtt.record(ms);
    if (status >= 200 && status < 300) {
      counts.emitsOk++;
      counts.expected += audience;
    } else {
      counts.emitsNon2xx++;
      if (status === 503) counts.emitsRefused++;
    }
  }
}
