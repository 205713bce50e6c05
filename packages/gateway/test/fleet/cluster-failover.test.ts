/**
 * A Redis Cluster failing under load, on three node processes behind HAProxy sharing a cluster of 3 masters + 3
 * replicas (cluster-node-timeout 3 s, cluster-require-full-coverage no: the healthy shards keep serving while one is
 * down, as docs/operations.md recommends). Thirty SDK clients (order-updates: history; announcements: none) while a
 * back end emits ~100 a second through HAProxy, every answer kept:
 *
 * 1. the master holding every node's heartbeat (gw:{nodes}) is killed -9 and its replica promoted;
 * 2. a shard holding people's routes and histories is lost (replica, then master) and its master restarted empty.
 *
 * Only a node whose own channel is on the failed shard may turn not-ready, and only while that shard is down; HAProxy
 * always has a node to route to; an emit refused (503 UNAVAILABLE) reaches nobody; one answered 200 or 202 reaches
 * each of its person's clients once and in order, or they are told of the gap; an announcement answered 200 reaches
 * every client once. The figures docs quote are printed (# failover:, # emptied:).
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { bucketOf } from '../../src/broker/redis/keys.ts';
import { routeOf } from '../../src/events/routing.ts';
import { apiToken } from '../support/gateway.ts';
import { nodeMetric, PEOPLE, startFleet, type Fleet } from '../support/fleet.ts';
import { connectListeners, type Listener } from '../support/owed.ts';
import { startRedisCluster, type RedisCluster, type RedisServer } from '../support/redis.ts';

const CLIENTS = 30;
/** Each person's emits a second (nine people), and announcements a second: ~100 in all. */
const PER_PERSON_PER_S = 10;
const ANNOUNCEMENTS_PER_S = 10;
/** After a shard is healthy again, how long a node exposed to it may still be not-ready. */
const READY_MARGIN_MS = 2000;
const ROUTE_BUCKETS = 4096;

let cluster: RedisCluster;
let fleet: Fleet;
let api: string;
let listeners: Listener[] = [];
/** Servers killed and not yet restarted: the next test starts them again. */
const killed: RedisServer[] = [];
/** Per listener, the gaps it was told of: [from, to) indices into its `got` (see toldOf). */
const told = new Map<Listener, Array<[number, number]>>();

before(async () => {
  cluster = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 3000, requireFullCoverage: false });
  // '' as the Redis URL: none in the environment, the config's cluster is used.
  fleet = await startFleet(3, '', (raw) => {
    delete raw.redis.url;
    Object.assign(raw.redis, { cluster: cluster.nodes, leaseMs: 10_000, lostCloseMs: 20_000 });
    raw.events['order-updates'].history = { size: 20_000, ttlSeconds: 600, maxReplay: 20_000 };
  });
  api = await apiToken(fleet);
  listeners = await connectListeners(fleet, api, CLIENTS, { broadcasts: 'announcements' });
  listeners.forEach(recordTold);
  const held = await Promise.all(fleet.nodes.map((node) => nodeMetric(node, 'herald_connections')));
  console.log(`# clients per node: ${held.join(', ')}`);
});
after(async () => {
  await Promise.all(listeners.map((listener) => listener.client?.close()));
  await fleet?.stop();
  await cluster?.stop();
});

/**
 * A told gap, as a range of `got` indices: historyLost comes right before the notification after the gap; a resume
 * with recovered: false, anywhere between the last one before the close and the first one after the resume.
 */
function recordTold(listener: Listener): void {
  const gaps: Array<[number, number]> = [];
  told.set(listener, gaps);
  let closedAt = 0;
  listener.client.on('historyLost', () => void gaps.push([listener.got.length, listener.got.length]));
  listener.client.on('disconnected', () => void (closedAt = listener.got.length));
  listener.client.on('reconnected', ({ recovered }) => {
    if (Object.values(recovered).includes(false)) gaps.push([closedAt, listener.got.length]);
  });
}

type Kind = 'ok' | 'pending' | 'refused' | 'haproxy' | 'unknown';

interface Answer {
  seq: number;
  event: 'order-updates' | 'announcements';
  /** The person, for order-updates. */
  to?: string;
  sentAt: number;
  status: number;
  body: string;
  kind: Kind;
}

