/**
 * The configuration schema. Each field documents its default; docs/configuration.md mirrors this file.
 * Validated once at start-up (load.ts), then frozen.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { DEFAULT_FRAME_LIMITS } from '@herald/protocol';
import { NODE_ID_SEPARATOR } from '../node-id.ts';

const name = z.string().regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-" only');

/** A proxy the node believes about X-Forwarded-For: an address, a CIDR range, or one of proxy-addr's names. */
const proxy = z
  .string()
  .refine((value) => {
    if (['loopback', 'linklocal', 'uniquelocal'].includes(value)) return true;
    const [address = '', bits, ...rest] = value.split('/');
    const family = isIP(address);
    return family !== 0 && rest.length === 0 && (bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128)));
  }, 'an IP address, a CIDR range (10.0.0.0/8), loopback, linklocal or uniquelocal');

const server = z
  .object({
    /** TCP port of the clients (WebSocket, token, health), and of everything else without apiPort. Default 38246; 0 picks a free port. */
    port: z.number().int().min(0).max(65535).default(38246),
    /** Address to bind. Default 0.0.0.0. */
    host: z.string().default('0.0.0.0'),
    /**
     * The back end's port: emit, the table API, token, health and /metrics move here, and the clients' port keeps only
     * the WebSocket, token and health. Default absent: everything on `port`. 0 picks a free port. HERALD_API_PORT overrides.
     */
    apiPort: z.number().int().min(0).max(65535).optional(),
    /** Address the API port binds. Default: `host`. */
    apiHost: z.string().optional(),
    /**
     * Share the port with another node process (SO_REUSEPORT), for a restart without a gap: start the new
     * process, then SIGTERM the old one, which stops listening at once so that every new client reaches the new
     * one. Default false: a second node on a taken port fails with EADDRINUSE. HERALD_REUSE_PORT overrides.
     */
    reusePort: z.boolean().default(false),
    /**
     * Connections the kernel keeps waiting for the node to accept them. Default 4096 (Linux caps it at
     * net.core.somaxconn). Node's own default, 511, overflows in a reconnect storm whenever one turn of the event
     * loop runs longer than 511 arrivals take (~130 ms at 4,000/s); the kernel then drops the handshake and the
     * client's TCP waits 1 s, then 2 s, before it tries again.
     */
    backlog: z.number().int().min(1).default(4096),
    /**
     * Answer plain emit calls with the gateway's own HTTP/1.1 reader (src/http/fast-path.ts) instead of Node's HTTP
     * server and fastify: about half the node's CPU per emit. Any other request, and an emit in a form it does not
     * take whole, still goes to fastify. Default true; false: fastify answers everything.
     */
    emitFastPath: z.boolean().default(true),
    /**
     * Whom to believe about a client's address (for the rate limits): false (default) the TCP peer; a list of the
     * proxies' addresses and CIDR ranges, the last address of X-Forwarded-For that is not one of them; true, the
     * first address of X-Forwarded-For, whoever wrote it (only behind a proxy that overwrites the header).
     */
    trustProxy: z.union([z.boolean(), z.array(proxy).min(1)]).default(false),
  })
  .strict()
  .refine((s) => s.apiPort === undefined || s.apiPort === 0 || s.apiPort !== s.port, {
    message: 'apiPort must differ from port',
    path: ['apiPort'],
  })
  .refine((s) => s.apiHost === undefined || s.apiPort !== undefined, { message: 'apiHost needs apiPort', path: ['apiHost'] });

