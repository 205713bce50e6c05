/**
 * Exactly once from the back end's call to the person, on three node processes sharing one redis-server behind
 * HAProxy, with 30 SDK clients (three or four per person, order-updates: history):
 *
 * - a back end on @herald/server emits 10,000 notifications (one at a time per person) while a node is killed -9 and
 *   another drained, and its own connections lose answers on their way back (a TCP proxy between it and HAProxy);
 * - the same through the emit stream, with the node reading it killed -9 while it holds entries it has not published.
 *
 * Every client gets every notification its person was owed (answered 200; added to the stream) exactly once, in order.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { HeraldServer, HeraldServerError, xadd } from '../../../server/src/index.ts';
import { apiToken } from '../support/gateway.ts';
import { nodeMetric, PEOPLE, startFleet, until, type Fleet, type FleetNode } from '../support/fleet.ts';
import { connectListeners, type Listener } from '../support/owed.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

const CLIENTS = 30;
const EMITS = 10_000;
/** Emits a second, over all the people. */
const RATE = 1000;
const STREAM = 'herald:emits';

let redis: RedisServer;
let fleet: Fleet;
let backEndPath: TcpProxy;
let listeners: Listener[];

before(async () => {
  redis = await startRedis();
  fleet = await startFleet(3, redis.url, (raw) => {
    raw.events['order-updates'].history = { size: 20_000, ttlSeconds: 600, maxReplay: 20_000 };
    raw.ingest = { apiUser: 'bench', blockMs: 200, claimIdleMs: 1500 };
  });
  backEndPath = await startTcpProxy(Number(new URL(fleet.http).port));
  const api = await apiToken(fleet);
  listeners = await connectListeners(fleet, api, CLIENTS);
});
after(async () => {
  await Promise.all(listeners.map((listener) => listener.client?.close()));
  await fleet.stop();
  await backEndPath.close();
  await redis.stop();
});

const people = (): string[] => PEOPLE.map((_, i) => String(i + 1));

/** Per person, the seqs owed, in the order the person's notifications were made. */
type Owed = Map<string, number[]>;

/** Every client got every seq its person was owed, once each, in order; `unknown`: seqs that may or may not have been published. */
async function everyClientOnce(tag: string, owed: Owed, unknown: Owed = new Map()): Promise<void> {
  await Promise.all(listeners.map((listener) => {
    const last = owed.get(listener.recipientId)?.at(-1);
    return last === undefined ? undefined : listener.until(tag, last);
  }));
  await sleep(300);
  for (const listener of listeners) {
    const got = listener.seqs(tag);
    const expected = owed.get(listener.recipientId) ?? [];
    const maybe = new Set(unknown.get(listener.recipientId) ?? []);
    assert.deepEqual(got.filter((seq) => !maybe.has(seq)), expected, `person ${listener.recipientId}: every owed one, once, in order`);
    assert.deepEqual(got, [...new Set(got)].sort((a, b) => a - b), `person ${listener.recipientId}: nothing twice or out of order`);
  }
}

/** Kill -9 a node and start it again on its port, once it is gone. */
async function killAndRestart(at: number): Promise<void> {
  fleet.nodes[at]!.child.kill('SIGKILL');
  await fleet.nodes[at]!.exited;
  await fleet.restart(at);
}

/** Drain a node (SIGTERM) and start it again. */
async function drainAndRestart(at: number): Promise<void> {
  fleet.nodes[at]!.child.kill('SIGTERM');
  assert.equal(await fleet.nodes[at]!.exited, 0);
  await fleet.restart(at);
}

