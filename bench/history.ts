/**
 * Issue 25 on the gateway target: what a history costs and how fast a client gets back what it missed. The event
 * `announcements-kept` of the default config is `announcements` with each route's last 100 kept.
 *
 *   throughput  unpaced one-person notify (1,000 listeners, one route each), on announcements and on
 *               announcements-kept in turn, the order alternating from round to round (this machine's rate drifts
 *               10-20% over minutes: a pair a few seconds apart shares the drift, as can-connect's rounds do):
 *               notify_person_history_per_s and its ratio to the run beside it, notify_person_history_vs_plain
 *               (medians over the rounds); the node's CPU per emit of each.
 *   recover     a client registers, leaves, 100 notifications are emitted to its route, it connects again and
 *               REGISTERs with since: from that REGISTER written to the 100th replayed NOTIFICATION read, p50 and
 *               p99 over the trials (history_recover_100_p50_ms, _p99_ms).
 *   bytes       Redis used_memory before and after appending `perRoute` notifications of wsload's shape
 *               ({"recipientId":"…","sentAt":…}) to each of `routes` routes nobody holds: bytes per notification kept,
 *               the route's stream and position included (history_redis_bytes_per_notification).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { HttpConnection, jsonPostHead } from '@herald/loadgen';
import { median, metric } from './procs.ts';
import { usPerEmit } from './steps.ts';
import type { BenchContext, Target } from './context.ts';

const KEPT = 'announcements-kept';
const MISSED = 100;

export async function historyScenario(ctx: BenchContext, t: Target): Promise<void> {
  const { quick } = ctx.options;
  const token = await apiToken(t);
  await throughput(ctx, t);
  await recover(ctx, t, token, quick ? 30 : 200);
  await bytes(ctx, t, token, quick ? 200 : 1000, 50);
}

async function throughput(ctx: BenchContext, t: Target): Promise<void> {
  const { notifyS, notifyWarmupS, quick } = ctx.options;
  const run = async (event: string, label: string): Promise<[number, number | undefined]> => {
    ctx.sampler.phase = `${t.name} history ${label}`;
    const args = ['notify', `http://127.0.0.1:${t.port}`, '--clients', '1000', '-c', '100', '-w', String(notifyWarmupS), '-d', String(notifyS), '--register', event];
    const out = await ctx.runLoad(t, args, notifyS + notifyWarmupS + 120);
    ctx.results.runs[`${t.name} history ${label}`] = out;
    return [out.rates?.notificationsPerSecond ?? NaN, usPerEmit(ctx, t, out)];
  };
  const rates: number[] = [];
  const ratios: number[] = [];
  const cpu: Array<[number | undefined, number | undefined]> = [];
  for (let round = 1; round <= (quick ? 1 : 3); round++) {
    let plain: [number, number | undefined];
    let kept: [number, number | undefined];
    if (round % 2 === 0) {
      plain = await run('announcements', `plain ${round}`);
      kept = await run(KEPT, `kept ${round}`);
    } else {
      kept = await run(KEPT, `kept ${round}`);
      plain = await run('announcements', `plain ${round}`);
    }
    rates.push(kept[0]);
    ratios.push(kept[0] / plain[0]);
    cpu.push([plain[1], kept[1]]);
  }
  ctx.record('notify_person_history_per_s', median(rates));
  ctx.record('notify_person_history_vs_plain', median(ratios));
  ctx.record('notify_person_history_us_per_emit', median(cpu.flatMap(([, kept]) => (kept === undefined ? [] : [kept]))));
  ctx.record('notify_person_plain_us_per_emit', median(cpu.flatMap(([plain]) => (plain === undefined ? [] : [plain]))));
}

async function apiToken(t: Target): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${t.port}/api/system-api/bench/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } }),
  });
  return ((await response.json()) as { data: { token: string } }).data.token;
}

/** Emits of `bodies` (eventData JSON each) to announcements-kept, on `connections` keep-alive connections; resolves once all are answered 200. */
async function emitAll(t: Target, token: string, bodies: string[], connections: number): Promise<void> {
  const url = new URL(`http://127.0.0.1:${t.port}`);
  const head = jsonPostHead(url, '/api/system-api/bench/emit-event-ws', { 'x-am-authorization': token });
  let next = 0;
  const lane = async (): Promise<void> => {
    const connection = new HttpConnection({ host: url.hostname, port: Number(url.port), timeoutMs: 10_000 });
    try {
      for (let i = next++; i < bodies.length; i = next++) {
        const body = `{"name":"${KEPT}","eventData":${bodies[i]}}`;
        const status = await new Promise<number>((resolve) => connection.send(`${head}${Buffer.byteLength(body)}\r\n\r\n${body}`, (answer) => resolve(answer)));
        if (status !== 200) throw new Error(`an emit was answered ${status}`);
      }
    } finally {
      connection.close();
    }
  };
  await Promise.all(Array.from({ length: connections }, lane));
}