const websocket = z
  .object({
    /** Largest client frame in bytes; a larger one closes the socket with 1009. Default 64 KiB. */
    maxPayload: z.number().int().min(1024).default(64 * 1024),
    /** Unsent bytes a client may hold before the node closes it with 1013. Default 1 MiB. */
    maxBufferedBytes: z.number().int().min(1024).default(1024 * 1024),
    /**
     * How far behind in time a connection may be (a lag probe unanswered this long: docs/architecture.md, "Delivery
     * lag") before the node closes it with 1013, so that a reader too slow for its notifications is told, not fed.
     * Default 5000 ms.
     */
    maxLagMs: z.number().int().min(100).default(5000),
    /** Interval between ping frames; a client that has not answered the previous one is closed. Default 60 s. */
    pingIntervalMs: z.number().int().min(100).default(60_000),
    /** Distinct subscriptions one connection may hold. Default 100. */
    maxSubscriptionsPerConnection: z.number().int().min(1).default(100),
    /** Recipients written before a fan-out yields to the event loop: a person's emit waits one chunk at most. Default 128. */
    fanOutChunk: z.number().int().min(1).default(128),
    /** Entries one REGISTER or UNREGISTER frame may carry; a frame with more is refused whole (BAD_FRAME). Default 100. */
    maxEntriesPerFrame: z.number().int().min(1).max(10_000).default(DEFAULT_FRAME_LIMITS.maxEntries),
    /**
     * UTF-8 bytes of one criteria value (its string form); a longer one refuses its entry (BAD_FRAME). The node keeps
     * each value in its index and in Redis for as long as the route lives. Default 256.
     */
    maxCriteriaValueBytes: z.number().int().min(1).max(65_536).default(DEFAULT_FRAME_LIMITS.maxCriteriaValueBytes),
  })
  .strict();

const emit = z
  .object({
    /**
     * Bytes on their way to this node's sockets (written and not yet passed to the kernel, and fan-outs still to
     * write) past which an emit is refused (503 OVERLOADED, Retry-After) or waits (whenBacklogged). At least twice
     * websocket.maxBufferedBytes: one client that does not read holds up to that much before it is shed, and must not
     * alone hold the node's emits back. Default 32 MiB (docs/configuration.md: how it was chosen).
     */
    maxBacklogBytes: z.number().int().min(64 * 1024).default(32 * 1024 * 1024),
    /**
     * What an emit meets past the bound. refuse (default): 503 OVERLOADED with Retry-After, nothing published. wait:
     * published, and answered once the fan-outs this node began before it are handed to its sockets and the backlog is
     * within the bound again, so that a back end that awaits each call is paced by the node.
     */
    whenBacklogged: z.enum(['refuse', 'wait']).default('refuse'),
    /**
     * How far behind in time most of the node's busy connections may be before an emit is refused (503 OVERLOADED,
     * Retry-After) or waits (whenBacklogged), like the backlog bound but counting what the kernel holds too. Below
     * websocket.maxLagMs. Default 250 ms (docs/configuration.md: how it was chosen).
     */
    maxLagMs: z.number().int().min(10).default(250),
    /**
     * How long an emit's Idempotency-Key is remembered, fleet-wide: a repeat within it (same API user, same key) is
     * answered as the first was and published nowhere. Default 300 s; at most a day.
     */
    idempotencyWindowSeconds: z.number().int().min(1).max(86_400).default(300),
    /** Emits one call to emit-events-ws may carry (within server.bodyLimit). Default 1000. */
    maxBatchEvents: z.number().int().min(1).max(100_000).default(1000),
  })
  .strict();

const auth = z
  .object({
    /** HS256 secret, at least 16 characters. No default: config/default.yaml ships a development one. */
    secret: z.string().min(16).optional(),
    /** ES256 key pair (PEM); when given, it is used instead of `secret`. */
    privateKey: z.string().optional(),
    publicKey: z.string().optional(),
    /** Lifetime of an access token. Default 3600 s. */
    tokenTtlSeconds: z.number().int().min(1).default(3600),
    /** Lifetime of a refresh token. Default 7 days. */
    refreshTtlSeconds: z.number().int().min(1).default(7 * 24 * 3600),
    /**
     * An open connection is sent TOKEN_EXPIRING this long before its tokens expire, and is closed with 4001 at their
     * expiry unless it sends REFRESH. Default 60 s; 0: no notice, only the close.
     */
    expiryNoticeMs: z.number().int().min(0).default(60_000),
  })
  .strict()
  .refine((a) => (a.privateKey === undefined) === (a.publicKey === undefined), {
    message: 'privateKey and publicKey go together',
    path: ['publicKey'],
  })
  .refine((a) => a.secret !== undefined || a.privateKey !== undefined, {
    message: 'set either secret, or both privateKey and publicKey',
    path: ['secret'],
  });

