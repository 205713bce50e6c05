/**
 * The fleet's status page on the back end's port: GET /status, a self-contained page that reads GET /status.json
 * every two seconds (status/fleet.ts says where the figures come from).
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { FleetStatus } from '../status/fleet.ts';

const PAGE = readFileSync(new URL('../status/page.html', import.meta.url), 'utf8');

export function statusRoutes(app: FastifyInstance, fleet: FleetStatus): void {
  app.get('/status', async (_request, reply) => reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(PAGE));
  // UNAVAILABLE (Redis out of reach) goes through the node's error envelope, as a 503.
  app.get('/status.json', async (_request, reply) => reply.header('cache-control', 'no-store').send(await fleet.read()));
}
