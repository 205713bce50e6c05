/**
 * Token buckets per caller, in process: the bound on what a caller without credentials (or one API user from one
 * address) can make a node do through the token API and the table API. Each node counts on its own.
 */
import { isIPv6 } from 'node:net';
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config, RateLimitConfig } from '../config/schema.ts';
import { GatewayError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';

interface Bucket {
  tokens: number;
  /** performance.now() when `tokens` was last brought up to date. */
  at: number;
}

export interface RateLimiterOptions extends RateLimitConfig {
  /** The limit's name, in its refusals and its metric label. */
  name: string;
  /** What the callers of this limit are making: "token requests", "table calls". */
  what: string;
  maxCallers: number;
  metrics: Metrics;
}

/**
 * One limit: each caller may spend `burst` at once, and gets `perSecond` back each second up to `burst`. Callers are
 * kept in two generations of at most `maxCallers / 2` each: once the newer is full the older is dropped whole (a
 * caller in it starts again with a full bucket), and a caller found in the older moves to the newer, so an active
 * caller is not forgotten while it keeps calling. Memory stays bounded however many addresses call.
 */
export class RateLimiter {
  readonly #options: RateLimiterOptions;
  readonly #half: number;
  #current = new Map<string, Bucket>();
  #older = new Map<string, Bucket>();

  constructor(options: RateLimiterOptions) {
    this.#options = options;
    this.#half = Math.max(1, Math.floor(options.maxCallers / 2));
  }

  /** Spends one request of `caller`'s; throws RATE_LIMITED (with the seconds until the next one) when none is left. */
  take(caller: string, now: number = performance.now()): void {
    const { perSecond, burst } = this.#options;
    const bucket = this.#bucketOf(caller, now);
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
    bucket.at = now;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return;
    }
    const { name, what, metrics } = this.#options;
    metrics.rateLimited.inc({ limit: name });
    const retryAfterS = Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond));
    throw new GatewayError('RATE_LIMITED', `too many ${what} from this caller (${perSecond}/s, ${burst} at once): retry in ${retryAfterS} s`, retryAfterS);
  }

  #bucketOf(caller: string, now: number): Bucket {
    let bucket = this.#current.get(caller);
    if (bucket !== undefined) return bucket;
    bucket = this.#older.get(caller);
    if (bucket !== undefined) this.#older.delete(caller);
    if (this.#current.size >= this.#half) {
      this.#older = this.#current;
      this.#current = new Map();
    }
    bucket ??= { tokens: this.#options.burst, at: now };
    this.#current.set(caller, bucket);
    return bucket;
  }
}

/**
 * The caller key of a client address. An IPv6 host usually holds a whole /64, so its addresses count as one caller;
 * an IPv4-mapped IPv6 address counts as its IPv4 address.
 */
export function addressKey(address: string): string {
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1] as string;
  const [head = '', tail = ''] = address.split('%', 1)[0]!.split('::');
  const front = head === '' ? [] : head.split(':');
  const back = tail === '' ? [] : tail.split(':');
  // A dotted IPv4 tail (::ffff:0:1.2.3.4) stands for two groups.
  const width = front.length + back.length + (address.includes('.') ? 1 : 0);
  const groups = address.includes('::') ? [...front, ...Array<string>(8 - width).fill('0'), ...back] : front;
  return `${groups.slice(0, 4).map((group) => group.toLowerCase().replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** The limits of a node, one of each, from the config. */
export interface RateLimiters {
  tokenRequests: RateLimiter;
  tableCalls: RateLimiter;
  apiUserTableCalls: RateLimiter;
}

export function rateLimiters(config: Config['rateLimit'], metrics: Metrics): RateLimiters {
  const { maxCallers } = config;
  const limiter = (name: keyof RateLimiters, what: string) => new RateLimiter({ ...config[name], name, what, maxCallers, metrics });
  return {
    tokenRequests: limiter('tokenRequests', 'token requests'),
    tableCalls: limiter('tableCalls', 'table calls without an API user token'),
    apiUserTableCalls: limiter('apiUserTableCalls', 'table calls of this API user'),
  };
}

/** The caller key of a request's client (fastify's request.ip: the peer, or what server.trustProxy believes). */
export const clientOf = (request: FastifyRequest): string => addressKey(request.ip || 'unknown');

/**
 * An onRequest hook that spends one request of the caller's, before anything about the request is read: the limit
 * and the caller key as `pick` chooses them.
 */
export function limitBy(pick: (request: FastifyRequest) => [RateLimiter, string]): onRequestHookHandler {
  return (request, _reply, done) => {
    const [limiter, caller] = pick(request);
    try {
      limiter.take(caller);
    } catch (error) {
      return done(error as Error);
    }
    done();
  };
}
