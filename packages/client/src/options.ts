/** The client's options, their defaults, and the checks made before anything connects. */
import type { Timing } from './connection.ts';
import type { GetTokens, Tokens } from './tokens.ts';

export interface ConnectOptions {
  /** ws:// or wss:// address of the gateway (or its load balancer). */
  url: string;
  /** The API user token for the first connect; required unless `getTokens` is given. */
  apiToken?: string | undefined;
  /** The person token for the first connect, when events need one. */
  personToken?: string | undefined;
  /** Called for tokens before each connect attempt (see TokenReason), unless `refreshBeforeExpiryMs` keeps them fresh. */
  getTokens?: GetTokens | undefined;
  /** Call getTokens this long before the held tokens expire (JWT `exp`), and reuse fresh tokens on reconnect. */
  refreshBeforeExpiryMs?: number | undefined;
  /** Bounds of the random wait before each reconnect attempt. Defaults 1000 and 5000. */
  minDelayMs?: number | undefined;
  maxDelayMs?: number | undefined;
  /** Reconnect attempts in a row before giving up; 0 never reconnects. Default: unlimited. */
  maxAttempts?: number | undefined;
  /** Retry when the first connect fails with a retriable code, instead of rejecting. Default false. */
  retryFirstConnect?: boolean | undefined;
  /** Give up on an attempt that has no CONNECTED this long after the socket was made (it counts as dropped, 1006). Default 10000. */
  connectTimeoutMs?: number | undefined;
  /** After this long without a frame from the node, send a probe it must answer; 0 turns the check off. Default 30000. */
  livenessIdleMs?: number | undefined;
  /** With no frame at all this long after the probe, the connection is dropped (1006) and the client reconnects. Default 10000. */
  livenessTimeoutMs?: number | undefined;
}

/** The options with defaults applied and getTokens always present. */
export interface Settings {
  url: string;
  getTokens: GetTokens;
  /** Whether the application gave getTokens (otherwise it answers the first tokens). */
  refreshable: boolean;
  refreshBeforeExpiryMs: number | undefined;
  minDelayMs: number;
  maxDelayMs: number;
  maxAttempts: number;
  retryFirstConnect: boolean;
  timing: Timing;
}

/** The bounds of the random wait before a reconnect attempt, when the application gives none. */
export const DEFAULT_MIN_DELAY_MS = 1000;
export const DEFAULT_MAX_DELAY_MS = 5000;
/** Longer than a handshake through a busy node's admission queue, short enough that a dead address is left soon. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Half the node's ping interval: a path that died between pings is found well before the node's own check. */
export const DEFAULT_LIVENESS_IDLE_MS = 30_000;
export const DEFAULT_LIVENESS_TIMEOUT_MS = 10_000;

export function settingsOf(options: ConnectOptions): Settings {
  const { url, apiToken, personToken, getTokens, refreshBeforeExpiryMs } = options;
  const { minDelayMs = DEFAULT_MIN_DELAY_MS, maxDelayMs = DEFAULT_MAX_DELAY_MS, maxAttempts = Infinity, retryFirstConnect = false } = options;
  if (!(minDelayMs >= 0 && maxDelayMs >= minDelayMs)) throw new RangeError('need 0 <= minDelayMs <= maxDelayMs');
  if (!(maxAttempts >= 0)) throw new RangeError('maxAttempts must be 0 or more');
  if (refreshBeforeExpiryMs !== undefined && !getTokens) throw new TypeError('refreshBeforeExpiryMs needs getTokens');
  const common = { url, refreshBeforeExpiryMs, minDelayMs, maxDelayMs, maxAttempts, retryFirstConnect, timing: timingOf(options) };
  if (getTokens) return { ...common, getTokens, refreshable: true };
  if (!apiToken) throw new TypeError('HeraldClient needs apiToken or getTokens');
  const tokens: Tokens = { apiToken, personToken };
  return { ...common, getTokens: () => Promise.resolve(tokens), refreshable: false };
}

function timingOf(options: ConnectOptions): Timing {
  const { connectTimeoutMs = DEFAULT_CONNECT_TIMEOUT_MS } = options;
  const { livenessIdleMs = DEFAULT_LIVENESS_IDLE_MS, livenessTimeoutMs = DEFAULT_LIVENESS_TIMEOUT_MS } = options;
  for (const [name, value] of Object.entries({ connectTimeoutMs, livenessTimeoutMs })) {
    if (!(value > 0 && value <= MAX_TIMER_MS)) throw new RangeError(`${name} must be more than 0 and at most ${MAX_TIMER_MS}`);
  }
  if (!(livenessIdleMs >= 0 && livenessIdleMs <= MAX_TIMER_MS)) throw new RangeError(`livenessIdleMs must be 0 (off) to ${MAX_TIMER_MS}`);
  return { connectTimeoutMs, liveness: livenessIdleMs === 0 ? undefined : { idleMs: livenessIdleMs, timeoutMs: livenessTimeoutMs } };
}

/** The longest wait a timer takes as given (setTimeout fires at once past it). */
const MAX_TIMER_MS = 2 ** 31 - 1;
