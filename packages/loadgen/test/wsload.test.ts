/**
 * wsload against a real node in this process: each command, briefly, and the figures it hands a bench suite.
 * fill and notify --await-return run as the real command line (a child process, spread over worker processes
 * and source addresses); the others are called as functions.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { dirname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { DEFAULT_CONFIG_FILE, Gateway, parseConfig, type ConfigOverrides } from '@herald/gateway';
import { runCommand } from '../src/cli.ts';
import { registerFrame } from '../src/frames.ts';
import { parseCommand, type HoldOptions } from '../src/options.ts';
import { prepareRoster } from '../src/prepare.ts';
import { completeReport, type RunReport } from '../src/report.ts';
import { WorkerPools } from '../src/worker-pools.ts';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;
let gateway: Gateway;
let ws: string;
let http: string;
let dir: string;

/** The default config, but for its limit on token requests: every wsload run of this file asks its node for tokens. */
function testConfig(overrides: ConfigOverrides) {
  const raw = parseYaml(readFileSync(DEFAULT_CONFIG_FILE, 'utf8')) as Record<string, unknown>;
  raw.rateLimit = { tokenRequests: { perSecond: 1000, burst: 1000 } };
  return parseConfig(raw, dirname(DEFAULT_CONFIG_FILE), overrides);
}

before(async () => {
  gateway = await Gateway.create(testConfig({ port: 0, host: '127.0.0.1' }));
  const port = await gateway.listen();
  ws = `ws://127.0.0.1:${port}`;
  http = `http://127.0.0.1:${port}`;
  dir = mkdtempSync(join(tmpdir(), 'wsload-'));
});

after(async () => {
  await gateway.close();
  rmSync(dir, { recursive: true, force: true });
});

async function run(argv: string[]): Promise<RunReport> {
  const { body } = await runCommand(parseCommand([...argv, '--quiet']));
  return completeReport(body, argv, new Date());
}

function assertSane(report: RunReport, command: string): void {
  assert.equal(report.tool, 'wsload');
  assert.equal(report.command, command);
  assert.match(report.commandLine, new RegExp(`^wsload ${command} `));
  assert.ok(report.machine.cores > 0 && report.machine.memoryBytes > 0 && report.machine.node.startsWith('v'));
  assert.ok(report.durationS > 0);
  for (const summary of Object.values(report.latency)) {
    assert.ok(summary.p50 <= summary.p90 && summary.p90 <= summary.p95 && summary.p95 <= summary.p99 && summary.p99 <= summary.p99_9 && summary.p99_9 <= summary.max, JSON.stringify(summary));
  }
}

test('fill: 50 clients with both tokens and order-updates, over 3 worker processes and 3 source addresses, as the command line', async () => {
  const file = join(dir, 'fill.json');
  const argv = [CLI, 'fill', ws, '--clients', '50', '--rate', '500', '--register', 'order-updates', '--hold', '0', '--per-worker', '20', '--per-address', '20', '--json', file, '-q'];
  const { stdout } = await promisify(execFile)(process.execPath, argv, { timeout: 30_000 });
  assert.match(stdout, /50 of 50 clients ready \(50 connected, 50 registered, 0 failed\)/);
  assert.match(stdout, /command: wsload fill /);
  assert.match(stdout, /machine: \d+ cores, /);
  const report = JSON.parse(readFileSync(file, 'utf8')) as RunReport;
  assertSane(report, 'fill');
  assert.deepEqual(report.counts, { clients: 50, started: 50, connected: 50, registered: 50, ready: 50, failed: 0, dropped: 0 });
  assert.equal(report.latency.total?.count, 50);
  assert.equal(report.latency.register?.count, 50);
  assert.ok(report.rates.clientsPerSecond! > 0);
});

