/** @herald/server: Herald for back ends (Node 22+). docs/server.md */
export { HeraldServer, type BatchEvent, type BatchResult, type EmitResult, type HeraldServerOptions, type Target } from './server.ts';
export { HeraldServerError } from './errors.ts';
export type { Fetch, FetchInit, FetchResponse, RetryOptions } from './calls.ts';
export type { Credentials } from './tokens.ts';
export { verifyWebhook } from './webhooks.ts';
export { streamFields, xadd, type RedisCall, type StreamEmit } from './stream.ts';
