/**
 * A gateway node: builds the hub, broker, authenticator, catalogue, transport and HTTP API from a frozen
 * config, and runs them from listen to close. Tests build several in one process, each with its own metrics.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { hostname } from 'node:os';
import fastifyWebsocket from '@fastify/websocket';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyListenOptions } from 'fastify';
import { CloseCode } from '@herald/protocol';
import type { Authenticator } from './auth/authenticator.ts';
import { JwtAuthenticator } from './auth/jwt.ts';
import type { Broker } from './broker/broker.ts';
import { MemoryBus } from './broker/memory.ts';
import { RedisBroker } from './broker/redis/broker.ts';
import { nodeIdSchema, type Config } from './config/schema.ts';
import type { DataSource } from './data/data-source.ts';
import { openDataSources } from './data/open.ts';
import type { PreparedCode } from './code/code-runner.ts';
import { CanConnectGate } from './code/gate.ts';
import { CodeRunners } from './code/runners.ts';
import { dataSourceCalls } from './code/system-calls.ts';
import { EventCatalogue } from './events/catalogue.ts';
import { TableCatalogue } from './events/tables.ts';
import { ConfigError, type Contain } from './errors.ts';
import { installErrorHandling } from './http/envelope.ts';
import { healthRoutes } from './http/health.ts';
import { EmitFastPath } from './http/fast-path.ts';
import { emitFastRoute, emitPath, systemApi } from './http/system-api.ts';
import { tableRoutes } from './http/tables.ts';
import { Hub } from './hub/hub.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { Admission } from './transport/admission.ts';
import { WebSocketTransport } from './transport/websocket.ts';

export interface GatewayDeps {
  /** Default: the Redis broker when config.redis is set, else an in-process broker on a bus of its own. */
  broker?: Broker;
  /** This node's id in the fleet. Default: <hostname>-<pid>-<random>. */
  nodeId?: string | undefined;
  /** Default: built from config.instances. */
  dataSources?: ReadonlyMap<string, DataSource>;
  /** Fastify's logger option: false (tests), true, or pino options. Default false. */
  logger?: boolean | { level: string };
}

export class Gateway {
  readonly config: Readonly<Config>;
  readonly hub: Hub;
  readonly metrics: Metrics;
  readonly broker: Broker;
  readonly authenticator: Authenticator;
  readonly #app: FastifyInstance;
  readonly #dataSources: ReadonlyMap<string, DataSource>;
  readonly #admission: Admission;
  readonly #runners: CodeRunners;
  readonly #fastPath: EmitFastPath | undefined;
  #ready = false;