const apiUser = z
  .object({
    password: z.string().min(1),
    /** Groups this API user belongs to; events name the groups that may register and emit them. */
    groups: z.array(name).default([]),
  })
  .strict();

/** Who may use a table one way (read or write): anyone, an API user, an API user and a person, or nobody. */
const accessLevel = z.enum(['public', 'apiUser', 'both', 'none']);
const ACCESS_HINT = 'public, apiUser, both or none, or { read: <one of them>, write: <one of them> }';

/**
 * A table's access: `{ read, write }`, or one level as shorthand for both (what configs before the split wrote).
 * Reading covers GET and following its inserts (INSTANCES); writing covers saves.
 */
const tableAccess = z
  .union([accessLevel, z.object({ read: accessLevel, write: accessLevel }).strict()], { error: ACCESS_HINT })
  .default('both')
  .transform((access) => (typeof access === 'string' ? { read: access, write: access } : access));

const collection = z
  .object({
    /** JSON file (an array of rows) loaded into the in-memory data source; relative to the config file. */
    seed: z.string().optional(),
    /**
     * Who may read it (GET, INSTANCES) and write it (saves): `public` (anyone), `apiUser` (an API user token),
     * `both` (an API user token and a person token), `none` (nobody, through the table API). Default `both`.
     */
    access: tableAccess,
    /**
     * Columns the table API never shows (GET answers, save answers, INSTANCES notifications) and never searches
     * (`find`). A token generator's passwordColumn is hidden whether listed or not. Default none.
     */
    hidden: z.array(z.string().min(1)).default([]),
  })
  .strict();

const instance = z
  .object({
    /** MongoDB connection string; absent means the in-memory data source. MONGODB_URL overrides it. */
    url: z.string().optional(),
    databases: z.record(name, z.object({ collections: z.record(name, collection) }).strict()),
  })
  .strict();

const tokenGenerator = z
  .object({
    instance: name,
    database: name,
    collection: name,
    usernameColumn: z.string().min(1),
    passwordColumn: z.string().min(1),
    /** Columns of the person's row that the person token carries. */
    select: z.array(z.string().min(1)).min(1),
  })
  .strict();

const canConnect = z
  .object({
    /** TypeScript or JavaScript declaring `async function main(g)`; types are stripped, not compiled. */
    code: z.string().min(1).optional(),
    /** A file holding it, relative to the config file. */
    file: z.string().min(1).optional(),
    /** `auto` (default): isolate-safe code runs in an isolate, the rest in the sandbox; or force either. */
    runner: z.enum(['auto', 'isolate', 'sandbox']).default('auto'),
  })
  .strict()
  .refine((c) => (c.code === undefined) !== (c.file === undefined), { message: 'set exactly one of code and file' });

const code = z
  .object({
    /** isolated-vm isolates per node, for isolate-safe code. Default 2. */
    isolates: z.number().int().min(1).default(2),
    /** Sandbox workers (processes, or containers with `docker`) per node. Default 2. */
    sandboxes: z.number().int().min(1).default(2),
    /** Time one call may take; past it the call is a refusal (timeout). Default 1000 ms. */
    timeoutMs: z.number().int().min(10).default(1000),
    /** Heap of each isolate or worker; a blow-up is a refusal (memory). Default 32 MB. */
    memoryMb: z.number().int().min(16).default(32),
    /** Calls waiting for a free isolate or worker; past it, a refusal (unavailable). Default 1024. */
    queue: z.number().int().min(0).default(1024),
    /** Run sandbox code in Docker containers through this endpoint instead of worker processes. */
    docker: z
      .object({
        socketPath: z.string().min(1).optional(),
        host: z.string().min(1).optional(),
        port: z.number().int().min(1).max(65535).optional(),
        /** The image the workers run in; it must already be on the engine. Default node:24-slim. */
        image: z.string().min(1).default('node:24-slim'),
      })
      .strict()
      .refine((d) => d.socketPath === undefined || d.host === undefined, { message: 'set socketPath or host, not both' })
      .optional(),
  })
  .strict();

