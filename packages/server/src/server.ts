/**
 * The back end's side of Herald: emit (one, or a batch), and the control API, over HTTP to any node (the load
 * balancer, or the API port). Every emit carries an Idempotency-Key, one per logical emit (the caller's, or a new
 * UUID), and is tried again with it after no answer, a cut connection, a timeout, a 503 or a 409: the fleet publishes
 * it once however many tries reach it (docs/protocol.md 5.1). The API user's token is fetched and renewed by itself.
 */
import { randomUUID } from 'node:crypto';
import {
  API_TOKEN_HEADER, controlPaths, emitBatchPath, emitPath, IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, type WireError,
} from '@herald/protocol';
import { DEFAULT_RETRY, delayAfter, request, retryable, sleep, withRetries, type Answer, type CallOptions, type Fetch, type FetchInit, type RetryOptions } from './calls.ts';
import { HeraldServerError } from './errors.ts';
import { ApiTokens, type Credentials } from './tokens.ts';

export interface HeraldServerOptions {
  /** Where back ends call the fleet: the load balancer, or a node's API port (server.apiPort), e.g. `http://gateway:38247`. */
  url: string;
  /** The gateway's config userPath: its calls are under `/api/system-api/<userPath>`. */
  userPath: string;
  /** The API user's login: its token is fetched, and renewed before it expires. */
  credentials?: Credentials;
  /** Or a token to use as it is (not renewed). */
  apiToken?: string;
  /** A try not answered within this is given up (and tried again). Default 10 s. */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Default: the global fetch. */
  fetch?: Fetch;
  random?: () => number;
}

/**
 * An emit as the fleet took it: the nodes it was published to; `pending`: not to every node holding its routes (202:
 * accepted, not to be sent again; an event with history reaches them from it); `replayed`: a try before this one had
 * published it.
 */
export interface EmitResult {
  name: string;
  nodes: number;
  pending: boolean;
  replayed: boolean;
}

export interface BatchEvent {
  name: string;
  eventData: Record<string, unknown>;
  /** Default: a new UUID, kept for every try of this item. */
  idempotencyKey?: string;
}

/** An item of a batch: taken, or refused for good (or still failing when the tries ran out), with why. */
export type BatchResult = ({ ok: true } & EmitResult) | { ok: false; status: number; errors: readonly WireError[] };

/** Whom the control API acts on (docs/protocol.md 12). */
export type Target = { person: { generator: string; id: string } } | { apiUser: string };

interface ItemAnswer {
  success: boolean;
  statusCode: number;
  data?: EmittedData;
  errors?: WireError[];
  replayed?: true;
}

/** An emit's data as the gateway answers it (200, or 202 with `pending`). */
interface EmittedData {
  name: string;
  nodes: number;
  pending?: true;
}

const resultOf = ({ nodes, pending }: EmittedData): { nodes: number; pending: boolean } => ({ nodes, pending: pending === true });

export class HeraldServer {
  readonly #base: string;
  readonly #userPath: string;
  readonly #calls: CallOptions;
  readonly #tokens: ApiTokens;