  private constructor(
    config: Readonly<Config>, dataSources: ReadonlyMap<string, DataSource>, deps: GatewayDeps, nodeId: string, prepared: ReadonlyMap<string, PreparedCode>,
  ) {
    this.config = config;
    this.#dataSources = dataSources;
    this.metrics = createMetrics();
    // No log line per request: at tens of thousands of emits a second it would cost more than the emit.
    const logController = new LogController({ disableRequestLogging: true });
    this.#app = Fastify({ logger: deps.logger ?? false, logController });
    const contain: Contain = (where, error) => {
      this.metrics.internalErrors.inc({ where });
      this.#app.log.error({ err: error, where }, 'contained an unexpected error; the node carries on');
    };
    const broker = deps.broker ?? this.#brokerFor(nodeId, contain);
    this.broker = broker;
    const { websocket } = config;
    this.hub = new Hub({ broker, metrics: this.metrics, contain, ...websocket });
    this.authenticator = new JwtAuthenticator({ config, dataSources });
    const tables = new TableCatalogue(config.instances);
    const catalogue = new EventCatalogue(config.events, tables);
    installErrorHandling(this.#app, this.metrics);
    this.#admission = new Admission({ ...config.admission, metrics: this.metrics });
    this.#runners = new CodeRunners(config.code);
    const transport = new WebSocketTransport({
      authenticator: this.authenticator,
      contain,
      frameLimits: { maxEntries: websocket.maxEntriesPerFrame, maxCriteriaValueBytes: websocket.maxCriteriaValueBytes },
      catalogue,
      gate: this.#gate(dataSources, prepared),
      hub: this.hub,
      metrics: this.metrics,
      pingIntervalMs: websocket.pingIntervalMs,
    });
    const systemApiOptions = { userPath: config.userPath, authenticator: this.authenticator, catalogue, broker, metrics: this.metrics };
    if (config.server.emitFastPath) {
      const { bodyLimit } = this.#app.initialConfig;
      const route = emitFastRoute(systemApiOptions, this.#app.log);
      this.#fastPath = new EmitFastPath({ path: emitPath(config.userPath), route, bodyLimit: bodyLimit!, metrics: this.metrics });
    }
    this.#mount(transport, (app) => {
      const { authenticator, metrics } = this;
      systemApi(app, systemApiOptions);
      tableRoutes(app, { userPath: config.userPath, authenticator, tables, dataSources, broker, metrics });
      healthRoutes(app, { metrics, ready: () => this.#ready && this.broker.ready() });
    });
  }

  /** The gate over the events' prepared can-connect code (Gateway.create prepares it). */
  #gate(dataSources: ReadonlyMap<string, DataSource>, prepared: ReadonlyMap<string, PreparedCode>): CanConnectGate {
    for (const [event, { lean, reasons }] of prepared) {
      this.#app.log.info({ event, runner: lean ? 'isolate' : 'sandbox', reasons }, 'can-connect code loaded');
    }
    return new CanConnectGate({ prepared, runners: this.#runners, sys: dataSourceCalls(dataSources), metrics: this.metrics });
  }

  /** The WebSocket route and the HTTP routes, on one fastify instance. */
  #mount(transport: WebSocketTransport, httpRoutes: (app: FastifyInstance) => void): void {
    // clientTracking off: the hub already tracks sessions, a second set would cost memory per socket.
    const { maxPayload } = this.config.websocket;
    this.#app.register(fastifyWebsocket, {
      options: { maxPayload, perMessageDeflate: false, clientTracking: false },
      // Sockets are closed by close() with 1001, not by the plugin.
      preClose: (done) => done(),
      errorHandler: (error, socket) => {
        this.#app.log.error({ err: error }, 'WebSocket handler failed');
        socket.terminate();
      },
    });
    this.#app.register(async (app) => {
      transport.route(app);
      httpRoutes(app);
    });
  }

  /**
   * A bad node id stops the node before it opens its data sources. Events' can-connect code is prepared once, here:
   * bad code stops the node, naming the event. What prepares it (acorn, and Node's type stripper for TypeScript) is
   * loaded only when an event has code.
   */
  static async create(config: Readonly<Config>, deps: GatewayDeps = {}): Promise<Gateway> {
    const nodeId = nodeIdOf(deps.nodeId);
    const withCode = Object.values(config.events).some((event) => event.canConnect !== undefined);
    const prepared = withCode ? (await import('./code/prepare.ts')).prepareEvents(config.events) : new Map<string, PreparedCode>();
    const dataSources = deps.dataSources ?? (await openDataSources(config.instances));
    return new Gateway(config, dataSources, deps, nodeId, prepared);
  }

  #brokerFor(nodeId: string, contain: Contain): Broker {
    const { redis } = this.config;
    if (!redis) return new MemoryBus().broker(nodeId);
    const { metrics } = this;
    const log = this.#app.log;
    return new RedisBroker({
      target: redis,
      nodeId,
      leaseMs: redis.leaseMs,
      sweepIntervalMs: redis.sweepIntervalMs,
      routeBuckets: redis.routeBuckets,
      observer: {
        resynced(routes) {
          metrics.resyncs.inc();
          log.info({ routes }, 'wrote this node\'s routes to Redis');
        },
        swept(deadNodeId, routes) {
          metrics.sweptRoutes.inc(routes);
          log.warn({ deadNodeId, routes }, 'swept the routes of a dead node');
        },
        writeFailed(error) {
          metrics.brokerWriteFailures.inc();
          log.warn({ err: error }, 'a Redis write failed; the node will write its routes again');
        },
        undeliverable(error) {
          contain('broker_message', error);
        },
        leanReads(lean, why) {
          metrics.leanReads.set(lean ? 1 : 0);
          if (lean) log.info("the emit's registry reads are on their own connection to Redis");
          else log.warn({ why }, "the emit's registry reads go through ioredis until their own connection to Redis is back");
        },
      },
    });
  }

  get log(): FastifyBaseLogger {
    return this.#app.log;
  }

  /** Start the broker, then listen; answers the port (useful with port 0). */
  async listen(): Promise<number> {
    await this.broker.start((event, eventData) => this.hub.deliver(event, eventData));
    await this.#app.ready();
    this.#admission.install(this.#app.server);
    this.#fastPath?.install(this.#app.server);
    // fastify passes its listen options on to Node's server.listen, whose reusePort its types do not list yet;
    // a copy, since fastify writes into them and the config is frozen.
    const listenOptions: FastifyListenOptions & { reusePort: boolean } = { ...this.config.server };
    await this.#app.listen(listenOptions);
    this.#ready = true;
    const address = this.#app.server.address();
    return typeof address === 'object' && address !== null ? address.port : this.config.server.port;
  }

  /**
   * Drain: report not-ready at once (the load balancer stops sending clients), refuse new ones, take this
   * node's routes out of the fleet, then tell clients to go elsewhere (1001) in batches, so that their
   * reconnects spread out, and release everything. The caller bounds it in time (config.drain.deadlineMs).
   * A node sharing its port (server.reusePort) stops listening first instead: its successor on the same port
   * takes every new client, and a client this node refused would wait 1-5 s before it tried again.
   */
  async close(): Promise<void> {
    this.#ready = false;
    if (this.config.server.reusePort) {
      // As Node's server ends its idle keep-alive connections on close: a back end's next emit then reaches the successor.
      this.#app.server.close();
      this.#fastPath?.close();
    }
    this.#admission.close();
    await this.broker.close();
    const { batchSize, batchIntervalMs } = this.config.drain;
    const sessions = [...this.hub.sessions];
    const drainStart = performance.now();
    for (let start = 0, batch = 0; start < sessions.length; start += batchSize, batch++) {
      // Each batch is due at its place from the drain's start: the closes of a batch, and a timer late on a
      // busy machine, would otherwise stretch every pause after it (70 pauses of 75 ms took ~6 s, not 5.2).
      const wait = drainStart + batch * batchIntervalMs - performance.now();
      if (wait > 0) await delay(wait);
      for (const session of sessions.slice(start, start + batchSize)) {
        this.hub.close(session);
        session.socket.close(CloseCode.GOING_AWAY, 'node draining: reconnect');
      }
    }
    this.#fastPath?.close();
    await this.#app.close();
    await this.#runners.close();
    await Promise.all([...this.#dataSources.values()].map((source) => source.close()));
  }
}

/** HERALD_NODE_ID, or a new id; checked like a config field, since the fleet's registry in Redis relies on it. */
function nodeIdOf(given: string | undefined): string {
  const id = given ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const checked = nodeIdSchema.safeParse(id);
  if (checked.success) return id;
  const problems = checked.error.issues.map((issue) => issue.message).join('; ');
  throw ConfigError.forFields([['HERALD_NODE_ID', `${problems}, got ${JSON.stringify(id)}`]]);
}
