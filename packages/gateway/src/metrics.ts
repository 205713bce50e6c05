/** Every instrument of a node, in one registry per node (tests run several nodes in one process). */
import { readdirSync, statSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * prom-client defaults whose cost grows with the open sockets: at 18,000 sockets a scrape spent ~15 ms listing
 * /proc/self/fd and ~15 ms building arrays of every handle and resource, with the event loop stopped.
 * herald_connections counts the sockets; the open files are counted below without a listing.
 */
const PER_SOCKET_DEFAULTS = [
  'herald_process_open_fds',
  'herald_nodejs_active_handles',
  'herald_nodejs_active_handles_total',
  'herald_nodejs_active_resources',
  'herald_nodejs_active_resources_total',
];

/** Open file descriptors: Linux ≥ 6.2 gives their count as the size of /proc/self/fd; older ones, a listing. */
function openFileDescriptors(): number {
  return statSync('/proc/self/fd').size || readdirSync('/proc/self/fd').length;
}

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_' });
  for (const name of PER_SOCKET_DEFAULTS) registry.removeSingleMetric(name);
  const registers = [registry];
  if (process.platform === 'linux') {
    new Gauge({
      name: 'herald_process_open_fds',
      help: 'Number of open file descriptors.',
      registers,
      collect() {
        this.set(openFileDescriptors());
      },
    });
  }
  return {
    registry,
    connections: new Gauge({ name: 'herald_connections', help: 'Open, authenticated WebSocket connections', registers }),
    connectionsOpened: new Counter({
      name: 'herald_connections_opened_total',
      help: 'Connections that were told CONNECTED',
      registers,
    }),
    closes: new Counter({
      name: 'herald_connections_closed_total',
      help: 'Connections closed, by close code',
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
    emitsFailed: new Counter({
      name: 'herald_emits_failed_total',
      help: 'Emits that could not be published (the broker was unreachable): answered 503',
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
    fastPathHandOvers: new Counter({
      name: 'herald_http_fast_path_handovers_total',
      help: "Connections that began with a POST and went to Node's HTTP server (fastify), by reason: other_request (not an emit), http_form (chunked, Expect, a query, a header it does not take whole), body (not a plain JSON object of the emit's shape)",
      labelNames: ['reason'],
      registers,
    }),
    refusals: new Counter({
      name: 'herald_refusals_total',
      help: 'Requests, frames and subscriptions refused, by error code',
      labelNames: ['code'],
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
      help: 'Emits of events with history whose appends or publishes failed (answered 503)',
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
      help: 'Replies (REGISTER, UNREGISTER, ERROR) not written: the client had left before its answer was ready',
      registers,
    }),
  };
}