/** 200; 202 (taken part of the way); 503 by a node (UNAVAILABLE) or by HAProxy (no server); else not known. */
function kindOf(status: number, body: string): Kind {
  if (status === 200) return 'ok';
  if (status === 202) return 'pending';
  if (status !== 503) return 'unknown';
  if (!body.trimStart().startsWith('{')) return body.includes('No server is available') ? 'haproxy' : 'unknown';
  const code = (JSON.parse(body) as { errors?: Array<{ code: string }> }).errors?.[0]?.code;
  return code === 'UNAVAILABLE' ? 'refused' : 'unknown';
}

interface Sample {
  at: number;
  node: string;
  status: number;
}

/** Emits through HAProxy (one at a time per person, so each person's are appended in seq order) and /readyz samples. */
class Load {
  readonly tag: string;
  readonly answers: Answer[] = [];
  readonly samples: Sample[] = [];
  readonly #t0 = performance.now();
  #seq = 0;
  #stopped = false;
  #sampling = true;
  /** Aborts the emits in flight once the test is over (a failed one must not wait out answers up to 10 s). */
  readonly #abort = new AbortController();
  readonly #loops: Promise<void>[];
  readonly #sampler: Promise<void>;

  constructor(tag: string) {
    this.tag = tag;
    const persons = PEOPLE.map((_, i) => String(i + 1));
    const everyMs = 1000 / PER_PERSON_PER_S;
    this.#loops = persons.map((to, i) => this.#every(everyMs, (i * everyMs) / persons.length, () => this.emit('order-updates', to)));
    this.#loops.push(this.#every(1000 / ANNOUNCEMENTS_PER_S, 0, () => this.emit('announcements')));
    this.#sampler = Promise.all(fleet.nodes.map((node) => this.#sample(node.id, node.http))).then(() => {});
  }

  now(): number {
    return Math.round(performance.now() - this.#t0);
  }

  async #every(everyMs: number, offsetMs: number, send: () => Promise<Answer>): Promise<void> {
    for (let k = 0; !this.#stopped; k++) {
      const wait = offsetMs + k * everyMs - this.now();
      if (wait > 0) await sleep(wait);
      await send();
    }
  }

  /** One emit, its answer kept; no answer within 10 s is kept as status 0 (not known whether it was taken). */
  async emit(event: Answer['event'], to?: string): Promise<Answer> {
    const seq = ++this.#seq;
    const eventData = event === 'order-updates' ? { recipientId: to, tag: this.tag, seq } : { tag: this.tag, seq };
    const sentAt = this.now();
    let status = 0;
    let body = '';
    try {
      const response = await fetch(`${fleet.http}/api/system-api/bench/emit-event-ws`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-am-authorization': api },
        body: JSON.stringify({ name: event, eventData }),
        signal: AbortSignal.any([this.#abort.signal, AbortSignal.timeout(10_000)]),
      });
      status = response.status;
      body = await response.text();
    } catch (error) {
      body = String(error);
    }
    const answer: Answer = { seq, event, ...(to === undefined ? {} : { to }), sentAt, status, body: body.slice(0, 300), kind: kindOf(status, body) };
    this.answers.push(answer);
    return answer;
  }

  async #sample(node: string, http: string): Promise<void> {
    for (let k = 0; this.#sampling; k++) {
      const wait = k * 100 - this.now();
      if (wait > 0) await sleep(wait);
      const at = this.now();
      const status = await fetch(`${http}/readyz`, { signal: AbortSignal.timeout(1000) }).then(async (response) => (await response.arrayBuffer(), response.status), () => 0);
      this.samples.push({ at, node, status });
    }
  }

  /** Stop the steady emits (also when a test fails half-way: none may outlive its test); the samples go on. */
  async stopEmits(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
  }