/**
 * Keep each route's notifications of the event, so that a client that was away (a network blip, a restart, a node
 * that died) gets what it missed when it comes back with `since` (docs/protocol.md 4.1). Absent: no history, and
 * emits of the event cost what they did (no Redis command more).
 */
const history = z
  .object({
    /** Notifications kept per route (at least; Redis trims whole stream nodes, so up to ~100 more). Default 100. */
    size: z.number().int().min(1).max(100_000).default(100),
    /** A notification older than this is never replayed; a route with no emit for this long drops its entries. Default 600 s. */
    ttlSeconds: z.number().int().min(1).max(7 * 24 * 3600).default(600),
    /**
     * How long a route's position (its epoch and last offset) outlives its last emit or registration. Past it the
     * route starts a new epoch: its subscribers are told their history was lost, though nothing may have been.
     * At least ttlSeconds. Default 7 days (~100 bytes of Redis per route meanwhile).
     */
    positionTtlSeconds: z.number().int().min(1).max(365 * 24 * 3600).default(7 * 24 * 3600),
    /** The most one resume may replay; a client further behind is told `recovered: false`. Default: `size`. */
    maxReplay: z.number().int().min(1).max(100_000).optional(),
  })
  .strict()
  .refine((h) => h.positionTtlSeconds >= h.ttlSeconds, { message: 'positionTtlSeconds must be at least ttlSeconds', path: ['positionTtlSeconds'] })
  .transform((h) => ({ ...h, maxReplay: h.maxReplay ?? h.size }));

const event = z
  .object({
    /** Groups whose API users may REGISTER this event / emit it. */
    groups: z.object({ register: z.array(name), emit: z.array(name) }).strict(),
    /**
     * Criteria fields bound to the person: `{ recipientId: customer_id }` means a person may only register
     * criteria whose recipientId equals the customer_id in their token. Bound fields are required.
     */
    bind: z.record(z.string().regex(/^[^,|]+$/, 'a criteria field, without "," or "|"'), z.string().min(1)).default({}),
    /** Code that decides, per REGISTER, whether the client may subscribe. */
    canConnect: canConnect.optional(),
    history: history.optional(),
  })
  .strict();

/** redis.lostAfterMs when not set: a quarter of the lease, at least a second (a Redis starved that long is rare). */
export const defaultLostAfterMs = (leaseMs: number): number => Math.max(1000, Math.floor(leaseMs / 4));

