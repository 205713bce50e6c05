/** Tokens arrive in headers on HTTP (protocol's API_TOKEN_HEADER, PERSON_TOKEN_HEADER): one reading for every route. */
import type { FastifyRequest } from 'fastify';

/** The header's value, or undefined when it is absent, empty, or given more than once. */
export function tokenHeader(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
