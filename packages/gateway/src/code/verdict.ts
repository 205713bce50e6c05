/**
 * Calling `main` and reading what it returned, the same way in every runner. `outcomeOf` runs beside the
 * code (inside the isolate or the worker) so that only plain values cross back; the node turns its
 * Outcome into a verdict with `verdictOf`.
 */
import { failed, type CanConnectVerdict, type RunnerLimits } from './code-runner.ts';

export type Outcome =
  | { kind: 'ok'; canConnect: boolean; errorText?: string }
  | { kind: 'threw'; text: string }
  | { kind: 'bad'; text: string };

/**
 * Call main(g) and check its answer: at once when main answers with a value (or throws), as a promise when it
 * answers with one (an async main). SELF-CONTAINED: the isolate runner evaluates this function's own source
 * (`outcomeOf.toString()`) inside each isolate, so it may use nothing from this module.
 */
export function outcomeOf(main: unknown, g: unknown): Outcome | Promise<Outcome> {
  const MAX_TEXT = 1000;
  const clip = (text: string): string => (text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text);
  const kindOf = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value);
  const threw = (error: unknown): Outcome => {
    // A thrown value may be anything, even one whose message getter or toString throws in turn.
    let text: string;
    try {
      const { name, code, message } = error as { name?: unknown; code?: unknown; message?: unknown };
      text = typeof message === 'string' ? `${String(name ?? 'Error')}${code ? ` [${String(code)}]` : ''}: ${message}` : String(error);
    } catch {
      text = `a value that cannot be shown (${typeof error})`;
    }
    return { kind: 'threw', text: clip(text) };
  };
  const checked = (value: unknown): Outcome => {
    const kind = kindOf(value);
    if (kind !== 'object') return { kind: 'bad', text: `it returned ${kind}` };
    let canConnect: unknown;
    let errorText: unknown;
    try {
      ({ canConnect, errorText } = value as { canConnect: unknown; errorText: unknown });
    } catch (error) {
      return threw(error);
    }
    if (typeof canConnect !== 'boolean') return { kind: 'bad', text: `canConnect is ${kindOf(canConnect)}` };
    if (errorText !== undefined && typeof errorText !== 'string') return { kind: 'bad', text: `errorText is ${kindOf(errorText)}` };
    return canConnect || errorText === undefined ? { kind: 'ok', canConnect } : { kind: 'ok', canConnect, errorText: clip(errorText) };
  };
  if (typeof main !== 'function') return { kind: 'bad', text: 'main is not a function' };
  try {
    const value: unknown = main(g);
    const then = typeof value === 'object' && value !== null ? (value as { then?: unknown }).then : undefined;
    return typeof then === 'function' ? Promise.resolve(value).then(checked, threw) : checked(value);
  } catch (error) {
    return threw(error);
  }
}

export function verdictOf(outcome: Outcome): CanConnectVerdict {
  switch (outcome.kind) {
    case 'ok':
      return outcome.errorText === undefined
        ? { canConnect: outcome.canConnect }
        : { canConnect: outcome.canConnect, errorText: outcome.errorText };
    case 'threw':
      return failed('threw', `can-connect code threw ${outcome.text}`);
    case 'bad':
      return failed('bad_result', `can-connect code must return { canConnect: boolean, errorText?: string }: ${outcome.text}`);
  }
}

export const timedOut = (limits: RunnerLimits): CanConnectVerdict =>
  failed('timeout', `can-connect code did not answer within ${limits.timeoutMs} ms`);

export const outOfMemory = (limits: RunnerLimits): CanConnectVerdict =>
  failed('memory', `can-connect code went over its memory limit (${limits.memoryMb} MB)`);

/** What a thrown value says, for a verdict's text: its message, or the value itself. */
export const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export const unavailable = (why: string): CanConnectVerdict => failed('unavailable', `can-connect code could not run: ${why}`);

/** Outcomes arrive from code the node does not trust (a sandbox worker may say anything): check their shape. */
export function isOutcome(value: unknown): value is Outcome {
  if (typeof value !== 'object' || value === null) return false;
  const { kind, text, canConnect, errorText } = value as Record<string, unknown>;
  if (kind === 'threw' || kind === 'bad') return typeof text === 'string';
  return kind === 'ok' && typeof canConnect === 'boolean' && (errorText === undefined || typeof errorText === 'string');
}