for (const client of ['raw', 'ws']) {
  test(`churn --client ${client}: 10 at a time for 1 s, with both tokens and a REGISTER`, async () => {
    const report = await run(['churn', ws, '-c', '10', '-d', '1', '--register', 'order-updates', '--client', client]);
    assertSane(report, 'churn');
    const cycles = report.counts.cycles!;
    assert.ok(cycles >= 10, `only ${cycles} cycles`);
    assert.equal(report.counts.failed, 0, JSON.stringify(report.failures));
    for (const phase of ['tcp', 'connected', 'register', 'left', 'cycle']) assert.equal(report.latency[phase]?.count, cycles, phase);
    assert.ok(report.rates.clientsPerSecond! > 0);
  });

  test(`notify --client ${client}: one listener each, 5 connections for 1 s, 20 listeners: everything sent arrives`, async () => {
    const report = await run(['notify', http, '--clients', '20', '-c', '5', '-d', '1', '--client', client]);
    assertSane(report, 'notify');
    const { counts } = report;
    assert.equal(counts.listenersReady, 20);
    assert.ok(counts.emitsOk! > 0);
    assert.equal(counts.emitsOk, counts.emitsSent);
    assert.equal(counts.expected, counts.emitsOk);
    assert.equal(counts.received, counts.expected);
    assert.equal(counts.missing, 0);
    assert.equal(report.latency.delivery?.count, counts.received);
    assert.ok(report.latency.delivery!.p50 > 0 && report.rates.notificationsPerSecond! > 0);
    // On time: within a second of its emit (an idle node on loopback), so counted in the on-time rate too.
    assert.equal(counts.onTime, counts.received);
    assert.equal(report.rates.notificationsOnTimePerSecond, report.rates.notificationsPerSecond);
  });

  test(`notify --broadcast --client ${client} to 20 listeners: each emit reaches all 20`, async () => {
    const report = await run(['notify', http, '--clients', '20', '-c', '5', '-d', '1', '--broadcast', '--client', client]);
    assertSane(report, 'notify');
    const { counts } = report;
    assert.ok(counts.emitsOk! > 0);
    assert.equal(counts.expected, counts.emitsOk! * 20);
    assert.equal(counts.received, counts.expected);
    assert.equal(counts.missing, 0);
  });
}

test('notify --broadcast --keep-within: the emitter holds its calls to what the listeners read in time; everything sent arrives', async () => {
  const report = await run(['notify', http, '--clients', '20', '-c', '5', '-d', '1', '--broadcast', '--keep-within', '200']);
  assertSane(report, 'notify');
  const { counts } = report;
  assert.ok(counts.emitsOk! > 0);
  assert.equal(counts.received, counts.expected);
  assert.equal(counts.missing, 0);
  assert.equal(report.options.keepWithinMs, 200);
});

test('notify --broadcast paced: each broadcast reported with the listeners it told and its last one told', async () => {
  const report = await run(['notify', http, '--clients', '20', '-c', '1', '-R', '4', '-d', '1', '--broadcast']);
  assertSane(report, 'notify');
  const perEmit = report.perEmit!;
  assert.ok(perEmit.emits > 0);
  assert.equal(perEmit.emits, report.counts.emitsOk);
  assert.deepEqual(perEmit.each.map(({ told }) => told), perEmit.each.map(() => 20));
  const lasts = perEmit.each.map(({ lastMs }) => lastMs);
  assert.equal(Math.max(...lasts), report.latency.delivery!.max, 'the slowest broadcast holds the slowest delivery');
  assert.equal(perEmit.lastTold.count, perEmit.emits);
});

async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 20));
}

