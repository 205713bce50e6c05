/** Liveness, readiness and metrics. /readyz is what a load balancer checks before it routes to the node. */
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../metrics.ts';

export interface HealthOptions {
  metrics: Metrics;
  /** Whether the node should receive new clients (false while starting or draining). */
  ready: () => boolean;
}

export function healthRoutes(app: FastifyInstance, { metrics, ready }: HealthOptions): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const isReady = ready();
    return reply.code(isReady ? 200 : 503).send({ ready: isReady });
  });
  app.get('/metrics', async (_request, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );
}
