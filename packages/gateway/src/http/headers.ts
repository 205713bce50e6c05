/** Tokens arrive in headers on HTTP (x-am-authorization, x-am-user-authorization): one reading for every route. */
import type { FastifyRequest } from 'fastify';

export const API_TOKEN_HEADER = 'x-am-authorization';
export const PERSON_TOKEN_HEADER = 'x-am-user-authorization';

/** The header's value, or undefined when it is absent, empty, or given more than once. */
export function tokenHeader(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
