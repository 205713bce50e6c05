/**
 * People's passwords, stored as scrypt hashes (node:crypto) in a self-describing PHC-style string:
 *
 *   $scrypt$ln=<log2 N>,r=<block size>,p=<parallelism>$<salt, base64>$<hash, base64>
 *
 * A hash carries its own cost, so hashes made with different costs can sit in one collection, and the cost can be
 * raised for new hashes without touching old ones. The costs measured: docs/security/tables-auth.md.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { ConfigError, GatewayError } from '../errors.ts';

export interface ScryptCost {
  /** log2 of N, the CPU and memory cost: memory is 128 * N * r bytes. */
  ln: number;
  r: number;
  p: number;
}

/**
 * The cost `hash-password` uses: OWASP's "N=2^15 (32 MiB), r=8, p=3", the equivalent of its N=2^17, r=8, p=1
 * minimum at a quarter of the memory, since a node checks logins beside tens of thousands of sockets.
 */
export const DEFAULT_COST: Readonly<ScryptCost> = Object.freeze({ ln: 15, r: 8, p: 3 });

/** A stored hash may cost at most this much to check: a hash past it is refused, not run (it could exhaust the node). */
const MAX_MEMORY_BYTES = 128 * 1024 * 1024;
const MAX_P = 16;
const SALT_BYTES = 16;
const HASH_BYTES = 32;

const PHC = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,3}),p=(\d{1,2})\$([A-Za-z0-9+/]{16,88})\$([A-Za-z0-9+/]{22,88})$/;

interface StoredHash {
  cost: ScryptCost;
  salt: Buffer;
  hash: Buffer;
}

const memoryOf = ({ ln, r }: ScryptCost): number => 128 * 2 ** ln * r;

function optionsOf(cost: ScryptCost): ScryptOptions {
  return { N: 2 ** cost.ln, r: cost.r, p: cost.p, maxmem: memoryOf(cost) + 1024 * 1024 };
}

function derive(password: string, salt: Buffer, length: number, cost: ScryptCost): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, length, optionsOf(cost), (error, key) => (error ? reject(error) : resolve(key)));
  });
}

const unpadded = (bytes: Buffer): string => bytes.toString('base64').replace(/=+$/, '');

/** What keeps a node from checking hashes of this cost, if anything. */
function costProblem(cost: ScryptCost): string | undefined {
  if (!Number.isInteger(cost.ln) || cost.ln < 1 || !Number.isInteger(cost.r) || cost.r < 1 || !Number.isInteger(cost.p) || cost.p < 1) {
    return 'ln, r and p must be positive integers';
  }
  if (memoryOf(cost) > MAX_MEMORY_BYTES) return `128 * 2^ln * r must be at most ${MAX_MEMORY_BYTES / 1024 / 1024} MiB`;
  if (cost.p > MAX_P) return `p must be at most ${MAX_P}`;
  return undefined;
}

/** A cost written as in a hash, "ln=15,r=8,p=3"; throws a ConfigError naming what is wrong. */
export function costOf(text: string): ScryptCost {
  const match = /^ln=(\d+),r=(\d+),p=(\d+)$/.exec(text);
  const cost = match ? { ln: Number(match[1]), r: Number(match[2]), p: Number(match[3]) } : undefined;
  const problem = cost === undefined ? 'write it as ln=15,r=8,p=3' : costProblem(cost);
  if (cost === undefined || problem !== undefined) throw new ConfigError(`--cost ${text}: ${problem}`);
  return cost;
}

export async function hashPassword(password: string, cost: ScryptCost = DEFAULT_COST): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, HASH_BYTES, cost);
  return `$scrypt$ln=${cost.ln},r=${cost.r},p=${cost.p}$${unpadded(salt)}$${unpadded(hash)}`;
}

/** The parts of a stored hash, or undefined when `stored` is not one this node checks (plain text, say). */
function parse(stored: unknown): StoredHash | undefined {
  if (typeof stored !== 'string') return undefined;
  const match = PHC.exec(stored);
  if (!match) return undefined;
  const [, ln, r, p, salt, hash] = match as unknown as [string, string, string, string, string, string];
  const cost = { ln: Number(ln), r: Number(r), p: Number(p) };
  if (costProblem(cost) !== undefined) return undefined;
  return { cost, salt: Buffer.from(salt, 'base64'), hash: Buffer.from(hash, 'base64') };
}

export type PasswordCheck = 'ok' | 'wrong' | 'not_hashed';

/**
 * Password checks, at most `concurrent` at once and `waiting` more queued (a check takes a thread of libuv's pool,
 * four by default, for tens to hundreds of ms, and its memory): a login flood then costs a bounded share of the
 * node, and the logins past the queue are refused UNAVAILABLE rather than held.
 */
export class PasswordChecks {
  readonly #concurrent: number;
  readonly #waiting: number;
  readonly #queue: Array<() => void> = [];
  #running = 0;

  constructor(concurrent: number, waiting: number) {
    this.#concurrent = concurrent;
    this.#waiting = waiting;
  }

  /**
   * Compares `password` with `stored` in constant time. A `stored` that is not a hash this node checks answers
   * not_hashed after the same work as a check against `decoy` (so the answer's timing tells nothing).
   */
  async check(password: string, stored: unknown, decoy: string): Promise<PasswordCheck> {
    const parsed = parse(stored);
    const against = parsed ?? (parse(decoy) as StoredHash);
    await this.#turn();
    try {
      const derived = await derive(password, against.salt, against.hash.length, against.cost);
      const same = timingSafeEqual(derived, against.hash);
      return parsed === undefined ? 'not_hashed' : same ? 'ok' : 'wrong';
    } finally {
      // The check that ends hands its place to the first waiting one, if any: #running then stays as it is.
      const next = this.#queue.shift();
      if (next) next();
      else this.#running--;
    }
  }

  async #turn(): Promise<void> {
    if (this.#running < this.#concurrent) {
      this.#running++;
      return;
    }
    if (this.#queue.length >= this.#waiting) {
      throw new GatewayError('UNAVAILABLE', 'too many logins are being checked: try again shortly', 1);
    }
    await new Promise<void>((resolve) => this.#queue.push(resolve));
  }
}

/** A hash of a random password at the default cost: what an unknown person's login is checked against. */
export const DECOY_HASH = `$scrypt$ln=${DEFAULT_COST.ln},r=${DEFAULT_COST.r},p=${DEFAULT_COST.p}$${unpadded(randomBytes(SALT_BYTES))}$${unpadded(randomBytes(HASH_BYTES))}`;