async function post(path: string, body: object, token?: string): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers['x-am-authorization'] = token;
  return fetch(`${http}/api/system-api/bench/${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
}

const subscriptions = async () => (await gateway.metrics.subscriptions.get()).values[0]?.value ?? 0;

test('listen: held listeners count what an application emits', async () => {
  // Clients of the tests before may still be leaving: count only this test's.
  await until(async () => (await subscriptions()) === 0);
  const listening = run(['listen', ws, '--clients', '5', '--register', 'announcements', '--hold', '1.5']);
  await until(async () => (await subscriptions()) === 5);
  const { data } = (await (await post('token', { authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } })).json()) as { data: { token: string } };
  for (let i = 0; i < 3; i++) {
    const eventData = { title: `hello ${i}`, sentAt: performance.timeOrigin + performance.now() };
    assert.equal((await post('emit-event-ws', { name: 'announcements', eventData }, data.token)).status, 200);
  }
  const report = await listening;
  assertSane(report, 'listen');
  assert.equal(report.counts.ready, 5);
  assert.equal(report.counts.received, 15);
  assert.equal(report.counts.timed, 15);
  assert.equal(report.latency.delivery?.count, 15);
});

test('fill --reconnect: first connects a busy node refused (HTTP 503) are made again until a node takes them', async () => {
  const clients = 4;
  let refused = 0;
  let allRefused!: () => void;
  const refusedAll = new Promise<void>((resolve) => (allRefused = resolve));
  // What admission answers under a storm, to every upgrade.
  const busy = createServer((socket) => {
    socket.on('error', () => {}); // the refused client resets the connection
    socket.once('data', () => {
      socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      if (++refused === clients) allRefused();
    });
  });
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const { port } = busy.address() as AddressInfo;
  const file = join(dir, 'first-connect.json');
  const argv = [CLI, 'fill', `ws://127.0.0.1:${port}`, '--http', http, '--clients', String(clients), '--rate', '1000', '--hold', '0',
    '--reconnect', '--reconnect-min', '0.1', '--reconnect-max', '0.3', '--json', file, '-q'];
  const running = promisify(execFile)(process.execPath, argv, { timeout: 30_000 });
  await refusedAll;
  await new Promise((resolve) => busy.close(resolve));
  const taker = await Gateway.create(testConfig({ port, host: '127.0.0.1' }));
  try {
    await taker.listen();
    await running;
  } finally {
    await taker.close();
  }
  const report = JSON.parse(readFileSync(file, 'utf8')) as RunReport;
  assert.equal(report.counts.ready, clients, JSON.stringify(report.failures));
  assert.equal(report.counts.failed, 0);
  assert.ok(report.failures['reconnect HTTP 503']! >= clients, JSON.stringify(report.failures));
});

test('worker pools as a bench drives them: grown level by level over two nodes, then every client joins a broadcast audience', async () => {
  await until(async () => (await subscriptions()) === 0);
  const second = await Gateway.create(testConfig({ port: 0, host: '127.0.0.1' }));
  const secondWs = `ws://127.0.0.1:${await second.listen()}`;
  const secondSubscriptions = async () => (await second.metrics.subscriptions.get()).values[0]?.value ?? 0;
  const options = parseCommand(['fill', `${ws},${secondWs}`, '--clients', '7', '--register', 'announcements', '--per-client', '--per-address', '2']) as HoldOptions;
  const roster = await prepareRoster(options, options.wsUrl);
  const pools = new WorkerPools({ roster, first: 0, count: 7, rate: 1000, perAddress: 2, timeoutMs: 10_000, reconnect: undefined, tallyEmits: false }, 3);
  try {
    await pools.growTo(2, 1000);
    assert.equal(pools.pids().length, 1);
    assert.equal((await pools.snapshot()).ready, 2);
    // The first worker's room (one more), then a full worker and one more.
    await pools.growTo(7, 1000);
    assert.equal(pools.pids().length, 3);
    const held = await pools.snapshot();
    assert.deepEqual([held.ready, held.failed], [7, 0], JSON.stringify(held.failures));
    // Client i on node i mod 2.
    assert.deepEqual([await subscriptions(), await secondSubscriptions()], [4, 3]);
    assert.equal(await pools.subscribe(registerFrame('announcements', undefined), 1000), 7);
    await until(async () => (await pools.snapshot()).subscribed === 7);
    assert.deepEqual([await subscriptions(), await secondSubscriptions()], [8, 6]);
    assert.equal((await pools.snapshot()).subscribeRefused, 0);
  } finally {
    await pools.close();
    await second.close();
  }
});

/** What a restart does: drain the node (1001 to every client), then a new one on the same port. */
async function restartGateway(): Promise<void> {
  await gateway.close();
  gateway = await Gateway.create(testConfig({ port: Number(new URL(http).port), host: '127.0.0.1' }));
  await gateway.listen();
}