const redis = z
  .object({
    /** One redis-server, e.g. redis://127.0.0.1:6379. REDIS_URL overrides it. */
    url: z.string().optional(),
    /** Redis Cluster masters as host:port. REDIS_CLUSTER_NODES (comma-separated) overrides it. */
    cluster: z.array(z.string().regex(/^[^:]+:\d+$/, 'host:port')).optional(),
    /** A node whose heartbeat is older than this is dead, and its routes are swept. Default 10 s. */
    leaseMs: z.number().int().min(1000).default(10_000),
    /**
     * A node whose lease lapsed but whose connection Redis still holds (CLIENT LIST) is stalled, not dead: it is
     * swept only once its heartbeat is older than this. At least leaseMs. Default: 60 s, or leaseMs if longer.
     */
    connectedLeaseMs: z.number().int().min(1000).optional(),
    /**
     * Redis is lost when a PING on the node's command connection has had no answer for this long (or a connection
     * attempt took this long), even if its TCP connection never broke: the node then drops its connections to
     * Redis (pending commands fail at once, and nothing the old ones held arrives late), reports not-ready and
     * answers emits 503 until Redis answers again. Default: a quarter of leaseMs, at least 1 s.
     */
    lostAfterMs: z.number().int().min(100).optional(),
    /**
     * How long after Redis was lost the node lets its clients go (closed with 4004, in paced, jittered batches),
     * so that they reconnect through the load balancer to nodes that can serve them. Default: leaseMs.
     */
    lostCloseMs: z.number().int().min(0).optional(),
    /** How often each node looks for dead nodes to sweep (one ZRANGEBYSCORE). Default 2 s. */
    sweepIntervalMs: z.number().int().min(100).default(2000),
    /**
     * Hashes the fleet's routes are spread over; the same on every node (recorded in Redis: a node with another
     * count refuses to start). Default 4096: an 18k-route node costs ~60 bytes of Redis per route, and up to
     * ~1.5M routes every hash stays within Redis's hash-max-listpack-entries (default 512), the compact
     * encoding. Past ~300 routes per hash, raise it (to routes / 250). See docs/configuration.md.
     */
    routeBuckets: z.number().int().min(1).max(1 << 20).default(4096),
  })
  .strict()
  .refine((r) => (r.connectedLeaseMs ?? r.leaseMs) >= r.leaseMs, { message: 'connectedLeaseMs must be at least leaseMs', path: ['connectedLeaseMs'] })
  .refine((r) => (r.url === undefined) !== (r.cluster === undefined), {
    message: 'set exactly one of url and cluster',
  })
  .transform((r) => ({
    ...r,
    connectedLeaseMs: r.connectedLeaseMs ?? Math.max(60_000, r.leaseMs),
    lostAfterMs: r.lostAfterMs ?? defaultLostAfterMs(r.leaseMs),
    lostCloseMs: r.lostCloseMs ?? r.leaseMs,
  }));

const canary = z
  .object({
    /** How often each node sends a canary through the broker to every live node's channel, its own included. Default 5 s. */
    intervalMs: z.number().int().min(100).max(3_600_000).default(5000),
    /**
     * A canary not back within this is missed; when none of this node's own has come back within it, the node turns
     * not-ready until one does. Default 15 s: three intervals.
     */
    timeoutMs: z.number().int().min(100).max(3_600_000).default(15_000),
  })
  .strict()
  .refine((c) => c.timeoutMs > c.intervalMs, { message: 'must be longer than intervalMs', path: ['timeoutMs'] });

const status = z
  .object({
    /** How often each node writes its status record (the back end's /status page reads them). Default 2 s. */
    intervalMs: z.number().int().min(100).max(60_000).default(2000),
  })
  .strict();

const drain = z
  .object({
    /** Sockets closed with 1001 per batch while draining. Default 256. */
    batchSize: z.number().int().min(1).default(256),
    /**
     * Pause between batches. Default 75 ms. The batches are what spreads the clients: the SDK reconnects within
     * 1 s of a 1001, so they arrive about as fast as they are closed, and the default's pace is what one successor
     * took without its admission queue overflowing (figures: docs/configuration.md).
     */
    batchIntervalMs: z.number().int().min(0).default(75),
    /** The drain gives up waiting and the process exits after this. Default 30 s. */
    deadlineMs: z.number().int().min(100).default(30_000),
  })
  .strict();

const admission = z
  .object({
    /** Clients in the handshake at once (from upgrade to their first REGISTER answered). Default 256. */
    maxHandshakes: z.number().int().min(1).default(256),
    /**
     * Clients waiting for a handshake slot; past it, HTTP 503 with Retry-After. Default 8192: room for a restart's
     * clients, which come back at the drain's pace faster than a fresh node takes them (docs/configuration.md).
     */
    maxQueue: z.number().int().min(0).default(8192),
    /** A connected client holds its slot until its first REGISTER is answered, or this long. Default 1 s. */
    holdMs: z.number().int().min(0).default(1000),
  })
  .strict();

