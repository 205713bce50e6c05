export {
  createClient,
  HeraldClient,
  HeraldError,
  type ClientEvents,
  type ClientState,
  type CloseInfo,
  type ConnectOptions,
  type DisconnectedEvent,
  type EventMap,
  type HistoryLostEvent,
  type Notification,
  type OnEventInput,
  type ReconnectedEvent,
  type RefusedSubscription,
  type RegisterResult,
  type SubscribeOptions,
  type Subscription,
  type UnregisterResult,
} from './client.ts';
export { reconnectDelay, reconnectDelayAfter } from './backoff.ts';
export {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_LIVENESS_IDLE_MS,
  DEFAULT_LIVENESS_TIMEOUT_MS,
  DEFAULT_MAX_DELAY_MS,
  DEFAULT_MIN_DELAY_MS,
} from './options.ts';
export { jwtExpiresAt, type GetTokens, type TokenReason, type Tokens } from './tokens.ts';
