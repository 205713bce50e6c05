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

export class CanConnectGate {
  readonly #options: GateOptions;

  constructor(options: GateOptions) {
    this.#options = options;
  }

  /** Resolves when the event has no code or its code allows; throws CAN_CONNECT_REFUSED otherwise. */
  async check(onEvent: OnEvent, apiUser: ApiUser, person: Person | undefined): Promise<void> {
    const { prepared, runners, sys, metrics } = this.#options;
    const code = prepared.get(onEvent.apiName);
    if (!code || onEvent.eventType !== 'CUSTOM_WS_EVENTS') return;
    const runner = code.lean ? 'isolate' : 'sandbox';
    const started = performance.now();
    const verdict = await runners.canConnect(code, canConnectRequest(apiUser, person, { ...onEvent }), sys);
    metrics.canConnectSeconds.observe({ runner }, (performance.now() - started) / 1000);
    const result = verdict.canConnect ? 'allowed' : (verdict.failure ?? 'refused');
    metrics.canConnect.inc({ event: onEvent.apiName, runner, result });
    if (verdict.canConnect) return;
    const reason = verdict.failure ? `the event's code failed (${verdict.failure})` : "refused by the event's code";
    throw new GatewayError('CAN_CONNECT_REFUSED', verdict.errorText ? `${reason}: ${verdict.errorText}` : reason);
  }
}
