/**
 * An emit's Idempotency-Key (docs/protocol.md section 5): a back end that retries an emit it does not know the fate of
 * (a timeout, a dropped connection, a 503) sends the same key, and the fleet publishes it once. The key is claimed
 * fleet-wide through the broker before publishing (exactly one of two nodes taking it at once wins; the other is told
 * it is in use, 409), and settled after with the answer, which every repeat within the window gets back, with
 * `idempotent-replayed: true`. A repeat with another body is the caller's mistake (422), and nothing is published.
 * An emit refused before publishing (403, 503 OVERLOADED, Redis unreachable) frees its key, so that its retry is taken.
 */
import { hash } from 'node:crypto';
import { IDEMPOTENCY_KEY_FORM, IDEMPOTENCY_KEY_HEADER } from '@herald/protocol';
import type { ApiUser } from '../auth/authenticator.ts';
import type { Broker, Once } from '../broker/broker.ts';
import { GatewayError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';

/**
 * How long a claim holds its key while its emit is published: past it, a publisher that died lets the key go, and a
 * retry publishes (an event with history then appends nothing twice: its routes know the key). Publishing takes
 * milliseconds; a node's drain deadline is the longest anything of it lives.
 */
const PENDING_MS = 10_000;

/** A repeat that finds its key in use is told to come back after this. */
const IN_USE_RETRY_AFTER_S = 1;

/**
 * A published emit: the nodes it reached; `pending`: not every node holding its routes (the broker's DeliveryPending:
 * accepted, answered 202, never to be retried).
 */
export interface Published {
  nodes: number;
  pending: boolean;
}

/** What a repeat is answered with: the first emit's answer (how it was published; its name is the repeat's). */
export type Replayed = Published;

/** A claimed key: settle it once the emit is published (with how) or refused (without). */
export interface ClaimedKey {
  settle(published: Published | undefined): Promise<void>;
  readonly once: Once;
}

/** The answer a key keeps: the nodes reached, and "+" when delivery was pending (202). */
const answerOf = ({ nodes, pending }: Published): string => `${nodes}${pending ? '+' : ''}`;
const publishedOf = (answer: string): Published => ({ nodes: Number.parseInt(answer, 10), pending: answer.endsWith('+') });

/** 22 characters of base64url SHA-256: 132 bits, no brace, fixed length whatever the input (one call, no Hash object). */
const digestOf = (text: string): string => hash('sha256', text, 'base64url').slice(0, 22);

/** What herald_emits_idempotent_total counts. */
const RESULTS = ['published', 'replayed', 'conflict', 'in_use', 'freed', 'unsettled'] as const;
type Counted = Record<(typeof RESULTS)[number], { inc(): void }>;

export class IdempotencyKeys {
  readonly #broker: Broker;
  /** Each result's counter, bound once: a label looked up at every emit costs a hash. */
  readonly #counted: Counted;
  readonly #windowMs: number;

  constructor(broker: Broker, metrics: Metrics, windowSeconds: number) {
    this.#broker = broker;
    this.#counted = Object.fromEntries(RESULTS.map((result) => [result, metrics.idempotentEmits.labels(result)])) as Counted;
    this.#windowMs = windowSeconds * 1000;
  }

  /** The header's value checked: undefined (no key), or the key. Throws BAD_REQUEST naming the header. */
  static read(value: string | undefined): string | undefined {
    if (value === undefined) return undefined;
    if (!IDEMPOTENCY_KEY_FORM.test(value)) throw new GatewayError('BAD_REQUEST', `the ${IDEMPOTENCY_KEY_HEADER} header must be 1 to 255 printable ASCII characters`);
    return value;
  }

  /**
   * Claim `key` of `apiUser` for the emit `name`, `eventData`: a claim to settle, or what a repeat is answered (the
   * first emit's answer). Throws IDEMPOTENCY_KEY_REUSED (another body), IDEMPOTENCY_KEY_IN_USE (being published), or
   * UNAVAILABLE (Redis unreachable: nothing was published).
   */
  async claim(apiUser: ApiUser, key: string, name: string, eventData: Record<string, unknown>): Promise<ClaimedKey | Replayed> {
    const once: Once = { id: digestOf(`${apiUser.name}\n${key}`), windowMs: this.#windowMs };
    const digest = digestOf(`${name}\n${JSON.stringify(eventData)}`);
    const claimed = await this.#broker.claim(once, digest, PENDING_MS);
    if (claimed.state === 'new') return this.#claimed(once, digest);
    if (claimed.digest !== digest) {
      this.#counted.conflict.inc();
      throw new GatewayError('IDEMPOTENCY_KEY_REUSED', `the ${IDEMPOTENCY_KEY_HEADER} ${JSON.stringify(key)} was used for another emit within the last ${this.#windowMs / 1000} s`);
    }
    if (claimed.state === 'pending') {
      this.#counted.in_use.inc();
      throw new GatewayError('IDEMPOTENCY_KEY_IN_USE', `an emit with the ${IDEMPOTENCY_KEY_HEADER} ${JSON.stringify(key)} is being published`, IN_USE_RETRY_AFTER_S);
    }
    this.#counted.replayed.inc();
    return publishedOf(claimed.answer);
  }

  #claimed(once: Once, digest: string): ClaimedKey {
    return {
      once,
      settle: async (published) => {
        this.#counted[published === undefined ? 'freed' : 'published'].inc();
        // A settle that fails leaves the claim to run out (PENDING_MS): the emit's answer stands either way. Only what
        // varies is kept (the body's digest says the rest): a key costs Redis less.
        await this.#broker.settle(once, digest, published === undefined ? undefined : answerOf(published)).catch(() => {
          this.#counted.unsettled.inc();
        });
      },
    };
  }
}

export const isReplayed = (claim: ClaimedKey | Replayed): claim is Replayed => 'pending' in claim;
