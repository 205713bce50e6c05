/**
 * The example page (example/index.html with the browser file of a fresh build) in headless Chromium: a person pastes
 * the tokens, connects and subscribes; the back end emits through the HTTP API; the page shows the notification.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openBrowser } from '../../gateway/test/support/chromium.ts';
import { BROWSER_FILE, buildClient } from '../scripts/build.ts';
import { apiToken, emit, personToken, startNode, type Node } from './support.ts';

const PAGE = new URL('../example/index.html', import.meta.url);
let node: Node;
let files: Server;
let site: string;

before(async () => {
  const dist = await buildClient(mkdtempSync(join(tmpdir(), 'herald-example-')));
  // The page as it sits in the package: example/index.html beside dist/.
  const served = new Map([
    ['/example/index.html', { type: 'text/html', body: readFileSync(PAGE) }],
    [`/dist/${BROWSER_FILE}`, { type: 'text/javascript', body: readFileSync(join(dist, BROWSER_FILE)) }],
  ]);
  files = createServer((request, response) => {
    const file = served.get(request.url ?? '');
    response.writeHead(file ? 200 : 404, { 'content-type': file?.type ?? 'text/plain' }).end(file?.body ?? 'not found');
  });
  files.listen(0, '127.0.0.1');
  await once(files, 'listening');
  const address = files.address();
  assert.ok(address !== null && typeof address === 'object');
  site = `http://127.0.0.1:${address.port}`;
  node = await startNode();
});
after(async () => {
  files?.close();
  await node?.gateway.close();
});

test('the example page connects, subscribes and shows the notifications the back end emits', async () => {
  const browser = await openBrowser();
  try {
    const { page } = browser;
    await page.goto(`${site}/example/index.html`);
    await page.fill('#url', node.ws);
    await page.fill('#apiToken', await apiToken(node));
    await page.fill('#personToken', await personToken(node));
    await page.fill('#event', 'order-updates');
    await page.fill('#criteria', '{"recipientId":2}');
    await page.click('button[type=submit]');
    await page.locator('#state', { hasText: 'connected, subscribed to order-updates' }).waitFor();
    await emit(node, 'order-updates', { recipientId: 3, orderId: 999, status: 'not for Nick' });
    await emit(node, 'order-updates', { recipientId: 2, orderId: 1001, status: 'shipped' });
    const shown = page.locator('#notifications li');
    await shown.filter({ hasText: '1001' }).waitFor();
    assert.deepEqual(await shown.allTextContents(), ['order-updates: {"recipientId":2,"orderId":1001,"status":"shipped"}']);
    assert.deepEqual(browser.console.filter((line) => /error/i.test(line)), []);
  } finally {
    await browser.close();
  }
});