/** What the recover trials read of a frame: a REGISTER's reply (its route's position) or a NOTIFICATION's offset. */
interface Frame {
  response?: { offset?: number; validOnEvents?: Array<{ offset: number; epoch: string; recovered?: boolean }> };
}

/** A REGISTER reply's accepted event; throws for any other frame. */
function accepted(frame: Frame | undefined): { offset: number; epoch: string; recovered?: boolean } {
  const event = frame?.response?.validOnEvents?.[0];
  if (!event) throw new Error(`not a REGISTER reply: ${JSON.stringify(frame)}`);
  return event;
}

/** A WebSocket client that keeps every text frame, parsed, and can wait for a count of them. */
class Reader {
  readonly socket: WebSocket;
  readonly frames: Frame[] = [];
  #wake: (() => void) | undefined;

  constructor(t: Target, token: string) {
    this.socket = new WebSocket(`ws://127.0.0.1:${t.port}/?x-am-authorization=${token}`);
    this.socket.on('message', (data) => {
      this.frames.push(JSON.parse(String(data)) as Frame);
      this.#wake?.();
    });
  }

  async until(count: number, timeoutMs = 10_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.frames.length < count) {
      if (performance.now() > deadline) throw new Error(`${this.frames.length} of ${count} frames within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 100);
      });
    }
  }

  register(recipientId: string, since?: { offset: number; epoch: string }): void {
    const onEvent = { eventType: 'CUSTOM_WS_EVENTS', apiName: KEPT, condition: { conditionType: 'RESPONSE', criteria: { recipientId } }, ...(since ? { since } : {}) };
    this.socket.send(JSON.stringify({ objType: 'REGISTER', onEvents: [onEvent] }));
  }

  close(): void {
    this.socket.close();
  }
}

async function recover(ctx: BenchContext, t: Target, token: string, trials: number): Promise<void> {
  ctx.sampler.phase = `${t.name} history recover`;
  const took: number[] = [];
  for (let trial = 0; trial < trials; trial++) {
    const recipientId = `recover-${Date.now()}-${trial}`;
    const first = new Reader(t, token);
    await first.until(1);
    first.register(recipientId);
    await first.until(2);
    const { offset, epoch } = accepted(first.frames[1]);
    first.close();
    await emitAll(t, token, Array.from({ length: MISSED }, (_, i) => JSON.stringify({ recipientId, n: i, sentAt: Date.now() })), 4);
    const back = new Reader(t, token);
    await back.until(1);
    const start = performance.now();
    back.register(recipientId, { offset, epoch });
    await back.until(2 + MISSED);
    took.push(performance.now() - start);
    const reply = accepted(back.frames[1]);
    if (reply.recovered !== true || back.frames[2 + MISSED - 1]?.response?.offset !== offset + MISSED) {
      throw new Error(`trial ${trial}: not recovered whole: ${JSON.stringify(reply)}`);
    }
    back.close();
  }
  took.sort((a, b) => a - b);
  const at = (q: number): number => took[Math.min(took.length - 1, Math.ceil(q * took.length) - 1)]!;
  ctx.results.runs[`${t.name} history recover`] = { trials, missed: MISSED, ms: took.map((ms) => Math.round(ms * 100) / 100) };
  ctx.record('history_recover_100_p50_ms', at(0.5));
  ctx.record('history_recover_100_p99_ms', at(0.99));
}

async function bytes(ctx: BenchContext, t: Target, token: string, routes: number, perRoute: number): Promise<void> {
  ctx.sampler.phase = `${t.name} history bytes`;
  const { redis } = ctx;
  if (!redis) throw new Error('no Redis client');
  const usedMemory = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
  const appended = async (): Promise<number> => (await metric(t.port, 'herald_history_appends_total')) ?? NaN;
  await sleep(1000);
  const [before, appendsBefore] = [await usedMemory(), await appended()];
  const bodies: string[] = [];
  for (let n = 0; n < perRoute; n++) for (let route = 0; route < routes; route++) bodies.push(`{"recipientId":"bytes-${route}","sentAt":${(performance.timeOrigin + performance.now()).toFixed(3)}}`);
  await emitAll(t, token, bodies, 20);
  await sleep(1000);
  const [after, appendsAfter] = [await usedMemory(), await appended()];
  const notifications = appendsAfter - appendsBefore;
  if (notifications !== routes * perRoute) throw new Error(`${notifications} appends for ${routes * perRoute} emits`);
  ctx.results.runs[`${t.name} history bytes`] = { routes, perRoute, usedMemoryBefore: before, usedMemoryAfter: after };
  ctx.record('history_redis_bytes_per_notification', (after - before) / notifications);
}
