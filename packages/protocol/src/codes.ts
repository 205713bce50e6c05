/**
 * One catalogue of what can go wrong, shared by the gateway and its clients.
 *
 * Close codes follow centrifuge's idea: the range tells a client what to do without knowing every code
 * (CLOSE_CODE_RANGES; docs/protocol.md section 7):
 * - 1000-2999: standard WebSocket codes (1001 going away, 1009 too big, 1013 try again later): reconnect.
 * - 4000-4499: ours, reconnect with backoff (a transient condition; a refreshed token may fix it).
 * - 4500-4999: ours, final: reconnecting with the same input would fail again, so do not.
 */
export const CLOSE_CODE_RANGES = {
  standard: { from: 1000, to: 2999, reconnect: true },
  transient: { from: 4000, to: 4499, reconnect: true },
  final: { from: 4500, to: 4999, reconnect: false },
} as const;

/**
 * The codes RFC 6455 (7.4.1) and IANA's registry define, by name: the ones the node sends are in CloseCode too;
 * the others are what ends report (1005 closed without a code, 1006 dropped) or what a peer may send.
 */
export const StandardCloseCode = {
  NORMAL_CLOSURE: 1000,
  GOING_AWAY: 1001,
  PROTOCOL_ERROR: 1002,
  UNSUPPORTED_DATA: 1003,
  /** Never sent: a close frame without a code is reported as this. */
  NO_STATUS_RECEIVED: 1005,
  /** Never sent: a connection that ended without a close frame is reported as this. */
  ABNORMAL_CLOSURE: 1006,
  INVALID_PAYLOAD: 1007,
  POLICY_VIOLATION: 1008,
  MESSAGE_TOO_BIG: 1009,
  MANDATORY_EXTENSION: 1010,
  INTERNAL_ERROR: 1011,
  SERVICE_RESTART: 1012,
  TRY_AGAIN_LATER: 1013,
  BAD_GATEWAY: 1014,
  TLS_HANDSHAKE: 1015,
} as const;
export type StandardCloseCode = (typeof StandardCloseCode)[keyof typeof StandardCloseCode];

/** The codes the node closes connections with. */
export const CloseCode = {
  /** The node is draining (deploy, SIGTERM): reconnect elsewhere. */
  GOING_AWAY: StandardCloseCode.GOING_AWAY,
  /** A frame was larger than the node's maxPayload. */
  MESSAGE_TOO_BIG: StandardCloseCode.MESSAGE_TOO_BIG,
  /** The node failed to answer a frame (its fault, counted): reconnect, and the subscriptions are made again. */
  INTERNAL_ERROR: StandardCloseCode.INTERNAL_ERROR,
  /** The node is shedding this client (its unsent data passed the bound): reconnect later. */
  TRY_AGAIN_LATER: StandardCloseCode.TRY_AGAIN_LATER,
  /** The token expired: refresh it, then reconnect. */
  TOKEN_EXPIRED: 4001,
  /** The client did not answer pings in time. */
  PING_TIMEOUT: 4002,
  /** The back end disconnected this person or API user and lets them come back (control API, reconnect: true). */
  DISCONNECTED: 4003,
  /**
   * This node lost the fleet's Redis and cannot deliver: reconnect, and the load balancer sends the client to a node
   * that can (the node closes its clients in paced batches, as a drain does).
   */
  NODE_CUT_OFF: 4004,
  /** No API user token was given. */
  TOKEN_MISSING: 4501,
  /** A token was malformed, badly signed, or of the wrong kind. */
  TOKEN_INVALID: 4502,
  /** The back end disconnected this person or API user for good (control API, reconnect: false). */
  DISCONNECTED_FINAL: 4503,
  /** The tokens were revoked (control API): only tokens issued after the revocation (a new login) get in. */
  TOKEN_REVOKED: 4504,
} as const;
export type CloseCode = (typeof CloseCode)[keyof typeof CloseCode];

/** Whether a client should reconnect after a close with this code. */
export function shouldReconnect(code: number): boolean {
  const { final } = CLOSE_CODE_RANGES;
  return !(code >= final.from && code <= final.to);
}

/**
 * Error codes in JSON errors: in TOKEN_VALIDATION and ERROR frames, in invalidOnEvents entries,
 * and in HTTP error bodies. Each has one fixed meaning; the message beside it in a reply adds detail.
 */
export const ErrorCode = {
  TOKEN_MISSING: 'TOKEN_MISSING',
  TOKEN_INVALID: 'TOKEN_INVALID',
  TOKEN_EXPIRED: 'TOKEN_EXPIRED',
  /** The token was issued before its person's or API user's tokens were revoked. */
  TOKEN_REVOKED: 'TOKEN_REVOKED',
  /** A REFRESH named another API user or person than the connection's. */
  TOKEN_MISMATCH: 'TOKEN_MISMATCH',
  PERSON_TOKEN_REQUIRED: 'PERSON_TOKEN_REQUIRED',
  BAD_CREDENTIALS: 'BAD_CREDENTIALS',
  MALFORMED_JSON: 'MALFORMED_JSON',
  BAD_FRAME: 'BAD_FRAME',
  UNKNOWN_OBJ_TYPE: 'UNKNOWN_OBJ_TYPE',
  UNKNOWN_EVENT_TYPE: 'UNKNOWN_EVENT_TYPE',
  UNKNOWN_EVENT: 'UNKNOWN_EVENT',
  UNKNOWN_EVENT_ID: 'UNKNOWN_EVENT_ID',
  EVENT_FORBIDDEN: 'EVENT_FORBIDDEN',
  CRITERIA_NOT_SCALAR: 'CRITERIA_NOT_SCALAR',
  CRITERIA_NOT_YOURS: 'CRITERIA_NOT_YOURS',
  CAN_CONNECT_REFUSED: 'CAN_CONNECT_REFUSED',
  TOO_MANY_SUBSCRIPTIONS: 'TOO_MANY_SUBSCRIPTIONS',
  BAD_REQUEST: 'BAD_REQUEST',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  NOT_FOUND: 'NOT_FOUND',
  /** The API user may not call this route (the control API: config control.groups). */
  FORBIDDEN: 'FORBIDDEN',
  TABLE_FORBIDDEN: 'TABLE_FORBIDDEN',
  RATE_LIMITED: 'RATE_LIMITED',
  UNAVAILABLE: 'UNAVAILABLE',
  /** The node has more on its way to its clients than its bound (emit.maxBacklogBytes): retry after Retry-After. */
  OVERLOADED: 'OVERLOADED',
  /** An Idempotency-Key used within its window for an emit with another body: nothing was published. */
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
  /** An emit with this Idempotency-Key is being published (by this node or another): retry after Retry-After. */
  IDEMPOTENCY_KEY_IN_USE: 'IDEMPOTENCY_KEY_IN_USE',
  INTERNAL: 'INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface WireError {
  code: ErrorCode;
  message: string;
}