const control = z
  .object({
    /**
     * Groups whose API users may call the control API (disconnect, revoke, presence). Default none: the control API
     * refuses every caller (403 FORBIDDEN) until a group is named here. Give it to the back end's API user only.
     */
    groups: z.array(name).default([]),
    /** How long a presence query waits for every live node's answer before it answers without the late ones. Default 200 ms. */
    presenceTimeoutMs: z.number().int().min(10).max(10_000).default(200),
  })
  .strict();

const webhooks = z
  .object({
    /** Where connect and disconnect events are POSTed, as a JSON array. */
    url: z.url({ protocol: /^https?$/ }),
    /** Key of the HMAC-SHA256 signature of each body (header x-herald-signature: sha256=<hex>). At least 16 characters. */
    secret: z.string().min(16),
    /** Events wait at most this long before they leave together. Default 1000 ms. */
    batchMs: z.number().int().min(0).default(1000),
    /** Events in one POST; a full batch leaves at once. Default 500. */
    maxBatch: z.number().int().min(1).default(500),
    /** Events waiting at most; past it new ones are dropped (herald_webhook_events_total{result="dropped"}). Default 10,000. */
    maxQueue: z.number().int().min(1).default(10_000),
    /** A POST not answered within this is a failure, tried again. Default 5000 ms. */
    timeoutMs: z.number().int().min(100).default(5000),
    /** Tries of one batch (no answer, a timeout, a 5xx or 429 are tried again, with backoff); then it is given up. Default 5. */
    maxAttempts: z.number().int().min(1).default(5),
  })
  .strict();

const tables = z
  .object({
    /** Rows a GET answers when it gives no `limit`. Default 100. */
    pageSize: z.number().int().min(1).default(100),
    /** The largest `limit` a GET may ask for; more is refused (400). Default 1000. */
    maxPageSize: z.number().int().min(1).default(1000),
    /**
     * Bytes of JSON a GET answers at most: the page ends before the row that would pass it (a first row always
     * goes). Bounds what one answer costs to build and holds in memory, whatever the rows. Default 1 MiB.
     */
    maxPageBytes: z.number().int().min(1024).default(1024 * 1024),
    /** Bytes of a saved row's JSON; a save with a larger row is refused (400) and stores nothing. Default 16 KiB. */
    maxRowBytes: z.number().int().min(64).default(16 * 1024),
    /** Bytes of a save's body; more is refused (413). Default 1 MiB (fastify's default body limit). */
    maxSaveBytes: z.number().int().min(1024).default(1024 * 1024),
  })
  .strict()
  .refine((t) => t.pageSize <= t.maxPageSize, { message: 'pageSize must not exceed maxPageSize', path: ['pageSize'] });

/** A token bucket: `burst` requests at once, then `perSecond` more each second. */
const bucket = (perSecond: number, burst: number) =>
  z
    .object({
      perSecond: z.number().positive().default(perSecond),
      burst: z.number().int().min(1).default(burst),
    })
    .strict()
    .prefault({});

const rateLimit = z
  .object({
    /** POST .../token (every form: AM, AM_DB, REFRESH), per client address. Default 5/s, 50 at once. */
    tokenRequests: bucket(5, 50),
    /** Table API calls without a valid API user token, per client address. Default 20/s, 40 at once. */
    tableCalls: bucket(20, 40),
    /** Table API calls with a valid API user token, per API user and client address. Default 200/s, 400 at once. */
    apiUserTableCalls: bucket(200, 400),
    /**
     * Callers each limit remembers, in two generations: past it the older half is forgotten (its callers start
     * again with a full bucket), so memory stays bounded whatever the number of addresses. Default 10,000.
     */
    maxCallers: z.number().int().min(2).default(10_000),
  })
  .strict();

/**
 * The emit stream (docs/protocol.md 5.3): a back end XADDs emits to a Redis stream of the fleet's Redis, and every node
 * reads it in one consumer group, publishes each entry and acknowledges it. Needs redis.
 */