  constructor(options: HeraldServerOptions) {
    const { url, userPath, credentials, apiToken } = options;
    this.#base = url.replace(/\/+$/, '');
    this.#userPath = userPath;
    this.#calls = {
      fetch: options.fetch ?? (globalThis.fetch as unknown as Fetch),
      timeoutMs: options.timeoutMs ?? 10_000,
      retry: { ...DEFAULT_RETRY, ...options.retry },
      random: options.random ?? Math.random,
    };
    if (credentials === undefined && apiToken === undefined) throw new TypeError('HeraldServer needs credentials or an apiToken');
    this.#tokens = new ApiTokens(this.#calls, this.#base, userPath, credentials !== undefined ? { credentials } : { apiToken: apiToken! });
  }

  /** Publish one emit, once, however many tries it takes. Throws HeraldServerError when refused for good or out of tries. */
  async emit(name: string, eventData: Record<string, unknown>, { idempotencyKey = randomUUID() }: { idempotencyKey?: string } = {}): Promise<EmitResult> {
    const answer = await this.#call('POST', emitPath(this.#userPath), { name, eventData }, { [IDEMPOTENCY_KEY_HEADER]: idempotencyKey });
    return { name, ...resultOf(answer.body.data as EmittedData), replayed: answer.headers.get(IDEMPOTENT_REPLAYED_HEADER) === 'true' };
  }

  /**
   * Publish many emits in one call (docs/protocol.md 5.2), each once: the items a try could not take now (503, 409) are
   * sent again, alone, with their keys, until taken or out of tries. Answers one result per event, in order.
   */
  async emitBatch(events: readonly BatchEvent[]): Promise<BatchResult[]> {
    const keyed = events.map((event) => ({ ...event, idempotencyKey: event.idempotencyKey ?? randomUUID() }));
    const results: BatchResult[] = new Array(events.length);
    let todo = keyed.map((_, i) => i);
    for (let attempt = 1; todo.length > 0; attempt++) {
      const answer = await this.#call('POST', emitBatchPath(this.#userPath), { events: todo.map((i) => keyed[i]) });
      const items = (answer.body.data as { results: ItemAnswer[] }).results;
      const again: number[] = [];
      for (const [j, item] of items.entries()) {
        const i = todo[j]!;
        if (item.success) results[i] = { ok: true, name: keyed[i]!.name, ...resultOf(item.data!), replayed: item.replayed === true };
        else if (retryable(item.statusCode) && attempt < this.#calls.retry.attempts) again.push(i);
        else results[i] = { ok: false, status: item.statusCode, errors: item.errors ?? [] };
      }
      todo = again;
      if (todo.length > 0) await sleep(delayAfter(this.#calls, attempt, answer));
    }
    return results;
  }

  /** Close the target's connections on every node (4003, or 4503 with reconnect false). */
  async disconnect(target: Target, options: { reason?: string; reconnect?: boolean } = {}): Promise<{ nodes: number }> {
    return (await this.#call('POST', controlPaths(this.#userPath).disconnect, { ...target, ...options })).body.data as { nodes: number };
  }

  /** Revoke the target's tokens issued until now, and close their connections on every node (4504). */
  async revoke(target: Target): Promise<{ nodes: number; revokedAt: number }> {
    return (await this.#call('POST', controlPaths(this.#userPath).revoke, target)).body.data as { nodes: number; revokedAt: number };
  }

  /**
   * How many connections a person has across the fleet (`person`: `<generator>:<id>`), or how many hold a subscription
   * to an event (`event`): the answer's data (docs/protocol.md 12.3).
   */
  async presence(query: { person: string } | { event: string }): Promise<Record<string, unknown>> {
    const search = new URLSearchParams(query as Record<string, string>);
    return (await this.#call('GET', `${controlPaths(this.#userPath).presence}?${search}`)).body.data as Record<string, unknown>;
  }

  /** One call with the API user's token, tried again while that is safe; a refused token is renewed once. */
  #call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
    const url = `${this.#base}${path}`;
    const once = async (): Promise<Answer> => {
      for (let renewed = false; ; renewed = true) {
        const token = await this.#tokens.current();
        const init: FetchInit = { method, headers: { ...headers, [API_TOKEN_HEADER]: token, ...(body === undefined ? {} : { 'content-type': 'application/json' }) } };
        if (body !== undefined) init.body = JSON.stringify(body);
        const answer = await request(this.#calls, url, init);
        if (answer.status !== 401 || renewed || !this.#tokens.refused(token)) return answer;
      }
    };
    return withRetries(this.#calls, once).catch((error: unknown) => {
      throw error instanceof HeraldServerError ? error : new HeraldServerError(0, [], String(error));
    });
  }
}
