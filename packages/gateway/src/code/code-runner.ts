/**
 * Can-user-connect code: an event may carry code that decides, per REGISTER, whether a client may
 * subscribe. A CodeRunner runs it somewhere that cannot harm the node: an isolate (isolate.ts) for isolate-safe
 * code, a sandboxed worker process or container (sandbox.ts) for the rest. See prepare.ts for which is which.
 */
import type { Filter, Row } from '../data/data-source.ts';

/** The connection's API user, as the code sees it. */
export interface CodeApiUser {
  name: string;
  groups: string[];
}

/**
 * What the code sees as `g.req`: a copy, so nothing it does reaches the node's own objects. `g.req.auth` also holds
 * each under API Maker's name, so code written for API Maker reads what it always read: `authAMUser` is the API user
 * (x-am-authorization), `authAMDB` the person (x-am-user-authorization): see
 * https://docs.apimaker.dev/v1/docs/pre-defined-terms/global-object-g.html.
 */
export interface CanConnectRequest {
  auth: {
    apiUser: CodeApiUser;
    /** The person token's fields (its generator's `select`), when the connection has one. */
    person?: Readonly<Record<string, unknown>>;
    /** API Maker's name for apiUser. */
    authAMUser: CodeApiUser;
    /** API Maker's name for person: absent with it. */
    authAMDB?: Readonly<Record<string, unknown>>;
  };
  /** The REGISTER entry: `{ eventType, apiName, getEventData, select?, condition? }`. */
  eventData: object;
}

/**
 * Why a call produced no answer of the code's own. Each is a refusal (canConnect false) to the caller,
 * never an exception: count them in a metric labelled by this reason.
 */
export type CodeFailure = 'threw' | 'timeout' | 'memory' | 'bad_result' | 'unavailable';

export interface CanConnectVerdict {
  canConnect: boolean;
  /** The code's own text when it refuses, or what went wrong when `failure` is set. */
  errorText?: string;
  failure?: CodeFailure;
}

export interface GetAllQuery {
  /** A configured instance (config `instances`). */
  instance: string;
  database: string;
  collection: string;
  queryParams?: { find?: Filter; limit?: number };
}

/** What the code may ask of the node, as `g.sys`. Each call crosses the runner's boundary as a copy. */
export interface SystemCalls {
  db: { getAll(query: GetAllQuery): Promise<Row[]> };
}

export type RunnerChoice = 'auto' | 'isolate' | 'sandbox';

/** Code ready to run: loaded, types stripped, checked, and placed. Built once at start-up (prepare.ts). */
export interface PreparedCode {
  /** The event that carries it: for messages and logs. */
  event: string;
  /** sha256 of `source`: each runner compiles or writes a version once, whichever events share it. */
  id: string;
  /** JavaScript (TypeScript types stripped) that declares `main` at its top level. */
  source: string;
  /** Whether the source itself exports main (`export async function main`); the sandbox adds the export otherwise. */
  exportsMain: boolean;
  /** True: runs in an isolate; false: in the sandbox. */
  inIsolate: boolean;
  /** Why the code is not isolate-safe (empty when it is): for the start-up log. */
  reasons: string[];
}

export interface CodeRunner {
  /** Never rejects: every failure is a verdict with canConnect false and `failure` set. */
  canConnect(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict>;
  /** Ends every isolate, worker or container; calls waiting in the queue answer `unavailable`. */
  close(): Promise<void>;
}

/** Sizes and limits shared by the runners (config `code`). */
export interface RunnerLimits {
  /** Isolates, or sandbox workers, in the pool. */
  size: number;
  /** Wall-clock limit of one call, and the longest a call waits for a free slot. */
  timeoutMs: number;
  /** Heap limit of one isolate or worker, MB. */
  memoryMb: number;
  /** Calls waiting for a slot; past it a call answers `unavailable` at once. */
  queue: number;
}

export function failed(failure: CodeFailure, errorText: string): CanConnectVerdict {
  return { canConnect: false, failure, errorText };
}
