/**
 * The gateway's one error type. Every refusal the node makes, on the wire or over HTTP, is a GatewayError
 * carrying a catalogue code (protocol's ErrorCode), so clients and metrics see the same names.
 */
import { ErrorCode, type WireError } from '@herald/protocol';

const HTTP_STATUS: Record<ErrorCode, number> = {
  TOKEN_MISSING: 401,
  TOKEN_INVALID: 401,
  TOKEN_EXPIRED: 401,
  TOKEN_REVOKED: 401,
  TOKEN_MISMATCH: 403,
  PERSON_TOKEN_REQUIRED: 401,
  BAD_CREDENTIALS: 401,
  MALFORMED_JSON: 400,
  BAD_FRAME: 400,
  UNKNOWN_OBJ_TYPE: 400,
  UNKNOWN_EVENT_TYPE: 400,
  UNKNOWN_EVENT: 404,
  UNKNOWN_EVENT_ID: 404,
  EVENT_FORBIDDEN: 403,
  CRITERIA_NOT_SCALAR: 400,
  CRITERIA_NOT_YOURS: 403,
  CAN_CONNECT_REFUSED: 403,
  TOO_MANY_SUBSCRIPTIONS: 429,
  BAD_REQUEST: 400,
  UNSUPPORTED_MEDIA_TYPE: 415,
  NOT_FOUND: 404,
  FORBIDDEN: 403,
  TABLE_FORBIDDEN: 403,
  RATE_LIMITED: 429,
  UNAVAILABLE: 503,
  OVERLOADED: 503,
  IDEMPOTENCY_KEY_REUSED: 422,
  IDEMPOTENCY_KEY_IN_USE: 409,
  INTERNAL: 500,
};

export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  /** Seconds after which the same request may succeed (a Retry-After header), for a refusal that passes. */
  readonly retryAfterS: number | undefined;

  constructor(code: ErrorCode, message: string, retryAfterS?: number) {
    super(message);
    this.name = 'GatewayError';
    this.code = code;
    this.statusCode = HTTP_STATUS[code];
    this.retryAfterS = retryAfterS;
  }

  toWire(): WireError {
    return { code: this.code, message: this.message };
  }
}

/** A configuration problem found at start-up: names the field, and the node refuses to start. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }

  /** "invalid configuration:" and a line per field: how every refused setting is reported. */
  static forFields(problems: ReadonlyArray<readonly [field: string, problem: string]>): ConfigError {
    return new ConfigError(`invalid configuration:\n${problems.map(([field, problem]) => `  ${field}: ${problem}`).join('\n')}`);
  }
}

/** Where the node contained an unexpected throw and carried on without the one emit, frame or message it concerned. */
export type ContainedAt = 'fan_out' | 'frame' | 'broker_message';

/** Counts (herald_internal_errors_total{where}) and logs a contained throw: node.ts builds the one every part gets. */
export type Contain = (where: ContainedAt, error: unknown) => void;
