/**
 * `wsload churn`: c clients at a time, each connecting, told CONNECTED, optionally registering, and leaving
 * (close, answered by the node's close), then the next in its place, for d seconds. How many clients a
 * second a node can let in and out, and how long each phase took. Cycles started during the warm-up
 * (-w) are not counted.
 */
import { Histogram } from '../histogram.ts';
import type { ClientKind, ClientObserver, LoadClient } from '../load-client.ts';
import { newClient } from '../ws-client.ts';
import type { ChurnOptions } from '../options.ts';
import { prepareRoster } from '../prepare.ts';
import { Progress } from '../progress.ts';
import { RateSamples } from '../rates.ts';
import { count, publicOptions, type CommandResult } from '../report.ts';
import { planClient, type Roster } from '../roster.ts';

const PHASES = ['tcp', 'connected', 'register', 'left', 'cycle'] as const;

class Churn implements ClientObserver {
  readonly phases = Object.fromEntries(PHASES.map((phase) => [phase, new Histogram()])) as Record<(typeof PHASES)[number], Histogram>;
  readonly failures: Record<string, number> = {};
  completed = 0;
  failedCount = 0;
  /** Clients that closed before we asked (the node dropped them). */
  dropped = 0;
  /** performance.now() at the end of the warm-up. */
  readonly measureFrom: number;
  readonly #roster: Roster;
  readonly #timeoutMs: number;
  readonly #kind: ClientKind;
  #next = 0;
  #stopAt = 0;
  #running = 0;
  #done: (() => void) | undefined;

  constructor(roster: Roster, timeoutMs: number, warmupS: number, kind: ClientKind) {
    this.#roster = roster;
    this.#timeoutMs = timeoutMs;
    this.#kind = kind;
    this.measureFrom = performance.now() + warmupS * 1000;
  }

  run(connections: number, durationS: number, signal?: AbortSignal): Promise<void> {
    this.#stopAt = this.measureFrom + durationS * 1000;
    signal?.addEventListener('abort', () => (this.#stopAt = 0), { once: true });
    const done = new Promise<void>((resolve) => (this.#done = resolve));
    for (let i = 0; i < connections; i++) this.#startNext();
    return done;
  }

  #startNext(): void {
    if (performance.now() >= this.#stopAt) {
      if (this.#running === 0) this.#done?.();
      return;
    }
    const index = this.#next++;
    this.#running++;
    newClient(index, planClient(this.#roster, index), this, { timeoutMs: this.#timeoutMs, kind: this.#kind }).start();
  }

  #cycleEnded(): void {
    this.#running--;
    this.#startNext();
  }

  ready(client: LoadClient): void {
    client.leave();
  }

  failed(client: LoadClient, reason: string): void {
    if (client.startAt >= this.measureFrom) {
      this.failedCount++;
      this.failures[reason] = (this.failures[reason] ?? 0) + 1;
    }
    this.#cycleEnded();
  }

  closed(client: LoadClient): void {
    if (client.startAt >= this.measureFrom) {
      if (client.leftAt === 0) {
        this.dropped++;
      } else {
        this.completed++;
        this.phases.tcp.record(client.tcpAt - client.startAt);
        this.phases.connected.record(client.connectedAt - client.tcpAt);
        if (client.registerSentAt > 0) this.phases.register.record(client.readyAt - client.registerSentAt);
        this.phases.left.record(client.leftAt - client.leaveAt);
        this.phases.cycle.record(client.leftAt - client.startAt);
      }
    }
    this.#cycleEnded();
  }

  notification(): void {}
}

export async function churn(options: ChurnOptions, signal?: AbortSignal): Promise<CommandResult> {
  const roster = await prepareRoster(options, options.wsUrl);
  const churn = new Churn(roster, options.timeoutMs, options.warmupS, options.client);
  const clients = new RateSamples();
  clients.begin(0, churn.measureFrom);
  const progress = new Progress(options.quiet);
  progress.start((elapsedS) => {
    const now = performance.now();
    if (now < churn.measureFrom) return `churn ${elapsedS.toFixed(0)}s: warming up`;
    const rate = clients.sample(churn.completed, now);
    return `churn ${elapsedS.toFixed(0)}s: ${count(churn.completed)} cycles, ${count(churn.failedCount)} failed, ${count(rate)} clients/s`;
  });
  await churn.run(options.connections, options.durationS, signal);
  progress.stop();
  const durationS = (performance.now() - churn.measureFrom) / 1000;
  const latency = Object.fromEntries(PHASES.map((phase) => [phase, churn.phases[phase].summary()]));
  return {
    body: {
      command: 'churn',
      durationS,
      options: publicOptions(options),
      counts: { connections: options.connections, cycles: churn.completed, failed: churn.failedCount, dropped: churn.dropped },
      failures: churn.failures,
      rates: { clientsPerSecond: churn.completed / durationS },
      latency,
      perSecond: { clients: clients.summary() },
    },
    summary: [
      `${count(churn.completed)} clients in and out in ${durationS.toFixed(1)} s, ${options.connections} at a time: ` +
        `${count(churn.completed / durationS)} clients/s; ${count(churn.failedCount)} failed, ${count(churn.dropped)} dropped`,
    ],
  };
}
