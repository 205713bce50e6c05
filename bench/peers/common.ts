/**
 * What both peers share: the HTTP side (POST /emit, GET /stats) and the payload. Kept apart from the peers
 * so each peer file shows only what its stack does per client and per emit.
 */
import http from 'node:http';

/**
 * The recipientId a broadcast's listeners register: a broadcast reaches them, as the gateway's reaches the clients
 * of an event without criteria, and not the other clients connected (io.emit would reach those too).
 */
export const BROADCAST_ID = '*';

/** The body of POST /emit: one person (recipientId) or the broadcast's listeners (broadcast), with the emitter's clock. */
export interface Emit {
  recipientId?: string;
  broadcast?: boolean;
  sentAt: number;
}

export interface PeerHandlers {
  emit(body: Emit): void;
  clients(): number;
}

/** An HTTP server answering POST /emit (202 once handed on) and GET /stats (clients and heap, for the runner). */
export function httpServer(handlers: PeerHandlers): http.Server {
  return http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ clients: handlers.clients(), heapUsed: process.memoryUsage().heapUsed }));
      return;
    }
    if (req.method !== 'POST' || req.url !== '/emit') {
      res.statusCode = 404;
      res.end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        handlers.emit(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Emit);
        res.statusCode = 202;
      } catch {
        res.statusCode = 400;
      }
      res.end();
    });
  });
}

export function portFromEnv(): number {
  const port = Number(process.env.PORT);
  if (!Number.isInteger(port) || port <= 0) throw new Error(`PORT must be set, got ${process.env.PORT}`);
  return port;
}

export function redisUrlFromEnv(): string {
  const url = process.env.REDIS_URL;
  if (!url) throw new Error('REDIS_URL must be set');
  return url;
}