const ingest = z
  .object({
    /** The stream's key. Default herald:emits. */
    stream: z.string().min(1).default('herald:emits'),
    /** The consumer group every node reads it in. Default herald. */
    group: z.string().min(1).default('herald'),
    /** The API user an entry is emitted as, unless it names another configured one (field apiUser). Required. */
    apiUser: name,
    /** Where an entry that cannot be published goes, with its reason. Default <stream>:dead. */
    deadLetterStream: z.string().min(1).optional(),
    /** About how many entries the dead-letter stream keeps (MAXLEN ~). Default 10,000. */
    deadLetterMaxLen: z.number().int().min(1).default(10_000),
    /** Entries read at a time by a node. Default 100. */
    batch: z.number().int().min(1).max(10_000).default(100),
    /** How long a node's read waits for an entry before it reads again. Default 1 s. */
    blockMs: z.number().int().min(10).max(60_000).default(1000),
    /**
     * The reader's lease: one node reads the stream at a time, renewing this every third of it; when it dies, another
     * node takes the lease over once it runs out, and claims every entry it left pending before reading on. Default 10 s.
     */
    claimIdleMs: z.number().int().min(100).default(10_000),
  })
  .strict()
  .transform((i) => ({ ...i, deadLetterStream: i.deadLetterStream ?? `${i.stream}:dead` }));

/**
 * A node's id in the fleet: HERALD_NODE_ID, or generated (node.ts). Not a field of the file, but checked like
 * one: the Redis broker joins the ids of a route's nodes with NODE_ID_SEPARATOR, so no id may contain it.
 */
export const nodeIdSchema = z
  .string()
  .min(1)
  .refine((id) => !id.includes(NODE_ID_SEPARATOR), `must not contain "${NODE_ID_SEPARATOR}" (Redis joins node ids with it)`);

export const configSchema = z
  .object({
    /** The path segment of the system API (`/api/system-api/<userPath>/...`). */
    userPath: name,
    server: server.prefault({}),
    websocket: websocket.prefault({}),
    emit: emit.prefault({}),
    /** Absent: the in-process broker (a fleet of one). */
    redis: redis.optional(),
    canary: canary.prefault({}),
    status: status.prefault({}),
    drain: drain.prefault({}),
    admission: admission.prefault({}),
    tables: tables.prefault({}),
    rateLimit: rateLimit.prefault({}),
    auth,
    apiUsers: z.record(name, apiUser),
    instances: z.record(name, instance).default({}),
    tokenGenerators: z.record(name, tokenGenerator).default({}),
    events: z.record(name, event),
    code: code.prefault({}),
    control: control.prefault({}),
    /** Connect and disconnect webhooks to the back end; absent: none. */
    webhooks: webhooks.optional(),
    /** The emit stream; absent: none. */
    ingest: ingest.optional(),
  })
  .strict()
  .refine((c) => c.ingest === undefined || c.redis !== undefined, { message: 'the emit stream is a Redis stream: set redis too', path: ['ingest'] })
  .refine((c) => c.emit.maxLagMs < c.websocket.maxLagMs, {
    message: 'must be below websocket.maxLagMs: one slow reader is closed, not let hold back the emits',
    path: ['emit', 'maxLagMs'],
  })
  .refine((c) => c.emit.maxBacklogBytes >= 2 * c.websocket.maxBufferedBytes, {
    message: 'must be at least twice websocket.maxBufferedBytes (one slow client alone must not hold every emit back)',
    path: ['emit', 'maxBacklogBytes'],
  });

export type Config = z.infer<typeof configSchema>;
export type EventConfig = Config['events'][string];
export type EmitConfig = Config['emit'];
export type IngestConfig = NonNullable<Config['ingest']>;
export type HistoryConfig = NonNullable<EventConfig['history']>;
export type TokenGeneratorConfig = Config['tokenGenerators'][string];
export type InstanceConfig = Config['instances'][string];
export type CollectionConfig = InstanceConfig['databases'][string]['collections'][string];
export type TableAccess = CollectionConfig['access'];
export type AccessLevel = TableAccess['read'];
export type RateLimitConfig = Config['rateLimit']['tokenRequests'];
