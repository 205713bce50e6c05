/**
 * One catalogue of what can go wrong, shared by the gateway and its clients.
 *
 * Close codes follow centrifuge's idea: the range tells a client what to do without knowing every code.
 * - 1000-2999: standard WebSocket codes (1001 going away, 1009 too big, 1013 try again later): reconnect.
 * - 4000-4499: ours, reconnect with backoff (a transient condition; a refreshed token may fix it).
 * - 4500-4999: ours, final: reconnecting with the same input would fail again, so do not.
 */
export const CloseCode = {
  /** The node is draining (deploy, SIGTERM): reconnect elsewhere. */
  GOING_AWAY: 1001,
  /** A frame was larger than the node's maxPayload. */
  MESSAGE_TOO_BIG: 1009,
  /** The node failed to answer a frame (its fault, counted): reconnect, and the subscriptions are made again. */
  INTERNAL_ERROR: 1011,
  /** The node is shedding this client (its unsent data passed the bound): reconnect later. */
  TRY_AGAIN_LATER: 1013,
  /** The token expired: refresh it, then reconnect. */
  TOKEN_EXPIRED: 4001,
  /** The client did not answer pings in time. */
  PING_TIMEOUT: 4002,
  /** The back end disconnected this person or API user and lets them come back (control API, reconnect: true). */
  DISCONNECTED: 4003,
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
  return !(code >= 4500 && code <= 4999);
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
  INTERNAL: 'INTERNAL',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface WireError {
  code: ErrorCode;
  message: string;
}
