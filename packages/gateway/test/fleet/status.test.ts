/**
 * The status page of a two-node fleet on a real redis-server: GET /status.json on either node answers both nodes'
 * records (written through Redis), and the page, in headless Chromium, renders them and follows their changes.
 * HERALD_SCREENSHOT=<file.png> also keeps the page's screenshot there (docs/status.png is made so).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { HeraldClient } from '../../../client/src/index.ts';
import type { FleetView } from '../../src/status/fleet.ts';
import { openBrowser } from '../support/chromium.ts';
import { startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';
import { apiToken, emit } from '../support/gateway.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

let redis: RedisServer;
let fleet: Fleet;
let api: string;
const clients: HeraldClient[] = [];

const view = async (node: FleetNode): Promise<FleetView> => (await fetch(`${node.http}/status.json`)).json() as Promise<FleetView>;

/** `count` clients on `node`, each registered for announcements. */
async function connect(node: FleetNode, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const client = await HeraldClient.connect({ url: node.ws, apiToken: api });
    await client.register([{ apiName: 'announcements' }]);
    clients.push(client);
  }
}

before(async () => {
  redis = await startRedis();
  fleet = await startFleet(2, redis.url, (raw) => {
    raw.status = { intervalMs: 200 };
    raw.canary = { intervalMs: 200, timeoutMs: 1000 };
  });
  api = await apiToken(fleet.nodes[0]!);
  await connect(fleet.nodes[0]!, 3);
  await connect(fleet.nodes[1]!, 1);
});
after(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await fleet?.stop();
  await redis?.stop();
});

test('GET /status.json: every node of the fleet, from either node, with clients, subscriptions, rates and canaries', async () => {
  const [one, two] = fleet.nodes as [FleetNode, FleetNode];
  let seen: FleetView | undefined;
  // Emits keep coming until a record's window caught some: rates are over the last status interval.
  await until(async () => {
    await emit(one, api, 'announcements', { title: 'status' });
    seen = await view(two);
    const byId = new Map(seen.nodes.map((record) => [record.nodeId, record]));
    return byId.get(one.id)?.connections === 3 && byId.get(two.id)?.connections === 1 && seen.nodes.every((record) => record.notificationsPerSecond > 0 && record.canarySelfMs !== null && record.canaryPeerMs !== null);
  }, 'both records with traffic and canaries');
  assert.ok(seen);
  assert.deepEqual(seen.nodes.map((record) => record.nodeId), [one.id, two.id]);
  assert.equal(seen.answeredBy, two.id);
  assert.deepEqual({ ...seen.totals, emitsPerSecond: 0, notificationsPerSecond: 0 }, { nodes: 2, ready: 2, connections: 4, subscriptions: 4, emitsPerSecond: 0, notificationsPerSecond: 0 });
  for (const record of seen.nodes) {
    assert.equal(record.ready, true);
    assert.equal(record.subscriptions, record.connections);
    assert.ok(record.at <= seen.at && seen.at - record.at < 10_000, 'a fresh record');
  }
  assert.equal(seen.unreadable, 0);
  const page = await fetch(`${one.http}/status`);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(await page.text(), /<title>Herald fleet status<\/title>/);
});

test('the page, in headless Chromium, renders every node and follows the fleet by itself', async () => {
  const [one, two] = fleet.nodes as [FleetNode, FleetNode];
  const browser = await openBrowser({ width: 1280, height: 460 });
  // Emits go on while the page is open, so that it has rates and latencies to show.
  const emitting = setInterval(() => void emit(one, api, 'announcements', { title: 'on the page' }).catch(() => {}), 50);
  try {
    const { page } = browser;
    await page.goto(`${one.http}/status`);
    const row = (node: FleetNode) => page.locator(`tr[data-node="${node.id}"]`);
    await row(two).waitFor();
    assert.equal(await row(one).locator('td').nth(1).textContent(), 'ready');
    assert.equal(await row(one).locator('td').nth(3).textContent(), '3');
    assert.equal(await row(two).locator('td').nth(3).textContent(), '1');
    // A client more on node 2: the page shows it without being reloaded.
    await connect(two, 1);
    await row(two).locator('td').nth(3).filter({ hasText: /^2$/ }).waitFor({ timeout: 10_000 });
    await page.locator('.tile b').first().filter({ hasText: '2 / 2' }).waitFor();
    await page.locator('.tile b').nth(4).filter({ hasText: /^[1-9]/ }).waitFor({ timeout: 10_000 });
    const overflow = { page: await page.locator('html').evaluate((html) => html.scrollWidth), table: await page.locator('table').evaluate((table) => table.scrollWidth) };
    assert.ok(overflow.page <= 1280 && overflow.table <= 1280 - 2 * 24, `the page fits a 1280 px window: ${JSON.stringify(overflow)}`);
    const shot = join(mkdtempSync(join(tmpdir(), 'herald-status-')), 'status.png');
    await page.screenshot({ path: shot, fullPage: true });
    if (process.env.HERALD_SCREENSHOT) copyFileSync(shot, process.env.HERALD_SCREENSHOT);
    assert.deepEqual(browser.console.filter((line) => /error/i.test(line)), []);
  } finally {
    clearInterval(emitting);
    await browser.close();
  }
});
