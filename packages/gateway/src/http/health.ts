/** Liveness, readiness and metrics. /readyz is what a load balancer checks before it routes to the node. */
import type { FastifyInstance } from 'fastify';
import { HEALTH_PATH, METRICS_PATH, READY_PATH } from '@herald/protocol';
import type { Metrics } from '../metrics.ts';

/** Whether the node should receive new clients (false while starting or draining). */
export type Readiness = () => boolean;

export function healthRoutes(app: FastifyInstance, ready: Readiness): void {
  app.get(HEALTH_PATH, async () => ({ status: 'ok' }));
  app.get(READY_PATH, async (_request, reply) => {
    const isReady = ready();
    return reply.code(isReady ? 200 : 503).send({ ready: isReady });
  });
}

export function metricsRoute(app: FastifyInstance, metrics: Metrics): void {
  app.get(METRICS_PATH, async (_request, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
}
