export {
  HeraldClient,
  HeraldError,
  type ClientEvents,
  type ClientState,
  type CloseInfo,
  type ConnectOptions,
  type DisconnectedEvent,
  type HistoryLostEvent,
  type Notification,
  type OnEventInput,
  type ReconnectedEvent,
  type RefusedSubscription,
  type RegisterResult,
  type UnregisterResult,
} from './client.ts';
export { reconnectDelay, reconnectDelayAfter } from './backoff.ts';
export { DEFAULT_MAX_DELAY_MS, DEFAULT_MIN_DELAY_MS } from './options.ts';
export { jwtExpiresAt, type GetTokens, type TokenReason, type Tokens } from './tokens.ts';