  async halt(): Promise<void> {
    this.#sampling = false;
    this.#abort.abort();
    await Promise.all([this.stopEmits(), this.#sampler]);
  }
}

/** The fleet nodes whose own channel (gw:node:{<id>}) the shard of `master` serves. */
async function channelsOn(master: RedisServer): Promise<Set<string>> {
  const on = await Promise.all(fleet.nodes.map(async (node) => (await cluster.masterOf(`gw:node:{${node.id}}`)) === master));
  return new Set(fleet.nodes.filter((_, i) => on[i]).map((node) => node.id));
}

/** Start again whatever a test left killed, and wait for the cluster to be whole. */
async function restore(): Promise<void> {
  for (const server of killed.splice(0)) await cluster.restart(server);
  await cluster.untilHealthy(30_000);
}

/** One last emit per person (any gap still open is filled by it), and until each client has its person's. */
async function flush(load: Load): Promise<Answer[]> {
  const last = await Promise.all(PEOPLE.map((_, i) => load.emit('order-updates', String(i + 1))));
  const deadline = Date.now() + 20_000;
  const arrived = () => listeners.every((listener) => listener.seqs(load.tag).includes(last[Number(listener.recipientId) - 1]!.seq));
  while (!arrived() && Date.now() < deadline) await sleep(100);
  // Announcements are live only: whatever is coming has come by now.
  await sleep(500);
  return last;
}

interface Window {
  /** The failure, and when the failed shard was healthy again, in ms of the load's clock. */
  killAt: number;
  healthyAt: number;
  /** Nodes that may be not-ready meanwhile. */
  exposed: Set<string>;
}

/** Per node, its runs of /readyz not answering 200, as "from..to" (ms after the kill) with the status. */
function notReadyRuns(load: Load, killAt: number): Record<string, string[]> {
  const runs: Record<string, string[]> = {};
  for (const node of fleet.nodes.map((n) => n.id)) {
    const mine = load.samples.filter((sample) => sample.node === node).sort((a, b) => a.at - b.at);
    runs[node] = [];
    let start: Sample | undefined;
    for (const sample of [...mine, { at: Infinity, node, status: 200 }]) {
      if (sample.status !== 200 && start === undefined) start = sample;
      if (sample.status === 200 && start !== undefined) {
        const end = sample.at === Infinity ? 'end' : String(sample.at - killAt);
        runs[node]!.push(`${start.at - killAt}..${end} (${start.status})`);
        start = undefined;
      }
    }
  }
  return runs;
}

/** Only an exposed node, only while its shard was down (plus the margin), was not ready; HAProxy always routed. */
function readinessProblems(load: Load, { killAt, healthyAt, exposed }: Window): string[] {
  const wrong = load.samples.filter((sample) => sample.status !== 200 && !(exposed.has(sample.node) && sample.at >= killAt && sample.at <= healthyAt + READY_MARGIN_MS));
  const problems: string[] = [];
  if (wrong.length > 0) {
    const runs = notReadyRuns(load, killAt);
    problems.push(`not ready outside what is allowed (exposed: ${[...exposed].join(',') || 'none'}, allowed until ${healthyAt - killAt + READY_MARGIN_MS} ms after the kill): ${wrong.length} samples; runs ${JSON.stringify(runs)}`);
  }
  const haproxy = load.answers.filter((answer) => answer.kind === 'haproxy');
  if (haproxy.length > 0) problems.push(`HAProxy had no server for ${haproxy.length} emits, sent ${haproxy[0]!.sentAt - killAt}..${haproxy.at(-1)!.sentAt - killAt} ms after the kill`);
  return problems;
}

/** Whether the gap where owed `seq` belongs in `got` (this tag's order-updates) was told. */
function toldOf(listener: Listener, tag: string, seq: number): boolean {
  const mine = listener.got.map((received, index) => ({ ...received, index })).filter((received) => received.tag === tag && received.event === 'order-updates');
  return (told.get(listener) ?? []).some(([from, to]) => {
    const before = mine.filter((received) => received.index < from).at(-1)?.seq ?? -Infinity;
    const after = mine.find((received) => received.index >= to)?.seq ?? Infinity;
    return before < seq && seq < after;
  });
}

/** order-updates: once, in order, only what was taken; every 200/202 one delivered or its gap told. */
function historyProblems(load: Load): { problems: string[]; toldGaps: number } {
  const problems: string[] = [];
  let toldGaps = 0;
  const refused = new Map(load.answers.filter((answer) => answer.kind === 'refused' || answer.kind === 'haproxy').map((answer) => [answer.seq, answer]));
  for (const listener of listeners) {
    const got = listener.seqs(load.tag);
    const owed = load.answers.filter((answer) => answer.event === 'order-updates' && answer.to === listener.recipientId && (answer.kind === 'ok' || answer.kind === 'pending'));
    const delivered = new Set(got);
    const missing = owed.filter((answer) => !delivered.has(answer.seq));
    const silent = missing.filter((answer) => !toldOf(listener, load.tag, answer.seq));
    toldGaps += missing.length - silent.length;
    const who = `person ${listener.recipientId} (${listener.client.state})`;
    if (delivered.size !== got.length) problems.push(`${who}: ${got.length - delivered.size} order-updates twice`);
    if (got.some((seq, i) => i > 0 && seq < got[i - 1]!)) problems.push(`${who}: order-updates out of order`);
    const wrong = got.filter((seq) => refused.has(seq)).map((seq) => refused.get(seq)!);
    if (wrong.length > 0) problems.push(`${who}: got ${wrong.length} order-updates answered 503 (${wrong.slice(0, 3).map(describe).join('; ')})`);
    if (silent.length > 0) {
      const kinds = Object.entries(Object.groupBy(silent, (answer) => answer.kind)).map(([kind, list]) => `${list!.length} ${kind}`);
      problems.push(`${who}: ${silent.length} of ${owed.length} taken order-updates missing, no gap told (${kinds.join(', ')}; sent ${silent[0]!.sentAt}..${silent.at(-1)!.sentAt} ms)`);
    }
  }
  // A person's clients fail alike: each failure once.
  return { problems: [...new Set(problems)], toldGaps };
}

const describe = (answer: Answer): string => `seq ${answer.seq} sent at ${answer.sentAt} ms: ${answer.body.slice(0, 120)}`;

/** Over all clients: the gaps they were told of (historyLost, or resumed with recovered: false), and their closes. */
interface Tally {
  told: number;
  closes: number;
}
const tally = (): Tally => ({
  told: [...told.values()].reduce((n, gaps) => n + gaps.length, 0),
  closes: listeners.reduce((n, listener) => n + listener.closes.length, 0),
});

/** The 503s' reasons, with their counts (slot numbers and ports left out). */
function refusedWhy(load: Load): Record<string, number> {
  const why: Record<string, number> = {};
  for (const answer of load.answers.filter((a) => a.kind === 'refused')) {
    const message = /"message":"([^"]*)/.exec(answer.body)?.[1] ?? answer.body;
    const reason = message.replace(/\d+/g, '#');
    why[reason] = (why[reason] ?? 0) + 1;
  }
  return why;
}

