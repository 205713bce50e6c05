/**
 * The plan of a scale run (bench/scale-plan.ts) and the arithmetic on its results (bench/scale-results.ts), with no
 * process started: what `make scale CLIENTS=800000 DRY_RUN=1` prints must hold for the lead's run. The run itself
 * (bench/scale.sh) takes ~45 s at its smallest, too long for `make test`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { levelsOf, makePlan, parseScaleArgs, sysctlsFor, type Machine } from '../scale-plan.ts';
import { perClient, project, type Level, type ScaleResults } from '../scale-results.ts';

const MACHINE: Machine = { cores: 2, memTotalKb: 24_000_000, memAvailableKb: 22_000_000, openFiles: 20_000 };
const READ = (values: Record<string, string>) => (key: string): string | undefined => values[key];

test('levels: as the reference, 1/80, 1/16 and each eighth of the target, the last one the target itself', () => {
  assert.deepEqual(levelsOf(800_000), [10_000, 50_000, 100_000, 200_000, 300_000, 400_000, 500_000, 600_000, 700_000, 800_000]);
  assert.deepEqual(levelsOf(2000), [100, 300, 500, 800, 1000, 1300, 1500, 1800, 2000]);
  for (const clients of [100, 777, 60_000, 123_457]) {
    const levels = levelsOf(clients);
    assert.equal(levels.at(-1), clients);
    assert.ok(levels.every((level, i) => i === 0 || level > levels[i - 1]!), `${levels} rises`);
  }
});

test('800,000 clients: 43 nodes under a process\'s open files, a port each, 401 source addresses past 127.0.0.255', () => {
  const plan = makePlan(parseScaleArgs(['--clients', '800000'], '/tmp/out'), MACHINE);
  assert.equal(plan.nodes, 43);
  assert.ok(plan.perNode <= 19_000 && plan.perNode * plan.nodes >= 800_000);
  assert.deepEqual(plan.nodePorts, [26_101, 26_143]);
  assert.equal(plan.workers, 43);
  assert.deepEqual(plan.addresses, { count: 401, first: '127.0.0.2', last: '127.0.1.146' });
  assert.ok(plan.expectedKb.total > 10_000_000 && plan.expectedKb.total < plan.expectedKb.room, JSON.stringify(plan.expectedKb));
});

test('a machine with fewer open files per process gets more, smaller nodes and workers', () => {
  const plan = makePlan(parseScaleArgs(['--clients', '100000'], '/tmp/out'), { ...MACHINE, openFiles: 4096 });
  assert.equal(plan.nodes, Math.ceil(100_000 / (4096 - 1000)));
  assert.equal(plan.workers, Math.ceil(100_000 / (4096 - 500)));
});

test('kernel settings: raised only where below what the run needs; tcp_mem keeps its minimum', () => {
  const current = { 'fs.file-max': '1000000', 'net.ipv4.tcp_mem': '287889 383855 575778', 'net.core.somaxconn': '4096', 'net.core.netdev_max_backlog': '1000' };
  const big = Object.fromEntries(sysctlsFor(800_000, READ(current)).map((s) => [s.key, s]));
  assert.equal(big['fs.file-max']!.raise, true);
  assert.equal(big['fs.file-max']!.wanted, String(1_600_000 + 200_000));
  assert.deepEqual(big['net.ipv4.tcp_mem']!.wanted.split(' ').map(Number), [287_889, 400_000, 800_000]);
  assert.equal(big['net.core.somaxconn']!.raise, false);
  assert.equal(big['net.core.netdev_max_backlog']!.wanted, '16384');
  // Not there (no conntrack module): not planned at all.
  assert.equal(big['net.netfilter.nf_conntrack_max'], undefined);
  const small = sysctlsFor(2000, READ(current));
  assert.deepEqual(small.filter((s) => s.raise), []);
});

test('options: numbers checked, node args split, defaults', () => {
  const options = parseScaleArgs(['--clients', '5000', '--node-args=--no-node-snapshot  --max-semi-space-size=4', '--dry-run'], '/tmp/out');
  assert.deepEqual(options.nodeArgs, ['--no-node-snapshot', '--max-semi-space-size=4']);
  assert.equal(options.dryRun, true);
  assert.equal(options.rate, 2000);
  assert.throws(() => parseScaleArgs(['--clients', 'many'], '/tmp/out'), /--clients must be a number >= 100, got many/);
  assert.throws(() => parseScaleArgs(['--clientz', '5'], '/tmp/out'), /Unknown option/);
});

/** A level with only what the arithmetic reads. */
function level(clients: number, nodeKb: number, kernelKb: number, loadgenKb: number, availableKb: number): Level {
  return {
    t: 0, phase: '', clients, connections: clients, subscriptions: clients, redisKeys: 0, failed: 0,
    nodes: { processes: 4, rssKb: nodeKb + 4 * 45_000, anonKb: nodeKb },
    loadgen: { processes: 1, rssKb: loadgenKb, anonKb: loadgenKb },
    redis: { usedMemory: 1_000_000 + clients * 60, rssKb: 10_000 },
    kernel: { slabKb: kernelKb, slabUnreclaimableKb: 0, pageTablesKb: 0, kernelStackKb: 0, tcpBuffersKb: 0, tcpSockets: 2 * clients },
    machine: { totalKb: 24_000_000, availableKb },
  };
}

test('per client: between the first level with a quarter of the clients and the last; the projection without the load generator', () => {
  const levels = [level(0, 280_000, 180_000, 0, 22_000_000), level(1000, 290_000, 190_000, 20_000, 21_900_000),
    level(5000, 300_000, 220_000, 30_000, 21_800_000), level(20_000, 360_000, 370_000, 75_000, 21_600_000)];
  const slopes = perClient(levels)!;
  assert.equal(slopes.from.clients, 5000);
  assert.equal(slopes.nodeAnonKb, 4);
  assert.equal(slopes.kernelKb, 10);
  assert.equal(slopes.loadgenKb, 3);
  assert.ok(Math.abs(slopes.redisKb - 60 / 1024) < 1e-9);
  const results = { levels, plan: { perNode: 19_000, options: { reservePct: 5 } } } as unknown as ScaleResults;
  const p = project(results, 95)!;
  assert.equal(p.nodeBaseKb, 70_000);
  assert.equal(p.serverKbPerClient, 4 + 60 / 1024 + 5);
  // Everything at rest that is not the fleet or the load generator: used − nodes − Redis − load generator.
  assert.equal(p.restKb, 2_000_000 - 280_000 - 10_000);
  assert.ok(p.serverKb(p.fitsServerOnly) <= 24_000_000 * 0.95 + p.nodeBaseKb);
  assert.ok(p.serverKb(p.fitsServerOnly + 20_000) > 24_000_000 * 0.95);
});

test("bench/scale.yaml is a config the node takes, whose people log in and whose load processes' token requests are not limited", async () => {
  const { loadConfigFile } = await import('../../packages/gateway/src/config/load.ts');
  const { SCALE_CONFIG } = await import('../scale-fleet.ts');
  const config = loadConfigFile(SCALE_CONFIG);
  assert.equal(config.tokenGenerators.customers?.passwordColumn, 'password_hash');
  assert.ok(config.rateLimit.tokenRequests.burst >= 1000);
});
