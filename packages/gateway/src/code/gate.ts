/**
 * The can-connect gate on REGISTER: runs the event's code, when it has some, and turns a refusal (or a throw,
 * a timeout, a memory blow-up) into CAN_CONNECT_REFUSED with a clear reason, counted by event, runner and result.
 */
import type { OnEvent } from '@herald/protocol';
import type { ApiUser, Person } from '../auth/authenticator.ts';
import { GatewayError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import type { PreparedCode, SystemCalls } from './code-runner.ts';
import { canConnectRequest, type CodeRunners } from './runners.ts';

export interface GateOptions {
  /** Prepared code by event name. */
  prepared: ReadonlyMap<string, PreparedCode>;
  runners: CodeRunners;
  sys: SystemCalls;
  metrics: Metrics;
}

type Runner = 'isolate' | 'sandbox';

/** An event's code with its metric children, looked up once here rather than by label values per REGISTER. */
interface Gated {
  code: PreparedCode;
  seconds: { observe(value: number): void };
  count(result: string): void;
}

export class CanConnectGate {
  readonly #options: GateOptions;
  readonly #gated = new Map<string, Gated>();

  constructor(options: GateOptions) {
    this.#options = options;
    for (const [event, code] of options.prepared) this.#gated.set(event, this.#gate(event, code));
  }

  /** Resolves when the event has no code or its code allows; throws CAN_CONNECT_REFUSED otherwise. */
  async check(onEvent: OnEvent, apiUser: ApiUser, person: Person | undefined): Promise<void> {
    const gated = this.#gated.get(onEvent.apiName);
    if (!gated || onEvent.eventType !== 'CUSTOM_WS_EVENTS') return;
    const started = performance.now();
    const verdict = await this.#options.runners.canConnect(gated.code, canConnectRequest(apiUser, person, onEvent), this.#options.sys);
    gated.seconds.observe((performance.now() - started) / 1000);
    gated.count(verdict.canConnect ? 'allowed' : (verdict.failure ?? 'refused'));
    if (verdict.canConnect) return;
    const reason = verdict.failure ? `the event's code failed (${verdict.failure})` : "refused by the event's code";
    throw new GatewayError('CAN_CONNECT_REFUSED', verdict.errorText ? `${reason}: ${verdict.errorText}` : reason);
  }

  #gate(event: string, code: PreparedCode): Gated {
    const { canConnect, canConnectSeconds } = this.#options.metrics;
    const runner: Runner = code.inIsolate ? 'isolate' : 'sandbox';
    const results = new Map<string, { inc(): void }>();
    const count = (result: string): void => {
      let child = results.get(result);
      if (!child) results.set(result, (child = canConnect.labels({ event, runner, result })));
      child.inc();
    };
    return { code, seconds: canConnectSeconds.labels({ runner }), count };
  }
}