/** announcements: once each, none refused delivered, every one answered 200 delivered (202 ones may miss some). */
function announcementProblems(load: Load): string[] {
  const problems: string[] = [];
  const ok = load.answers.filter((answer) => answer.event === 'announcements' && answer.kind === 'ok');
  const refused = new Set(load.answers.filter((answer) => answer.event === 'announcements' && (answer.kind === 'refused' || answer.kind === 'haproxy')).map((answer) => answer.seq));
  const missed = listeners.map((listener) => {
    const got = listener.seqs(load.tag, 'announcements');
    const delivered = new Set(got);
    if (delivered.size !== got.length) problems.push(`person ${listener.recipientId}: ${got.length - delivered.size} announcements twice`);
    const wrong = got.filter((seq) => refused.has(seq));
    if (wrong.length > 0) problems.push(`person ${listener.recipientId}: got ${wrong.length} announcements answered 503`);
    return ok.filter((answer) => !delivered.has(answer.seq));
  });
  if (missed.some((list) => list.length > 0)) {
    const seqs = [...new Set(missed.flat())].map((answer) => `${answer.seq}@${answer.sentAt}`);
    problems.push(`announcements answered 200 (${ok.length}) missed, per client: ${missed.map((list) => list.length).join(',')} (seq@sent ms: ${seqs.slice(0, 10).join(' ')})`);
  }
  return problems;
}

