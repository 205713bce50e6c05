/**
 * One call to the gateway, tried again while trying again is safe and may succeed: no answer (the connection failed,
 * was cut, or timed out), 503 (the fleet's Redis unreachable, the node overloaded or draining), 502/504 (the load
 * balancer had no node), 409 (the emit's key is being published). Between tries: the answer's Retry-After, or full
 * jitter between minDelayMs and a bound that doubles each time up to maxDelayMs. An emit is tried again under the same
 * Idempotency-Key, so that however many tries reach the fleet, it is published once.
 */
import { type WireError } from '@herald/protocol';
import { HeraldServerError } from './errors.ts';

export interface RetryOptions {
  /** Tries in all, the first included. Default 10. */
  attempts?: number;
  /** Default 100 ms. */
  minDelayMs?: number;
  /** Default 5000 ms. */
  maxDelayMs?: number;
}

/**
 * What the SDK needs of fetch: Node's global fetch is one (the default), and so is any fetch with the same shape. Named
 * here, so that the package's types stand without the DOM's or Node's.
 */
export type Fetch = (url: string, init: FetchInit) => Promise<FetchResponse>;

export interface FetchInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** An AbortSignal: the try's timeout. */
  signal?: unknown;
}

export interface FetchResponse {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

export interface CallOptions {
  fetch: Fetch;
  timeoutMs: number;
  retry: Required<RetryOptions>;
  random: () => number;
}

/** An answer as the gateway gave it. */
export interface Answer {
  status: number;
  headers: FetchResponse['headers'];
  body: { success?: boolean; data?: unknown; errors?: WireError[] };
}

const RETRYABLE = new Set([409, 502, 503, 504]);

export const DEFAULT_RETRY: Required<RetryOptions> = { attempts: 10, minDelayMs: 100, maxDelayMs: 5000 };

/** One request, no retry: the answer, or HeraldServerError with status 0 when none came. */
export async function request(options: CallOptions, url: string, init: FetchInit): Promise<Answer> {
  let response: FetchResponse;
  try {
    response = await options.fetch(url, { ...init, signal: AbortSignal.timeout(options.timeoutMs) });
  } catch (error) {
    throw new HeraldServerError(0, [], `no answer from ${url}: ${(error as Error).message}`);
  }
  const text = await response.text().catch(() => '');
  let body: Answer['body'] = {};
  try {
    body = JSON.parse(text) as Answer['body'];
  } catch {
    // Not the gateway's envelope (a load balancer's page): the status says it.
  }
  return { status: response.status, headers: response.headers, body };
}

/** Whether a failed call may succeed if tried again. */
export const retryable = (status: number): boolean => status === 0 || RETRYABLE.has(status);

/** The wait before try `attempt` + 1: the answer's Retry-After if it gave one, else full jitter. */
export function delayAfter(options: CallOptions, attempt: number, answer: Answer | undefined): number {
  const retryAfter = Number(answer?.headers.get('retry-after'));
  if (Number.isFinite(retryAfter) && retryAfter > 0) return retryAfter * 1000;
  const { minDelayMs, maxDelayMs } = options.retry;
  const bound = Math.min(maxDelayMs, minDelayMs * 2 ** (attempt - 1));
  return minDelayMs + options.random() * Math.max(0, bound - minDelayMs);
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `call` tried until it succeeds, fails for good (a status no retry can change), or has used every attempt: its
 * answer, or the last failure as HeraldServerError.
 */
export async function withRetries(options: CallOptions, call: () => Promise<Answer>): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    let answer: Answer | undefined;
    let failure: HeraldServerError;
    try {
      answer = await call();
      if (answer.status < 400) return answer;
      failure = new HeraldServerError(answer.status, answer.body.errors ?? []);
    } catch (error) {
      if (!(error instanceof HeraldServerError)) throw error;
      failure = error;
    }
    if (!retryable(failure.status) || attempt >= options.retry.attempts) throw failure;
    await sleep(delayAfter(options, attempt, answer));
  }
}