test('notify --await-return (6 listeners, --per-worker 3): dropped by a restart, they come back registered and miss nothing', async () => {
  await until(async () => (await subscriptions()) === 0);
  const file = join(dir, 'restart.json');
  const argv = [CLI, 'notify', http, '--clients', '6', '--per-worker', '3', '--reconnect-min', '0.05', '--reconnect-max', '0.3',
    '--await-return', '20', '-c', '2', '-R', '100', '-d', '0.5', '--json', file, '-q'];
  const running = promisify(execFile)(process.execPath, argv, { timeout: 30_000 });
  await until(async () => (await subscriptions()) === 6);
  await restartGateway();
  const restarted = Date.now();
  await running;
  const ended = Date.now();
  const report = JSON.parse(readFileSync(file, 'utf8')) as RunReport;
  assertSane(report, 'notify');
  const reconnect = report.reconnect!;
  assert.deepEqual([reconnect.dropped, reconnect.back, reconnect.away], [6, 6, 0]);
  assert.ok(reconnect.allBackS! > 0);
  assert.equal(report.latency.away?.count, 6);
  // Over both workers: all 6 before the drop, fewer while they were away (how few at a 100 ms bucket's end
  // depends on how fast the node was back), all 6 at the end.
  assert.deepEqual(reconnect.series[0], [0, 6]);
  assert.ok(Math.min(...reconnect.series.map(([, clients]) => clients)) < 6);
  assert.equal(reconnect.series.at(-1)?.[1], 6);
  const { counts } = report;
  assert.ok(counts.emitsOk! > 0);
  assert.equal(counts.expected, counts.emitsSent);
  assert.equal(counts.received, counts.expected);
  assert.equal(counts.missing, 0);
  // The clients left after the return and the emits, before wsload ended.
  const leftAt = Date.parse(report.leftAt!);
  assert.ok(leftAt >= restarted && leftAt <= ended, `leftAt ${report.leftAt} outside ${new Date(restarted).toISOString()}..${new Date(ended).toISOString()}`);
});

test('notify --resume: listeners dropped while emits flow come back from their last position; nothing missed, nothing twice', async () => {
  await until(async () => (await subscriptions()) === 0);
  const argv = ['notify', http, '--register', 'order-updates', '--clients', '10', '--resume', '--reconnect-min', '0.05', '--reconnect-max', '0.2', '-c', '2', '-R', '200', '-d', '2'];
  const running = run(argv);
  const emits = async () => (await gateway.metrics.registry.getSingleMetric('herald_emits_total')!.get()).values.reduce((sum, { value }) => sum + value, 0);
  await until(async () => (await emits()) > 50);
  // A network loss as the node sees it: every socket dropped without a close frame (the node's history stays).
  for (const session of gateway.hub.sessions) session.socket.terminate();
  const { counts, reconnect } = await running;
  assert.equal(reconnect?.dropped, 10);
  assert.deepEqual([counts.missing, counts.duplicates, counts.skipped, counts.recovered, counts.unrecovered], [0, 0, 0, 10, 0]);
  assert.equal(counts.received, counts.expected);
});

test('channels: 30 clients on 3 channels, half of them senders, each joining again with since: broadcasts reach their channel, history is replayed', async () => {
  const report = await run(['channels', http, '--clients', '30', '--channels', '3', '--send-rate', '5', '--history', '5', '--session', '1', '-w', '0.5', '-d', '2', '--grace', '1']);
  assertSane(report, 'channels');
  const { counts, latency } = report;
  assert.equal(counts.readyAtStart, 30);
  assert.ok(counts.emitsOk! > 0 && counts.emitsNon2xx === 0 && counts.emitErrors === 0, JSON.stringify(counts));
  assert.equal(latency.rtt?.count, counts.emitsOk);
  // Clients leave and join all along: a broadcast may miss one that left while it was on its way, or reach one that
  // joined then (expected counts the channel's clients ready when the emit was written).
  assert.ok(Math.abs(counts.received! - counts.expected!) <= counts.expected! * 0.05, JSON.stringify(counts));
  assert.equal(latency.broadcast?.count, counts.received);
  assert.ok(latency.echo!.count > 0, 'senders read their own broadcasts back');
  assert.ok(counts.historyFetches! > 0 && counts.historyReceived! > 0, JSON.stringify(counts));
  assert.equal(counts.unrecovered, 0);
  assert.equal(latency.history?.count, counts.historyFetches);
  assert.ok(report.rates.broadcastsReceivedPerSecond! > 0);
});
