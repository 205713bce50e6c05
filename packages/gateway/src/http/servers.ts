/**
 * The node's HTTP side: one fastify instance per port, each serving the route groups of its port, all sharing the
 * node's hub, broker and metrics. Without server.apiPort one instance serves everything on server.port. With it, the
 * clients' port keeps what browsers call (the WebSocket, token, health) and the API port takes what back ends call
 * (emit, the table API, the control API, token, health, /metrics, the /status page), so that only the clients' port need be reachable from outside.
 */
import fastifyWebsocket from '@fastify/websocket';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyListenOptions, type FastifyServerOptions } from 'fastify';
import type { Config } from '../config/schema.ts';
import type { Metrics } from '../metrics.ts';
import { answerFailure, installErrorHandling } from './envelope.ts';

export type RouteGroup = 'websocket' | 'token' | 'health' | 'emit' | 'tables' | 'control' | 'metrics' | 'status';

/** What each group puts on an instance: its routes (the WebSocket plugin is registered here, before them). */
export type RouteMounts = Record<RouteGroup, (app: FastifyInstance) => void>;

export const ONE_PORT: readonly RouteGroup[] = ['websocket', 'token', 'health', 'emit', 'tables', 'control', 'metrics', 'status'];
export const CLIENTS_PORT: readonly RouteGroup[] = ['websocket', 'token', 'health'];
export const API_PORT: readonly RouteGroup[] = ['token', 'health', 'emit', 'tables', 'control', 'metrics', 'status'];

/** The label of requests no route matched: herald_http_responses_total's route values stay the route table's. */
const UNMATCHED = 'unmatched';

export interface HttpServersOptions {
  server: Readonly<Config['server']>;
  /** Fastify's logger option for the first instance; the second logs through the same logger. */
  logger: FastifyServerOptions['logger'];
  metrics: Metrics;
  /** websocket.maxPayload. */
  maxPayload: number;
}

export interface Ports {
  clients: number;
  /** Undefined without server.apiPort: the API is on the clients' port. */
  api: number | undefined;
}

export class HttpServers {
  /** The clients' port, and without apiPort the only one. */
  readonly clients: FastifyInstance;
  readonly api: FastifyInstance | undefined;
  readonly #options: HttpServersOptions;

  constructor(options: HttpServersOptions) {
    this.#options = options;
    // No log line per request: at tens of thousands of emits a second it would cost more than the emit.
    const logController = new LogController({ disableRequestLogging: true });
    // frameworkErrors: a URL fastify cannot route (bad percent-encoding) gets the same envelope as every failure.
    const common = { logController, trustProxy: options.server.trustProxy, frameworkErrors: answerFailure(options.metrics) };
    this.clients = Fastify({ logger: options.logger, ...common });
    this.api = options.server.apiPort === undefined ? undefined : Fastify({ loggerInstance: this.clients.log, ...common });
  }

  get log(): FastifyBaseLogger {
    return this.clients.log;
  }

  /** The instance back ends call: the emit, and its fast path, are on its server. */
  get backEnd(): FastifyInstance {
    return this.api ?? this.clients;
  }

  mount(mounts: RouteMounts): void {
    this.#mountOn(this.clients, this.api ? CLIENTS_PORT : ONE_PORT, mounts);
    if (this.api) this.#mountOn(this.api, API_PORT, mounts);
  }

  async ready(): Promise<void> {
    await Promise.all([this.clients.ready(), this.api?.ready()]);
  }

  async listen(): Promise<Ports> {
    const { port, host, apiPort, apiHost, backlog, reusePort } = this.#options.server;
    const clients = await listenOn(this.clients, { port, host, backlog, reusePort });
    const api = this.api && (await listenOn(this.api, { port: apiPort, host: apiHost ?? host, backlog, reusePort }));
    return { clients, api };
  }

  /** Stop accepting connections on both ports; open ones stay (server.reusePort: the successor takes new ones). */
  stopListening(): void {
    this.clients.server.close();
    this.api?.server.close();
  }

  async close(): Promise<void> {
    await Promise.all([this.clients.close(), this.api?.close()]);
  }

  #mountOn(app: FastifyInstance, groups: readonly RouteGroup[], mounts: RouteMounts): void {
    const { metrics, maxPayload } = this.#options;
    installErrorHandling(app, metrics);
    const { responses } = metrics;
    // After the response is written, so it costs the caller nothing; the emit's fast path counts its own.
    app.addHook('onResponse', (request, reply, done) => {
      responses.count(request.routeOptions.url ?? UNMATCHED, reply.statusCode);
      done();
    });
    if (groups.includes('websocket')) {
      // clientTracking off: the hub already tracks sessions, a second set would cost memory per socket.
      app.register(fastifyWebsocket, {
        options: { maxPayload, perMessageDeflate: false, clientTracking: false },
        // Sockets are closed by Gateway.close() with 1001, not by the plugin.
        preClose: (done) => done(),
        errorHandler: (error, socket) => {
          app.log.error({ err: error }, 'WebSocket handler failed');
          socket.terminate();
        },
      });
    }
    app.register(async (scope) => {
      for (const group of groups) mounts[group](scope);
    });
  }
}

type ListenOptions = Pick<FastifyListenOptions, 'port' | 'host' | 'backlog'> & { reusePort: boolean };

/** Listen and answer the port (useful with port 0). */
async function listenOn(app: FastifyInstance, options: ListenOptions): Promise<number> {
  // fastify passes its listen options on to Node's server.listen, whose reusePort its types do not list yet.
  await app.listen(options);
  const address = app.server.address();
  return typeof address === 'object' && address !== null ? address.port : (options.port ?? 0);
}