/** Print the figures, then assert everything at once (every failed promise named, with its numbers). */
function judge(name: string, load: Load, window: Window, extra: Record<string, unknown>, flushed: Answer[], since: Tally): void {
  const count = (kind: Kind) => load.answers.filter((answer) => answer.kind === kind).length;
  const { problems, toldGaps } = historyProblems(load);
  const unknown = load.answers.filter((answer) => answer.kind === 'unknown').map((answer) => `${answer.status} ${answer.body.slice(0, 80)}`);
  const figures = {
    ...extra,
    killAt: window.killAt,
    exposed: [...window.exposed],
    notReady: notReadyRuns(load, window.killAt),
    emits: load.answers.length,
    refused503: count('refused'),
    pending202: count('pending'),
    haproxy503: count('haproxy'),
    unknown: unknown.length,
    gapsTold: tally().told - since.told,
    missingButTold: toldGaps,
    refusedWhy: refusedWhy(load),
    closes: tally().closes - since.closes,
  };
  console.log(`# ${name}: ${JSON.stringify(figures)}${unknown.length > 0 ? ` unknown answers: ${JSON.stringify([...new Set(unknown)])}` : ''}`);
  const bad = flushed.filter((answer) => answer.kind !== 'ok');
  if (bad.length > 0) problems.push(`flush emits not answered 200: ${bad.map((answer) => `${answer.status} ${answer.body.slice(0, 100)}`).join('; ')}`);
  problems.push(...readinessProblems(load, window), ...announcementProblems(load));
  assert.deepEqual(problems, [], `${name}: ${problems.length} broken promises`);
}

test('master failover: the replica of the master holding every heartbeat is promoted under load; no node but those on it turns not-ready, nothing taken is lost silently', async () => {
  await restore();
  const master = await cluster.masterOf('gw:{nodes}');
  const exposed = await channelsOn(master);
  const since = tally();
  const load = new Load('failover');
  let window: Window;
  let flushed: Answer[];
  let promotedMs: number;
  try {
    await sleep(2000);
    const killAt = load.now();
    killed.push(master);
    await cluster.kill(master);
    promotedMs = await cluster.untilHealthy(30_000);
    window = { killAt, healthyAt: killAt + promotedMs, exposed };
    await sleep(3000);
    await load.stopEmits();
    flushed = await flush(load);
  } finally {
    await load.halt();
  }
  judge('failover', load, window, { killToPromotedMs: promotedMs }, flushed, since);
});

/** The master whose shard holds most of the people's route buckets and histories. */
async function busiestShard(): Promise<{ master: RedisServer; keys: string[] }> {
  const keys = PEOPLE.flatMap((_, i) => {
    const route = routeOf('order-updates', { recipientId: String(i + 1) }).key;
    return [`gw:routes:{${bucketOf(route, ROUTE_BUCKETS)}}`, `gw:hist:{${route}}`];
  });
  const byMaster = new Map<RedisServer, string[]>();
  for (const key of keys) {
    const master = await cluster.masterOf(key);
    byMaster.set(master, [...(byMaster.get(master) ?? []), key]);
  }
  const [master, mine] = [...byMaster].sort((a, b) => b[1].length - a[1].length)[0]!;
  return { master, keys: mine };
}

test('a shard lost (replica, then master) and its master restarted empty under load: the other shards serve meanwhile, nothing taken is lost silently', async () => {
  await restore();
  const { master, keys } = await busiestShard();
  const exposed = await channelsOn(master);
  const since = tally();
  const load = new Load('emptied');
  let window: Window;
  let flushed: Answer[];
  let figures: Record<string, unknown>;
  try {
    await sleep(2000);
    const killAt = load.now();
    killed.push(...(await cluster.killShard(master)));
    await sleep(3000);
    killed.splice(killed.indexOf(master), 1);
    await cluster.restart(master);
    const restartedAt = load.now();
    const dbsizeAtRestart = Number(await master.cli('dbsize'));
    const healMs = await cluster.untilHealthy(30_000);
    window = { killAt, healthyAt: restartedAt + healMs, exposed };
    figures = { shardKeys: keys.length, killToRestartMs: restartedAt - killAt, restartToHealthyMs: healMs, dbsizeAtRestart, dbsizeHealthy: Number(await master.cli('dbsize')) };
    await sleep(3000);
    await load.stopEmits();
    flushed = await flush(load);
  } finally {
    await load.halt();
  }
  judge('emptied', load, window, figures, flushed, since);
});
