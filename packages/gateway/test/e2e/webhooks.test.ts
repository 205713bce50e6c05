/**
 * Connect and disconnect webhooks against a real local HTTP server: batched, signed, retried on 5xx with backoff,
 * given up on a 4xx, a full queue dropped and counted, and what waits sent when the node drains.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, test } from 'node:test';
import { signatureOf, type WebhookEvent } from '../../src/webhooks.ts';
import { until } from '../support/fleet.ts';
import { TestSocket, apiToken, metric, personToken, startNode, type TestNode } from '../support/gateway.ts';

/** Counted once the node has read the back end's answer, which may be after the back end has the events. */
const counted = (node: TestNode, result: string, count: number) =>
  until(async () => (await metric(node, 'herald_webhook_events_total', { result })) === count, `${count} ${result}`, 5000);

const SECRET = 'webhook-secret-for-tests';

interface Received {
  events: WebhookEvent[];
  signature: string | undefined;
  body: string;
}

/** A back end: answers each POST with the next of `statuses` (then 200), and keeps what it was sent. */
class BackEnd {
  readonly received: Received[] = [];
  statuses: number[] = [];
  readonly #server: Server;
  readonly #waiters: Array<() => void> = [];

  constructor() {
    this.#server = createServer((request, response) => void this.#take(request, response));
  }

  async listen(): Promise<string> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    return `http://127.0.0.1:${(this.#server.address() as { port: number }).port}/hooks`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  /** Every event of the answered POSTs, once `count` have come. */
  async events(count: number): Promise<WebhookEvent[]> {
    while (this.#accepted().length < count) await new Promise<void>((resolve) => this.#waiters.push(resolve));
    return this.#accepted();
  }

  #accepted(): WebhookEvent[] {
    return this.received.filter((_, i) => (this.statusesGiven[i] ?? 200) === 200).flatMap((post) => post.events);
  }

  readonly statusesGiven: number[] = [];

  async #take(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of request) body += chunk;
    const status = this.statuses.shift() ?? 200;
    this.statusesGiven.push(status);
    this.received.push({ events: JSON.parse(body) as WebhookEvent[], signature: request.headers['x-herald-signature'] as string | undefined, body });
    response.writeHead(status).end();
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

let backEnd: BackEnd;
let url: string;
before(async () => {
  backEnd = new BackEnd();
  url = await backEnd.listen();
});
after(() => backEnd.close());

function nodeWith(webhooks: Record<string, unknown>): Promise<TestNode> {
  return startNode((raw) => {
    raw.webhooks = { url, secret: SECRET, ...webhooks };
  });
}

test('connects and disconnects reach the back end batched and signed, with who, where and the close code', async () => {
  backEnd.received.length = 0;
  backEnd.statusesGiven.length = 0;
  const node = await nodeWith({ batchMs: 50 });
  const api = await apiToken(node);
  const nick = await TestSocket.connect(node, api, await personToken(node, 'NICK', 'WAHLBERG'));
  const bare = await TestSocket.connect(node, api);
  await nick.close();
  bare.socket.close(4100, 'bye');
  await bare.closed;
  const events = await backEnd.events(4);
  const nodeId = node.gateway.broker.nodeId;
  const shape = events.map(({ type, node, apiUser, person, code }) => ({ type, node, apiUser, person, code }));
  assert.deepEqual(shape, [
    { type: 'connect', node: nodeId, apiUser: 'bench', person: { generator: 'customers', id: 'NICK' }, code: undefined },
    { type: 'connect', node: nodeId, apiUser: 'bench', person: null, code: undefined },
    { type: 'disconnect', node: nodeId, apiUser: 'bench', person: { generator: 'customers', id: 'NICK' }, code: 1005 },
    { type: 'disconnect', node: nodeId, apiUser: 'bench', person: null, code: 4100 },
  ]);
  assert.ok(events.every((event) => Math.abs(event.at - Date.now()) < 10_000));
  assert.ok(backEnd.received.length < 4, 'batched');
  for (const post of backEnd.received) assert.equal(post.signature, signatureOf(post.body, SECRET));
  await counted(node, 'sent', 4);
  await node.close();
});

test('a 5xx is tried again after a backoff, a 4xx is given up; each counted', async () => {
  backEnd.received.length = 0;
  backEnd.statusesGiven.length = 0;
  backEnd.statuses = [503, 500];
  const node = await nodeWith({ batchMs: 10 });
  const api = await apiToken(node);
  const client = await TestSocket.connect(node, api);
  assert.equal((await backEnd.events(1)).length, 1);
  assert.deepEqual(backEnd.statusesGiven, [503, 500, 200]);
  assert.equal(await metric(node, 'herald_webhook_retries_total'), 2);
  await counted(node, 'sent', 1);
  backEnd.statuses = [400];
  await client.close();
  while (backEnd.statusesGiven.length < 4) await new Promise((resolve) => setTimeout(resolve, 10));
  await node.close();
  assert.equal(await metric(node, 'herald_webhook_events_total', { result: 'failed' }), 1);
  assert.equal(backEnd.statusesGiven.length, 4, 'a 4xx is not tried again');
});

test('past maxQueue events are dropped and counted; what waits is sent when the node drains, its disconnects too', async () => {
  backEnd.received.length = 0;
  backEnd.statusesGiven.length = 0;
  const node = await nodeWith({ batchMs: 60_000, maxQueue: 2 });
  const api = await apiToken(node);
  const clients = await Promise.all([1, 2, 3].map(() => TestSocket.connect(node, api)));
  assert.equal(await metric(node, 'herald_webhook_events_total', { result: 'dropped' }), 1);
  assert.equal(backEnd.received.length, 0, 'a minute of batchMs: nothing sent yet');
  await node.close();
  await Promise.all(clients.map((client) => client.closed));
  const types = backEnd.received.flatMap((post) => post.events).map((event) => event.type);
  assert.deepEqual(types.slice(0, 2), ['connect', 'connect']);
  assert.ok(types.slice(2).every((type) => type === 'disconnect'));
  const sent = await metric(node, 'herald_webhook_events_total', { result: 'sent' });
  assert.equal(sent, types.length);
  assert.equal(sent + (await metric(node, 'herald_webhook_events_total', { result: 'dropped' })), 6, 'every event counted once');
});