test('@herald/server: 10,000 emits while a node is killed, another drained and answers are lost: each client gets each once, in order', async () => {
  const herald = new HeraldServer({ url: `http://127.0.0.1:${backEndPath.port}`, userPath: 'bench', credentials: { u: 'bench', p: 'bench' }, timeoutMs: 3000, retry: { attempts: 30, minDelayMs: 50, maxDelayMs: 1000 } });
  const owed: Owed = new Map(people().map((person) => [person, []]));
  const failed: Owed = new Map(people().map((person) => [person, []]));
  let seq = 0;
  let sent = 0;
  const perPerson = Math.ceil(EMITS / PEOPLE.length);
  const everyMs = (1000 * PEOPLE.length) / RATE;
  const started = performance.now();
  backEndPath.loseAnswers(50);
  const loops = people().map(async (person, i) => {
    for (let k = 0; k < perPerson; k++) {
      const wait = started + (k + i / PEOPLE.length) * everyMs - performance.now();
      if (wait > 0) await sleep(wait);
      const mine = ++seq;
      sent++;
      try {
        await herald.emit('order-updates', { recipientId: person, tag: 'sdk', seq: mine });
        owed.get(person)!.push(mine);
      } catch (error) {
        assert.ok(error instanceof HeraldServerError, String(error));
        failed.get(person)!.push(mine);
      }
    }
  });
  const faults = (async () => {
    await until(async () => sent > EMITS * 0.2, '20% sent', 60_000);
    await killAndRestart(0);
    await until(async () => sent > EMITS * 0.55, '55% sent', 60_000);
    await drainAndRestart(1);
  })();
  await Promise.all([...loops, faults]);
  backEndPath.loseAnswers(0);
  const replayed = await Promise.all(fleet.nodes.map((node) => nodeMetric(node, 'herald_emits_idempotent_total{result="replayed"}')));
  console.log(`# sdk: ${seq} emitted, ${[...failed.values()].flat().length} failed for good, ${backEndPath.answersLost} answers lost on their way back; repeats answered by the nodes now up: ${replayed.join(', ')}`);
  assert.ok(backEndPath.answersLost > 0, 'answers were lost');
  await everyClientOnce('sdk', owed, failed);
});

test('the emit stream: entries published once each, in order, though the node reading them is killed holding some', async () => {
  const backEnd = new Redis(redis.url);
  const owed: Owed = new Map(people().map((person) => [person, []]));
  let seq = 0;
  const adding = (async () => {
    for (let round = 0; round < 400; round++) {
      for (const person of people()) {
        const mine = ++seq;
        await xadd(backEnd, { name: 'order-updates', eventData: { recipientId: person, tag: 'stream', seq: mine } }, { stream: STREAM });
        owed.get(person)!.push(mine);
      }
      if (round % 40 === 0) await sleep(20);
    }
  })();
  let killed: number | undefined;
  try {
    const reader = await stopReaderHolding(backEnd);
    killed = fleet.nodes.indexOf(reader);
    reader.child.kill('SIGKILL');
    await reader.exited;
    await adding;
    await everyClientOnce('stream', owed);
    const claimed = await Promise.all(fleet.nodes.filter((node) => node !== reader).map((node) => nodeMetric(node, 'herald_ingest_entries_total{result="claimed"}')));
    assert.ok(claimed.some((count) => count > 0), 'a survivor claimed what the killed reader left');
  } finally {
    // Whatever failed: the back end's connection closed once it is done with it, the fleet whole again.
    await adding.catch(() => {});
    backEnd.disconnect();
    if (killed !== undefined) await fleet.restart(killed);
  }
});

/**
 * The stream's reader, stopped (SIGSTOP) at a moment it holds entries it has not acknowledged: checked while it is
 * stopped, as a running reader may acknowledge them between the check and a kill.
 */
async function stopReaderHolding(backEnd: Redis): Promise<FleetNode> {
  let stopped: FleetNode | undefined;
  await until(async () => {
    const holder = await backEnd.get(`${STREAM}:reader`);
    const node = fleet.nodes.find((candidate) => candidate.id === holder);
    if (node === undefined) return false;
    node.child.kill('SIGSTOP');
    const consumers = (await backEnd.xpending(STREAM, 'herald')) as [number, string | null, string | null, Array<[string, string]> | null];
    const holding = Number(consumers[3]?.find(([name]) => name === node.id)?.[1] ?? 0);
    if (holding > 0) stopped = node;
    else node.child.kill('SIGCONT');
    return stopped !== undefined;
  }, 'the reader to hold pending entries', 30_000);
  return stopped!;
}
