/**
 * A gateway node: builds the hub, broker, authenticator, catalogue, transport and HTTP API from a frozen
 * config, and runs them from listen to close. Tests build several in one process, each with its own metrics.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { hostname } from 'node:os';
import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import { CloseCode, emitPath } from '@herald/protocol';
import type { Authenticator } from './auth/authenticator.ts';
import { JwtAuthenticator, type AuthObserver } from './auth/jwt.ts';
import type { Broker, Histories } from './broker/broker.ts';
import { MemoryBus } from './broker/memory.ts';
import type { RedisBroker } from './broker/redis/broker.ts';
import { nodeIdSchema, type Config } from './config/schema.ts';
import type { DataSource } from './data/data-source.ts';
import { openDataSources } from './data/open.ts';
import type { PreparedCode } from './code/code-runner.ts';
import { CanConnectGate } from './code/gate.ts';
import { prepareApart } from './code/prepare-apart.ts';
import { CodeRunners } from './code/runners.ts';
import { dataSourceCalls } from './code/system-calls.ts';
import { EventCatalogue } from './events/catalogue.ts';
import { TableCatalogue } from './events/tables.ts';
import { ConfigError, type Contain } from './errors.ts';
import { healthRoutes, metricsRoute } from './http/health.ts';
import { EmitFastPath } from './http/fast-path.ts';
import { rateLimiters } from './http/rate-limit.ts';
import { HttpServers, type Ports } from './http/servers.ts';
import { emitFastRoute, emitRoute, tokenRoute } from './http/system-api.ts';
import { IdempotencyKeys } from './emit/idempotency.ts';
import { Emits } from './emit/emitter.ts';
import type { RedisStream } from './broker/redis/ingest.ts';
import { Ingest } from './ingest/consumer.ts';
import { tableRoutes } from './http/tables.ts';
import { controlApi } from './http/control-api.ts';
import { FleetControl } from './session/fleet.ts';
import { LocalSessions } from './session/local.ts';
import { RedisOutage } from './session/outage.ts';
import { Revocations } from './session/revocations.ts';
import { Webhooks } from './webhooks.ts';
import { Hub } from './hub/hub.ts';
import { closePaced } from './hub/departures.ts';
import { describe, type Subject } from './session/subjects.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { Canary } from './canary.ts';
import { FleetStatus } from './status/fleet.ts';
import { StatusSampler } from './status/record.ts';
import { statusRoutes } from './http/status.ts';
import { Admission } from './transport/admission.ts';
import { WebSocketTransport } from './transport/websocket.ts';

export interface GatewayDeps {
  /** Default: the Redis broker when config.redis is set, else an in-process broker on a bus of its own. */
  broker?: Broker;
  /** This node's id in the fleet. Default: <hostname>-<pid>-<random>. */
  nodeId?: string | undefined;
  /** Default: built from config.instances. */
  dataSources?: ReadonlyMap<string, DataSource>;
  /** Fastify's logger option: false (tests), true, or pino options. Default false. Every line carries the node's id. */
  logger?: boolean | { level: string };
}

/**
 * What Gateway.create loaded for this config alone: a node without Redis never loads ioredis and the Redis broker,
 * and one whose events carry no code never loads what prepares it (docs/architecture.md, "Measured costs").
 */
interface Loaded {
  /** Events' can-connect code, prepared, by event name. */
  prepared: ReadonlyMap<string, PreparedCode>;
  /** The Redis broker's and the emit stream's classes: loaded exactly when config.redis is set. */
  redis: { RedisBroker: typeof RedisBroker; RedisStream: typeof RedisStream } | undefined;
}

