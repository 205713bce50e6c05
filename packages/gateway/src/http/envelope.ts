/** The system API's envelope, and one error handler that turns every failure into it; every route takes JSON only. */
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, type Envelope, type WireError } from '@herald/protocol';
import { GatewayError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';

export function ok<T>(data: T): Envelope<T> {
  return { success: true, statusCode: 200, data };
}

/** What an emit answers: `nodes` it was published to, and `pending` (202) when not to every node holding its routes. */
export interface EmittedData {
  name: string;
  nodes: number;
  pending?: true;
}

/** An emit's answer: 200, or 202 when it was accepted but its delivery is pending (the broker's DeliveryPending). */
export function emitted({ name, nodes, pending }: { name: string; nodes: number; pending: boolean }): Envelope<EmittedData> {
  return pending ? { success: true, statusCode: 202, data: { name, nodes, pending: true } } : ok({ name, nodes });
}

/** The text of `ok(data)` for data already written as JSON: a page of rows is measured as it is written. */
export function okOfJson(dataJson: string): string {
  return `{"success":true,"statusCode":200,"data":${dataJson}}`;
}

function failure(statusCode: number, errors: WireError[]): Envelope<never> {
  return { success: false, statusCode, errors };
}

/**
 * Fastify's own 4xx errors (bad JSON, body too large, a bad URL) keep their status and message, as BAD_REQUEST;
 * a content type no route takes (415) has a code of its own.
 */
function asGatewayError(error: FastifyError): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error.validation) return new GatewayError('BAD_REQUEST', error.message);
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    const gatewayError = new GatewayError(status === 415 ? 'UNSUPPORTED_MEDIA_TYPE' : 'BAD_REQUEST', error.message);
    return Object.assign(gatewayError, { statusCode: status });
  }
  return new GatewayError('INTERNAL', 'internal error');
}

export interface Refusal {
  statusCode: number;
  body: Envelope<never>;
  /** Seconds, for a Retry-After header: an unavailable fleet and a spent rate limit are temporary. */
  retryAfterS: number | undefined;
}

/**
 * What a failed call is answered, counted by its code (and logged when it is the node's own fault): fastify's error
 * handler and the emit's fast path (fast-path.ts) answer alike.
 */
export function refusalOf(error: FastifyError, metrics: Metrics, log: FastifyBaseLogger): Refusal {
  const gatewayError = asGatewayError(error);
  if (gatewayError.code === ErrorCode.INTERNAL) log.error({ err: error }, 'request failed');
  metrics.refusals.inc({ code: gatewayError.code });
  const { statusCode } = gatewayError;
  const retryAfterS = gatewayError.retryAfterS ?? (statusCode === 503 ? 1 : undefined);
  return { statusCode, body: failure(statusCode, [gatewayError.toWire()]), retryAfterS };
}

/** One answer for every failure: the error handler's, and fastify's `frameworkErrors` (a bad URL) go through it. */
export function answerFailure(metrics: Metrics) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const { statusCode, body, retryAfterS } = refusalOf(error, metrics, request.log);
    if (retryAfterS !== undefined) void reply.header('retry-after', String(retryAfterS));
    return reply.code(statusCode).send(body);
  };
}

export function installErrorHandling(app: FastifyInstance, metrics: Metrics): void {
  app.setErrorHandler(answerFailure(metrics));
  // Every route takes JSON: without fastify's text/plain parser, any other content type is 415, not a schema's 400.
  app.removeContentTypeParser('text/plain');
  app.setNotFoundHandler((request, reply) => {
    const error = new GatewayError('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`);
    metrics.refusals.inc({ code: error.code });
    return reply.code(404).send(failure(404, [error.toWire()]));
  });
}
