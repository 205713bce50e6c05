/**
 * Every instrument of a node, in one registry per node (tests run several nodes in one process). prom-client's
 * default process and Node.js metrics keep their stock names (process_*, nodejs_*), so stock dashboards read them.
 */
import { readdirSync, statSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * prom-client defaults whose cost grows with the open sockets: a scrape listed /proc/self/fd and built arrays of
 * every handle and resource, with the event loop stopped (docs/architecture.md, "Measured costs"). herald_connections
 * counts the sockets; the open files are counted below without a listing.
 */
const PER_SOCKET_DEFAULTS = [
  'process_open_fds',
  'nodejs_active_handles',
  'nodejs_active_handles_total',
  'nodejs_active_resources',
  'nodejs_active_resources_total',
];

/** Open file descriptors: Linux ≥ 6.2 gives their count as the size of /proc/self/fd; older ones, a listing. */
function openFileDescriptors(): number {
  return statSync('/proc/self/fd').size || readdirSync('/proc/self/fd').length;
}

export interface MetricsOptions {
  /** Whether the node would answer /readyz 200, read at each scrape (herald_ready). */
  ready?: () => boolean;
  /** The delivery backlog's two parts, read at each scrape (herald_delivery_backlog_bytes). */
  backlog?: () => { socketBytes: number; fanOutBytes: number };
  /** Connections whose lag probe is in flight past emit.maxLagMs, read at each scrape (herald_lagging_connections). */
  lagging?: () => number;
}

/**
 * herald_http_responses_total's counts as plain numbers per route and status, handed to prom-client at each scrape:
 * prom-client hashes the labels on every inc, a cost every emit would carry.
 */
export class ResponseTally {
  readonly #counts = new Map<string, Map<number, number>>();

  count(route: string, status: number): void {
    increment(this.#byStatus(route), status);
  }

  /** A counter of one route's responses by status, with the route looked up once. */
  forRoute(route: string): (status: number) => void {
    const byStatus = this.#byStatus(route);
    return (status) => increment(byStatus, status);
  }

  #byStatus(route: string): Map<number, number> {
    let byStatus = this.#counts.get(route);
    if (!byStatus) this.#counts.set(route, (byStatus = new Map()));
    return byStatus;
  }

  /** Every count so far, as label sets and totals. */
  *totals(): Generator<[{ route: string; status: string }, number]> {
    for (const [route, byStatus] of this.#counts) {
      for (const [status, total] of byStatus) yield [{ route, status: String(status) }, total];
    }
  }
}

function increment(counts: Map<number, number>, status: number): void {
  counts.set(status, (counts.get(status) ?? 0) + 1);
}

export function createMetrics({ ready = () => false, backlog = () => ({ socketBytes: 0, fanOutBytes: 0 }), lagging = () => 0 }: MetricsOptions = {}) {
  const registry = new Registry();
  const responses = new ResponseTally();
  collectDefaultMetrics({ register: registry });
  for (const name of PER_SOCKET_DEFAULTS) registry.removeSingleMetric(name);
  const registers = [registry];
  if (process.platform === 'linux') {
    new Gauge({
      name: 'process_open_fds',
      help: 'Number of open file descriptors.',
      registers,
      collect() {
        this.set(openFileDescriptors());
      },
    });
  }
  return {
    registry,
    ready: new Gauge({
      name: 'herald_ready',
      help: 'Whether the node takes new clients: 1 when /readyz answers 200, 0 while starting, draining or without its Redis',
      registers,
      collect() {
        this.set(ready() ? 1 : 0);
      },
    }),
    connections: new Gauge({ name: 'herald_connections', help: 'Open, authenticated WebSocket connections', registers }),
    connectionsOpened: new Counter({
      name: 'herald_connections_opened_total',
      help: 'Connections that were told CONNECTED',
      registers,
    }),
    closes: new Counter({
      name: 'herald_connections_closed_total',
      help: 'Connections closed, by close code: the codes of the protocol, or other_1xxx, other_3xxx, other_4xxx for any other a client sent',
      labelNames: ['code'],
      registers,
    }),
    subscriptions: new Gauge({ name: 'herald_subscriptions', help: 'Subscriptions held by local connections', registers }),
    routes: new Gauge({ name: 'herald_routes', help: 'Distinct routes (event + criteria values) on this node', registers }),
    emits: new Counter({
      name: 'herald_emits_total',
      help: 'Emits accepted over HTTP, by event',
      labelNames: ['event'],
      registers,
    }),
    emitsRefused: new Counter({
      name: 'herald_emits_refused_total',
      help: 'Emits refused with 503 OVERLOADED, by reason: backlog (the delivery backlog was past emit.maxBacklogBytes), lag (most busy connections were further behind than emit.maxLagMs)',
      labelNames: ['reason'],
      registers,
    }),
    deliveryBacklog: new Gauge({
      name: 'herald_delivery_backlog_bytes',
      help: 'Bytes on their way to this node\'s sockets, by part: sockets (written, not yet passed to the kernel) and fan_out (fan-outs have still to write)',
      labelNames: ['part'],
      registers,
      collect() {
        const { socketBytes, fanOutBytes } = backlog();
        this.set({ part: 'sockets' }, socketBytes);
        this.set({ part: 'fan_out' }, fanOutBytes);
      },
    }),
    deliveryLag: new Histogram({
      name: 'herald_delivery_lag_seconds',
      help: "How far behind busy connections are: a lag probe's delay from its write behind the connection's data to its pong (or its age when it closed the connection)",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    lagging: new Gauge({
      name: 'herald_lagging_connections',
      help: 'Connections whose lag probe has waited longer than emit.maxLagMs',
      registers,
      collect() {
        this.set(lagging());
      },
    }),
    shed: new Counter({
      name: 'herald_slow_clients_closed_total',
      help: 'Connections closed with 1013 for reading too slowly, by reason: unsent (their unsent bytes passed websocket.maxBufferedBytes), lag (further behind than websocket.maxLagMs)',
      labelNames: ['reason'],
      registers,
    }),
    deliveriesOverBacklog: new Counter({
      name: 'herald_deliveries_over_backlog_total',
      help: 'Fan-outs begun while the delivery backlog was past emit.maxBacklogBytes: emits from other nodes (which check only their own backlog) and emits that wait (emit.whenBacklogged: wait)',
      registers,
    }),
    emitsFailed: new Counter({
      name: 'herald_emits_failed_total',
      help: 'Emits that could not be published (the broker was unreachable): answered 503',
      registers,
    }),
    emitsPending: new Counter({
      name: 'herald_emits_pending_total',
      help: 'Emits published to some of the nodes holding their routes but not all, or only appended to a history (a shard of the Redis Cluster failing over): answered 202',
      registers,
    }),
    publishes: new Counter({
      name: 'herald_broker_publishes_total',
      help: 'Node deliveries published by this node: one per node holding a matching route, per emit',
      registers,
    }),
    resyncs: new Counter({
      name: 'herald_broker_resyncs_total',
      help: 'Times this node wrote all its routes to Redis again (start, Redis restarted or flushed, failed writes)',
      registers,
    }),
    sweptRoutes: new Counter({
      name: 'herald_broker_swept_routes_total',
      help: "Routes of dead nodes this node removed from Redis",
      registers,
    }),
    sweepsDeferred: new Counter({
      name: 'herald_broker_sweeps_deferred_total',
      help: 'Sweeps this node skipped because its own heartbeat ran late (a starved machine runs every timer late, so lapsed leases there prove nothing)',
      registers,
    }),
    sweepsSpared: new Counter({
      name: 'herald_broker_sweeps_spared_total',
      help: 'Lapsed nodes this node did not sweep (once per node and sweep lock): Redis still held their connection, so stalled rather than dead',
      registers,
    }),
    idempotentEmits: new Counter({
      name: 'herald_emits_idempotent_total',
      help: 'Emits with an Idempotency-Key, by result: published (the first), replayed (a repeat answered, not published), conflict (the key reused for another body: 422), in_use (a repeat while the first is published: 409), freed (refused before publishing: the key let go), unsettled (published, its answer not recorded: Redis failed)',
      labelNames: ['result'],
      registers,
    }),
    ingestEntries: new Counter({
      name: 'herald_ingest_entries_total',
      help: 'Entries of the emit stream this node took, by result: published, replayed (published before under its key: acknowledged only), dead_lettered (can never be published), retried (left pending: Redis unreachable, the backlog over its bound, its key in use), claimed (taken from a node that left them idle past claimIdleMs)',
      labelNames: ['result'],
      registers,
    }),
    ingestWaiting: new Gauge({
      name: 'herald_ingest_waiting',
      help: 'Entries of the emit stream waiting, as this node last read it: pending (delivered to a node, not acknowledged) and undelivered',
      labelNames: ['state'],
      registers,
    }),
    ingestOldest: new Gauge({
      name: 'herald_ingest_oldest_waiting_seconds',
      help: 'Age of the oldest entry of the emit stream still waiting (pending or undelivered), as this node last read it; 0 when none waits',
      registers,
    }),
    redisLost: new Counter({
      name: 'herald_redis_lost_total',
      help: "Times this node lost Redis: its command connection closed, or Redis did not answer within redis.lostAfterMs and the node cut it",
      registers,
    }),
    brokerWriteFailures: new Counter({
      name: 'herald_broker_write_failures_total',
      help: 'Registry writes that failed (repaired by the next resync)',
      registers,
    }),
    leanReads: new Gauge({
      name: 'herald_redis_lean_reads',
      help: "1 while the emit's registry reads are on their own connection to Redis, 0 while they go through ioredis",
      registers,
    }),
    deliveriesIn: new Counter({
      name: 'herald_deliveries_in_total',
      help: 'Emits that reached this node for local fan-out',
      registers,
    }),
    notificationsOut: new Counter({
      name: 'herald_notifications_out_total',
      help: 'NOTIFICATION frames written to sockets',
      registers,
    }),
    fanOutSeconds: new Histogram({
      name: 'herald_fanout_duration_seconds',
      help: "Time from an emit's arrival at this node's hub (Hub.deliver) to the last NOTIFICATION of its fan-out written, for emits that matched a local subscriber",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    httpResponsesTotal: new Counter({
      name: 'herald_http_responses_total',
      help: "HTTP responses, by route (the route's pattern, or unmatched) and status, the emit's fast path included; not upgrades (101) nor admission's 503s",
      labelNames: ['route', 'status'],
      registers,
      collect() {
        this.reset();
        for (const [labels, total] of responses.totals()) this.inc(labels, total);
      },
    }),
    responses,
    fastPathHandOvers: new Counter({
      name: 'herald_http_fast_path_handovers_total',
      help: "Connections that began with a POST and went to Node's HTTP server (fastify), by reason: other_request (not an emit, or bytes that cannot begin one), http_form (chunked, Expect, a query, a header it does not take whole, a request the client ended in the middle of), body (not a plain JSON object of the emit's shape)",
      labelNames: ['reason'],
      registers,
    }),
    refusals: new Counter({
      name: 'herald_refusals_total',
      help: 'Requests, frames and subscriptions refused, by error code',
      labelNames: ['code'],
      registers,
    }),
    rateLimited: new Counter({
      name: 'herald_rate_limited_total',
      help: 'HTTP requests refused with 429 RATE_LIMITED, by limit (tokenRequests, tableCalls, apiUserTableCalls)',
      labelNames: ['limit'],
      registers,
    }),
    personLogins: new Counter({
      name: 'herald_person_logins_total',
      help: 'AM_DB logins, by token generator and result (ok, wrong_password, unknown_person, not_hashed, busy)',
      labelNames: ['generator', 'result'],
      registers,
    }),
    tableRowsRefused: new Counter({
      name: 'herald_table_rows_refused_total',
      help: 'Table saves refused for a row over tables.maxRowBytes or nested deeper than the JSON depth limit, by reason (size, depth)',
      labelNames: ['reason'],
      registers,
    }),
    handshakesInFlight: new Gauge({
      name: 'herald_handshakes_in_flight',
      help: 'Clients in the handshake (upgrade to first REGISTER answered)',
      registers,
    }),
    handshakesPeak: new Gauge({
      name: 'herald_handshakes_in_flight_peak',
      help: 'The most clients that were in the handshake at once since the node started',
      registers,
    }),
    handshakesQueued: new Gauge({
      name: 'herald_handshakes_queued',
      help: 'Clients waiting for a handshake slot',
      registers,
    }),
    admissionRejected: new Counter({
      name: 'herald_admission_rejected_total',
      help: 'Clients refused with HTTP 503 because the handshake queue was full or the node was draining',
      registers,
    }),
    maxRss: new Gauge({
      name: 'herald_process_max_resident_memory_bytes',
      help: 'The largest resident set size this process has had',
      registers,
      collect() {
        this.set(process.resourceUsage().maxRSS * 1024);
      },
    }),
    canConnect: new Counter({
      name: 'herald_can_connect_total',
      help: "Calls of events' can-connect code, by event, runner and result (allowed, refused, threw, timeout, memory, bad_result, unavailable)",
      labelNames: ['event', 'runner', 'result'],
      registers,
    }),
    canConnectSeconds: new Histogram({
      name: 'herald_can_connect_seconds',
      help: 'Time a can-connect call took, by runner',
      labelNames: ['runner'],
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1, 5],
      registers,
    }),
    pingTimeouts: new Counter({
      name: 'herald_ping_timeouts_total',
      help: 'Connections closed because they did not answer a ping',
      registers,
    }),
    drops: new Counter({
      name: 'herald_notifications_dropped_total',
      help: 'Notifications not written, by reason (slow_client, closing)',
      labelNames: ['reason'],
      registers,
    }),
    historyAppends: new Counter({
      name: 'herald_history_appends_total',
      help: "Routes' histories the emits made on this node were appended to (events with history)",
      registers,
    }),
    historyAppendFailures: new Counter({
      name: 'herald_history_append_failures_total',
      help: 'Emits of events with history whose appends or publishes failed (answered 503; 202 when appended)',
      registers,
    }),
    historyRecoveries: new Counter({
      name: 'herald_history_recoveries_total',
      help: 'REGISTER entries with since, by result: recovered (every notification after since replayed), epoch_changed, too_old (the history no longer reaches back, or Redis could not be read), capped (more than maxReplay missed)',
      labelNames: ['result'],
      registers,
    }),
    historyReplayed: new Counter({
      name: 'herald_history_replayed_total',
      help: 'NOTIFICATION frames replayed to resuming clients',
      registers,
    }),
    historyDuplicates: new Counter({
      name: 'herald_history_duplicates_total',
      help: "Deliveries of a history event's route at or below the position this node had delivered (or read when the route came): dropped",
      registers,
    }),
    historyGapFills: new Counter({
      name: 'herald_history_gap_fills_total',
      help: "Gaps in a route's offsets filled from its history before later deliveries, by result: filled, lost (the history no longer held them, or Redis could not be read)",
      labelNames: ['result'],
      registers,
    }),
    repliesDropped: new Counter({
      name: 'herald_replies_dropped_total',
      help: 'Replies (REGISTER, UNREGISTER, REFRESH, ERROR) and TOKEN_EXPIRING notices not written, by reason: closing (the client had left before its answer was ready), slow_client (its unsent data passed the bound: it was shed)',
      labelNames: ['reason'],
      registers,
    }),
    internalErrors: new Counter({
      name: 'herald_internal_errors_total',
      help: 'Unexpected throws the node contained, by where: fan_out (one emit\'s fan-out ended), frame (one client closed with 1011), broker_message (one message from Redis dropped)',
      labelNames: ['where'],
      registers,
    }),
    expiryNotices: new Counter({
      name: 'herald_token_expiry_notices_total',
      help: 'TOKEN_EXPIRING frames sent: a connection whose tokens expire within auth.expiryNoticeMs',
      registers,
    }),
    sessionsExpired: new Counter({
      name: 'herald_sessions_expired_total',
      help: 'Connections closed with 4001 because their tokens expired and were not refreshed',
      registers,
    }),
    refreshes: new Counter({
      name: 'herald_refreshes_total',
      help: 'REFRESH frames answered, by result: accepted, refused (the refusals also count in herald_refusals_total by code)',
      labelNames: ['result'],
      registers,
    }),
    controlCloses: new Counter({
      name: 'herald_control_closes_total',
      help: 'Connections this node closed for the control API, by action: disconnect (4003 or 4503), revoke (4504)',
      labelNames: ['action'],
      registers,
    }),
    revocations: new Gauge({
      name: 'herald_revocations',
      help: "Revoked persons and API users this node knows (each refuses its tokens issued before the revocation)",
      registers,
    }),
    presenceQueries: new Counter({
      name: 'herald_presence_queries_total',
      help: 'Presence queries this node asked the fleet, by complete: true (every live node answered in time) or false',
      labelNames: ['complete'],
      registers,
    }),
    webhookEvents: new Counter({
      name: 'herald_webhook_events_total',
      help: 'Connect and disconnect events for the back end\'s webhook, by result: sent, failed (given up after webhooks.maxAttempts, or refused with a 4xx), dropped (the queue was full)',
      labelNames: ['result'],
      registers,
    }),
    webhookRetries: new Counter({
      name: 'herald_webhook_retries_total',
      help: 'Webhook batches sent again after a failure (no answer, a timeout, a 5xx or 429)',
      registers,
    }),
    canaryRoundTrip: new Histogram({
      name: 'herald_canary_round_trip_seconds',
      help: "Round trips of this node's delivery canaries through the broker, by target: self (this node's own channel) or peer (another node's channel and its answer on this node's)",
      labelNames: ['target'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers,
    }),
    canaryMissed: new Counter({
      name: 'herald_canary_missed_total',
      help: 'Delivery canaries not back within canary.timeoutMs, by target (self, peer); missed own canaries turn the node not-ready',
      labelNames: ['target'],
      registers,
    }),
    framesPaused: new Counter({
      name: 'herald_frames_paused_total',
      help: 'Times a client sent frames faster than the node answered them, and its socket stopped being read until the answers caught up',
      registers,
    }),
  };
}
