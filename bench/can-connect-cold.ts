#!/usr/bin/env node
/**
 * What the first REGISTER on an event with can-connect code costs, cold (its runner not started yet: isolated-vm's
 * addon loaded and an isolate made, or a sandbox worker process started) against warm (the next client's), beside a
 * REGISTER of an event without code (the node's first). Each run starts a node as `make run` does and connects the
 * clients first (Node's WebSocket), so that only the REGISTER is timed: from the frame sent to its reply.
 *
 *   node bench/can-connect-cold.ts [--runs 3] [--port 25160]
 */
import { parseArgs } from 'node:util';
import { GATEWAY_NODE_ARGS, median, ROOT, start, stop, waitFor } from './procs.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' }, port: { type: 'string', default: '25160' } } });
const runs = Number(values.runs);
const port = Number(values.port);
const base = `http://127.0.0.1:${port}`;

async function token(body: object): Promise<string> {
  const response = await fetch(`${base}/api/system-api/bench/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return ((await response.json()) as { data: { token: string } }).data.token;
}

function connect(apiToken: string, personToken: string): Promise<WebSocket> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/?x-am-authorization=${apiToken}&x-am-user-authorization=${personToken}`);
  return new Promise((resolve, reject) => {
    socket.onopen = () => resolve(socket);
    socket.onerror = () => reject(new Error('cannot connect'));
  });
}

/** REGISTER `event` and wait for its reply, ms; a refused entry throws. */
async function timed(socket: WebSocket, event: string): Promise<number> {
  const frame = JSON.stringify({ objType: 'REGISTER', onEvents: [{ eventType: 'CUSTOM_WS_EVENTS', apiName: event }] });
  const started = performance.now();
  const reply = await new Promise<string>((resolve) => {
    socket.onmessage = (message) => resolve(String(message.data));
    socket.send(frame);
  });
  const ms = performance.now() - started;
  const { response } = JSON.parse(reply) as { response: { validOnEvents: unknown[] } };
  if (response.validOnEvents.length !== 1) throw new Error(`${event} refused: ${reply}`);
  return ms;
}

/** One node: the no-code REGISTER, then `event`'s first (cold) and second (warm), each by a client of its own. */
async function oneRun(event: string): Promise<{ noCode: number; cold: number; warm: number }> {
  const env = { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_COMPILE_CACHE: `${ROOT}.run/node-compile-cache` };
  const node = start('cold node', 'node', [...GATEWAY_NODE_ARGS, `${ROOT}packages/gateway/src/main.ts`], env, '/dev/null');
  try {
    await waitFor('the node', async () => (await fetch(`${base}/readyz`)).ok, 60_000, 50, node);
    const apiToken = await token({ authTokenType: 'AM', authTokenAM: { u: 'bench', p: 'bench' } });
    const personToken = await token({ authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u: 'NICK', p: 'WAHLBERG' } });
    const [first, second, third] = await Promise.all([0, 1, 2].map(() => connect(apiToken, personToken))) as [WebSocket, WebSocket, WebSocket];
    const result = { noCode: await timed(first, 'announcements'), cold: await timed(second, event), warm: await timed(third, event) };
    for (const socket of [first, second, third]) socket.close();
    return result;
  } finally {
    await stop(node, 'SIGTERM', 5000);
  }
}

const round = (ms: number): number => Math.round(ms * 10) / 10;
const report: Record<string, Record<string, number>> = {};
for (const [runner, event] of [['isolate', 'checked-token'], ['sandbox', 'checked-sandbox']] as const) {
  const each: Array<{ noCode: number; cold: number; warm: number }> = [];
  for (let run = 0; run < runs; run++) each.push(await oneRun(event));
  report[runner] = Object.fromEntries((['noCode', 'cold', 'warm'] as const).map((key) => [`${key}_ms`, round(median(each.map((r) => r[key])) ?? NaN)]));
  report[runner]!.runs = runs;
  console.error(`${runner} (${event}): ${each.map((r) => `no code ${round(r.noCode)}, cold ${round(r.cold)}, warm ${round(r.warm)}`).join('; ')} ms`);
}
console.log(JSON.stringify(report));