export class Gateway {
  readonly config: Readonly<Config>;
  readonly hub: Hub;
  readonly metrics: Metrics;
  readonly broker: Broker;
  readonly authenticator: Authenticator;
  readonly #http: HttpServers;
  readonly #dataSources: ReadonlyMap<string, DataSource>;
  readonly #admission: Admission;
  readonly #runners: CodeRunners;
  readonly #fastPath: EmitFastPath | undefined;
  readonly #revocations: Revocations;
  readonly #sessions: LocalSessions;
  readonly #control: FleetControl;
  readonly #webhooks: Webhooks | undefined;
  readonly #canary: Canary;
  readonly #fleetStatus: FleetStatus;
  /** With Redis only: the in-process broker cannot be lost. */
  readonly #outage: RedisOutage | undefined;
  /** The emit stream's reader (config ingest), with Redis only. */
  readonly #ingest: Ingest | undefined;
  #ready = false;
  /** While Redis is lost, its failed writes and reads are counted but not logged: "Redis lost" said it once. */
  #redisLost = false;
  /** Whether the emit's reads were last said to be on their own connection (undefined: not said yet). */
  #leanReads: boolean | undefined;
  #ports: Ports | undefined;

  private constructor(config: Readonly<Config>, dataSources: ReadonlyMap<string, DataSource>, deps: GatewayDeps, nodeId: string, loaded: Loaded) {
    this.config = config;
    this.#dataSources = dataSources;
    const ready = () => this.#ready && this.broker.ready() && this.#canary.healthy();
    // The hub is built below; the gauge reads its backlog at each scrape.
    this.metrics = createMetrics({ ready, backlog: () => this.hub.backlog, lagging: () => this.hub.lag.lagging });
    const { websocket } = config;
    this.#http = new HttpServers({
      server: config.server,
      logger: loggerOf(deps.logger ?? false, nodeId),
      metrics: this.metrics,
      maxPayload: websocket.maxPayload,
    });
    const contain: Contain = (where, error) => {
      this.metrics.internalErrors.inc({ where });
      this.log.error({ err: error, where }, 'contained an unexpected error; the node carries on');
    };
    const histories = historiesOf(config);
    const broker = deps.broker ?? this.#brokerFor(nodeId, contain, histories, loaded.redis);
    this.broker = broker;
    this.#canary = this.#canaryFor(broker);
    this.#fleetStatus = new FleetStatus({ broker, sampler: new StatusSampler({ metrics: this.metrics, nodeId: broker.nodeId, ready }), intervalMs: config.status.intervalMs });
    const { maxBacklogBytes, maxLagMs: maxEmitLagMs } = config.emit;
    this.hub = new Hub({ broker, metrics: this.metrics, contain, histories, ...websocket, maxBacklogBytes, maxEmitLagMs });
    // A revocation learned closes what holds its tokens here: #control exists by the time any is learned (listen()).
    this.#revocations = this.#revocationsFor(broker, (subject, revokedAt) => this.#control.closeRevoked(subject, revokedAt));
    this.authenticator = new JwtAuthenticator({ config, dataSources, revocations: this.#revocations, observer: this.#authObserver() });
    this.#webhooks = this.#webhooksFor(broker.nodeId);
    this.#sessions = new LocalSessions({
      hub: this.hub,
      authenticator: this.authenticator,
      revocations: this.#revocations,
      metrics: this.metrics,
      expiryNoticeMs: config.auth.expiryNoticeMs,
      webhooks: this.#webhooks,
    });
    this.#control = new FleetControl({
      broker,
      hub: this.hub,
      local: this.#sessions,
      revocations: this.#revocations,
      metrics: this.metrics,
      contain,
      keepRevocationsMs: longestTokenLifeMs(config),
      presenceTimeoutMs: config.control.presenceTimeoutMs,
    });
    const tables = new TableCatalogue(config);
    const catalogue = new EventCatalogue(config.events, tables);
    this.#admission = new Admission({ ...config.admission, metrics: this.metrics });
    this.#outage = config.redis && this.#outageFor(config.redis.lostCloseMs);
    this.#runners = new CodeRunners(config.code);
    const transport = new WebSocketTransport({
      authenticator: this.authenticator,
      contain,
      frameLimits: { maxEntries: websocket.maxEntriesPerFrame, maxCriteriaValueBytes: websocket.maxCriteriaValueBytes },
      catalogue,
      gate: this.#gate(dataSources, loaded.prepared),
      hub: this.hub,
      metrics: this.metrics,
      pingIntervalMs: websocket.pingIntervalMs,
      sessions: this.#sessions,
    });
    const { authenticator, metrics } = this;
    const { userPath } = config;
    const keys = new IdempotencyKeys(broker, metrics, config.emit.idempotencyWindowSeconds);
    const { backlog, lag } = this.hub;
    const emits = new Emits({ catalogue, broker, metrics, backlog, lag, whenBacklogged: config.emit.whenBacklogged, keys });
    const systemApiOptions = { userPath, authenticator, metrics, emits };
    if (config.server.emitFastPath) {
      const { bodyLimit } = this.#http.backEnd.initialConfig;
      const route = emitFastRoute(systemApiOptions, this.log);
      this.#fastPath = new EmitFastPath({ path: emitPath(userPath), route, bodyLimit: bodyLimit!, metrics });
    }
    this.#ingest = this.#ingestFor(emits, broker.nodeId, loaded.redis);
    const limiters = rateLimiters(config.rateLimit, this.metrics);
    const limits = config.tables;
    this.#http.mount({
      websocket: (app) => transport.route(app),
      token: (app) => tokenRoute(app, systemApiOptions, limiters.tokenRequests),
      health: (app) => healthRoutes(app, ready),
      emit: (app) => emitRoute(app, systemApiOptions, config.emit.maxBatchEvents),
      tables: (app) => tableRoutes(app, { userPath, authenticator, tables, dataSources, broker, metrics, limits, rateLimiters: limiters }),
      control: (app) => controlApi(app, { userPath, authenticator, control: this.#control, groups: config.control.groups }),
      metrics: (app) => metricsRoute(app, metrics),
      status: (app) => statusRoutes(app, this.#fleetStatus),
    });
  }

  /** The delivery canary: its round trips and misses as metrics, its own channel's loss and return as one log line each. */
  #canaryFor(broker: Broker): Canary {
    const { metrics, log } = this;
    const { intervalMs, timeoutMs } = this.config.canary;
    const seconds = (ms: number) => Math.round(ms / 100) / 10;
    return new Canary({
      broker,
      intervalMs,
      timeoutMs,
      observer: {
        roundTrip: (value, target) => metrics.canaryRoundTrip.observe({ target }, value),
        missed: (target) => metrics.canaryMissed.inc({ target }),
        channelLost: (silentMs) =>
          log.error({ silentMs: Math.round(silentMs) }, `this node's channel stopped delivering: none of its canaries came back through the broker for ${seconds(silentMs)} s; not ready until one does`),
        channelBack: (silentMs) => log.info({ silentMs: Math.round(silentMs) }, `this node's channel delivers again (a canary came back after ${seconds(silentMs)} s): ready`),
      },
    });
  }

  /** While Redis is lost no client is let in; past lostCloseMs the node's clients are let go (session/outage.ts). */
  #outageFor(lostCloseMs: number): RedisOutage {
    const { log } = this;
    return new RedisOutage({
      hub: this.hub,
      lostCloseMs,
      pace: this.config.drain,
      admit: (refusing) => (refusing === undefined ? this.#admission.release() : this.#admission.hold(refusing)),
      observer: {
        lettingGo: (clients, lostForMs) =>
          log.warn({ clients, lostForMs: Math.round(lostForMs) }, `Redis lost for ${Math.round(lostForMs / 100) / 10} s: letting this node's clients go (4004) to nodes that can serve them`),
        letGo: (closed, ms) => log.info({ closed, ms: Math.round(ms) }, `let ${closed} clients go`),
      },
    });
  }

  /** The emit stream's reader: a consumer of the fleet's group, named for this node. */
  #ingestFor(emits: Emits, nodeId: string, modules: Loaded['redis']): Ingest | undefined {
    const { ingest, redis, apiUsers } = this.config;
    if (ingest === undefined || redis === undefined || modules === undefined) return undefined;
    const { RedisStream } = modules;
    const { stream, group, deadLetterStream, deadLetterMaxLen } = ingest;
    const streamOptions = {
      target: redis, liveness: redis, stream, group, consumer: nodeId, deadLetterStream, deadLetterMaxLen, forgetConsumerMs: FORGET_STREAM_CONSUMER_MS,
    };
    const log = this.log;
    return new Ingest({
      stream: new RedisStream(streamOptions, `gw:ingest:${encodeURIComponent(nodeId)}`),
      emits,
      apiUsers: new Map(Object.entries(apiUsers).map(([name, { groups }]) => [name, { name, groups: new Set(groups) }])),
      config: ingest,
      metrics: this.metrics,
      failed: (error) => {
        if (!this.#redisLost) log.warn({ err: error }, 'the emit stream could not be read; the node tries again in a second');
      },
    });
  }

  /** Logins counted by result; a generator whose people's passwords are not hashed is named once in the log. */
  #authObserver(): AuthObserver {
    const { metrics } = this;
    const { log } = this;
    return {
      personLogin: (generator, result) => metrics.personLogins.inc({ generator, result }),
      passwordNotHashed: (generator, column) =>
        log.warn(
          { generator, column },
          `token generator ${generator}: a person's ${column} holds no scrypt hash (plain text?), so nobody logs in with it; store hashes (herald-gateway hash-password)`,
        ),
    };
  }

  /** The gate over the events' prepared can-connect code (Gateway.create prepares it). */
  #gate(dataSources: ReadonlyMap<string, DataSource>, prepared: ReadonlyMap<string, PreparedCode>): CanConnectGate {
    for (const [event, { inIsolate, reasons }] of prepared) {
      this.log.info({ event, runner: inIsolate ? 'isolate' : 'sandbox', reasons }, 'can-connect code loaded');
    }
    return new CanConnectGate({ prepared, runners: this.#runners, sys: dataSourceCalls(dataSources), metrics: this.metrics });
  }

  /**
   * A bad node id stops the node before it opens its data sources. Events' can-connect code is prepared once, here:
   * bad code stops the node, naming the event (code/prepare-apart.ts). The Redis modules are loaded only with Redis.
   */
  static async create(config: Readonly<Config>, deps: GatewayDeps = {}): Promise<Gateway> {
    const nodeId = nodeIdOf(deps.nodeId);
    const withCode = Object.values(config.events).some((event) => event.canConnect !== undefined);
    const [prepared, redis] = await Promise.all([
      withCode ? prepareApart(config.events) : new Map<string, PreparedCode>(),
      config.redis ? loadRedisModules() : undefined,
    ]);
    const dataSources = deps.dataSources ?? (await openDataSources(config.instances));
    return new Gateway(config, dataSources, deps, nodeId, { prepared, redis });
  }

  #brokerFor(nodeId: string, contain: Contain, histories: Histories, modules: Loaded['redis']): Broker {
    const { redis } = this.config;
    const { metrics } = this;
    if (!redis || !modules) return new MemoryBus(histories).broker(nodeId, { historyAppended: (routes) => metrics.historyAppends.inc(routes) });
    const { log } = this;
    return new modules.RedisBroker({
      target: redis,
      nodeId,
      leaseMs: redis.leaseMs,
      connectedLeaseMs: redis.connectedLeaseMs,
      sweepIntervalMs: redis.sweepIntervalMs,
      lostAfterMs: redis.lostAfterMs,
      routeBuckets: redis.routeBuckets,
      observer: {
        resynced: (routes) => {
          metrics.resyncs.inc();
          log.info({ routes }, 'wrote this node\'s routes to Redis');
          this.hub.catchUp();
        },
        swept(deadNodeId, routes) {
          metrics.sweptRoutes.inc(routes);
          log.warn({ deadNodeId, routes }, 'swept the routes of a dead node');
        },
        sweepDeferred: () => metrics.sweepsDeferred.inc(),
        spared: () => metrics.sweepsSpared.inc(),
        writeFailed: (error) => {
          metrics.brokerWriteFailures.inc();
          if (!this.#redisLost) log.warn({ err: error }, 'a Redis write failed; the node will write its routes again');
        },
        redisLost: (why) => {
          this.#redisLost = true;
          metrics.redisLost.inc();
          this.#outage?.lost();
          log.error({ why }, `Redis lost: emits answer 503 and this node takes no client until Redis is back, and its clients are let go in ${redis.lostCloseMs / 1000} s`);
        },
        redisBack: () => {
          this.#redisLost = false;
          this.#outage?.back();
          log.info('Redis back');
        },
        undeliverable(error) {
          contain('broker_message', error);
        },
        leanReads: (lean, why) => {
          metrics.leanReads.set(lean ? 1 : 0);
          // Told at each failed reconnect of that connection: said once per change, and not while "Redis lost" says it all.
          if (lean === this.#leanReads) return;
          this.#leanReads = lean;
          if (lean) log.info("the emit's registry reads are on their own connection to Redis");
          else if (!this.#redisLost) log.warn({ why }, "the emit's registry reads go through ioredis until their own connection to Redis is back");
        },
        historyAppended: (routes) => metrics.historyAppends.inc(routes),
        historyAppendFailed: () => metrics.historyAppendFailures.inc(),
      },
      histories,
    });
  }

  /** Revocations read from the broker at start, and its recent ones again every third of a Redis lease. */
  #revocationsFor(broker: Broker, learned: (subject: Subject, revokedAt: number) => void): Revocations {
    const { metrics } = this;
    const { redis } = this.config;
    return new Revocations({
      broker,
      keepMs: longestTokenLifeMs(this.config),
      pollMs: redis ? Math.max(100, Math.floor(redis.leaseMs / 3)) : undefined,
      learned: (subject, revokedAt) => {
        this.log.info({ subject: describe(subject), revokedAt }, 'tokens revoked');
        learned(subject, revokedAt);
      },
      counted: (size) => metrics.revocations.set(size),
      failed: (error) => {
        if (!this.#redisLost) this.log.warn({ err: error }, 'could not read the revocations; the next read reads back further');
      },
    });
  }

  #webhooksFor(nodeId: string): Webhooks | undefined {
    const { webhooks } = this.config;
    if (!webhooks) return undefined;
    const log = this.log;
    return new Webhooks({
      config: webhooks,
      nodeId,
      metrics: this.metrics,
      gaveUp: (events, why) => log.warn({ events, why }, 'gave up sending connect and disconnect events to the webhook'),
    });
  }

  get log(): FastifyBaseLogger {
    return this.#http.log;
  }

  /** The ports listened on (useful with port 0); undefined before listen(). */
  get ports(): Ports | undefined {
    return this.#ports;
  }

  /** Start the broker, then listen; answers the clients' port (useful with port 0). */
  async listen(): Promise<number> {
    await this.broker.start((event, eventData, positions, json) => this.hub.deliver(event, eventData, positions, json), this.#control.receive, this.#canary.receive);
    await this.#ingest?.start();
    this.#canary.start();
    this.#fleetStatus.start();
    // Before the port opens: no handshake may pass a revocation this node has not read yet.
    await this.#revocations.start();
    this.#sessions.start();
    await this.#http.ready();
    this.#admission.install(this.#http.clients.server);
    this.#fastPath?.install(this.#http.backEnd.server);
    this.#ports = await this.#http.listen();
    this.#ready = true;
    return this.#ports.clients;
  }

  /**
   * Wait for this node's leaving of the fleet (its routes out of Redis) a share of the drain's deadline at most: past
   * it the clients are told to go while the removal goes on. What it has not removed when the process exits, a
   * survivor sweeps (the node's connection closes with it).
   */
  async #awaitLeaving(leaving: Promise<void>, deadline: number): Promise<void> {
    const waitMs = (deadline - performance.now()) * LEAVE_SHARE_OF_DEADLINE;
    const late = delay(waitMs, 'late' as const, { ref: false });
    if ((await Promise.race([leaving, late])) === 'late') {
      this.log.warn({ waitedMs: Math.round(waitMs) }, "leaving the fleet's Redis state takes long: clients are told to go meanwhile");
    }
  }

  /**
   * Drain: report not-ready at once (the load balancer stops sending clients), refuse new ones, take this
   * node's routes out of the fleet (waiting a third of the deadline at most), then tell clients to go elsewhere
   * (1001) in batches, so that their reconnects spread out, and release everything. The caller bounds it in time (config.drain.deadlineMs).
   * A node sharing its port (server.reusePort) stops listening first instead: its successor on the same port
   * takes every new client, and a client this node refused would wait 1-5 s before it tried again.
   */
  async close(): Promise<void> {
    const deadline = performance.now() + this.config.drain.deadlineMs;
    this.#ready = false;
    if (this.config.server.reusePort) {
      // As Node's server ends its idle keep-alive connections on close: a back end's next emit then reaches the successor.
      this.#http.stopListening();
      this.#fastPath?.close();
    }
    this.#admission.close();
    this.#outage?.stop();
    // What it took and has not published, another node claims after ingest.claimIdleMs.
    await this.#ingest?.stop();
    this.#canary.stop();
    this.#fleetStatus.stop();
    this.#sessions.close();
    this.#revocations.close();
    const leaving = this.broker.close();
    await this.#awaitLeaving(leaving, deadline);
    await closePaced(this.hub, [...this.hub.sessions], { ...this.config.drain, jitter: false }, CloseCode.GOING_AWAY, 'node draining: reconnect');
    this.#fastPath?.close();
    await leaving;
    await this.#http.close();
    await this.#runners.close();
    await Promise.all([...this.#dataSources.values()].map((source) => source.close()));
    // Last, so that the disconnects of the drain are among what it sends; before the deadline's exit (main.ts).
    await this.#webhooks?.close(deadline - WEBHOOK_FLUSH_MARGIN_MS);
  }
}

/**
 * The share of the drain's deadline that leaving the fleet (its routes out of Redis) may take before the clients are
 * told to go: a starved or stalled Redis must not keep them until the deadline ends the process under them.
 */
const LEAVE_SHARE_OF_DEADLINE = 1 / 3;

/** A consumer of the emit stream with nothing pending, idle this long (its node gone for good), leaves the group. */
const FORGET_STREAM_CONSUMER_MS = 3_600_000;

/** The webhooks' last sends end this long before the drain's deadline, which exits the process. */
const WEBHOOK_FLUSH_MARGIN_MS = 250;

async function loadRedisModules(): Promise<Loaded['redis']> {
  const [{ RedisBroker }, { RedisStream }] = await Promise.all([import('./broker/redis/broker.ts'), import('./broker/redis/ingest.ts')]);
  return { RedisBroker, RedisStream };
}

/** How long a revocation matters: no token issued before it can live longer than this. */
function longestTokenLifeMs({ auth }: Readonly<Config>): number {
  return Math.max(auth.tokenTtlSeconds, auth.refreshTtlSeconds) * 1000;
}

/** Pino's options with the node's id in every line, beside pino's own pid and hostname. */
function loggerOf(logger: boolean | { level: string }, nodeId: string): FastifyServerOptions['logger'] {
  if (logger === false) return false;
  return { ...(logger === true ? {} : logger), base: { pid: process.pid, hostname: hostname(), nodeId } };
}

/** The events that keep a history, by name. */
function historiesOf(config: Readonly<Config>): Histories {
  return new Map(Object.entries(config.events).flatMap(([name, { history }]) => (history === undefined ? [] : [[name, history]])));
}

/** HERALD_NODE_ID, or a new id; checked like a config field, since the fleet's registry in Redis relies on it. */
function nodeIdOf(given: string | undefined): string {
  const id = given ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const checked = nodeIdSchema.safeParse(id);
  if (checked.success) return id;
  const problems = checked.error.issues.map((issue) => issue.message).join('; ');
  throw ConfigError.forFields([['HERALD_NODE_ID', `${problems}, got ${JSON.stringify(id)}`]]);
}
