/**
 * Run alone, after the other tests (`*.solo.ts`): a peak of memory measures the node, not the neighbours that
 * share its 2 cores (beside another test file, the burst piled up twice as high).
 *
 * A reconnect storm against a real node process: 3,000 clients at once cost the node about as much memory as
 * 3,000 let in slowly, because admission control keeps at most 256 in the handshake.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import WebSocket from 'ws';
import { freePort } from '../support/redis.ts';
import { nodeMetric, until } from '../support/fleet.ts';
import { apiToken } from '../support/gateway.ts';

const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;
const CLIENTS = 3000;

/** Connect and register `CLIENTS` clients in batches of `batch`; answers the node's peak RSS growth (bytes). */
async function peakGrowth(batch: number): Promise<{ growth: number; peakHandshakes: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--no-node-snapshot', MAIN], { env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }, stdio: 'ignore' });
  const http = `http://127.0.0.1:${port}`;
  try {
    await until(async () => (await fetch(`${http}/readyz`)).status === 200, 'the node to start');
    const token = await apiToken({ http });
    const atRest = await nodeMetric({ http }, 'herald_process_max_resident_memory_bytes');
    const register = JSON.stringify({ objType: 'REGISTER', onEvents: [{ eventType: 'CUSTOM_WS_EVENTS', apiName: 'announcements' }] });
    const sockets: WebSocket[] = [];
    for (let start = 0; start < CLIENTS; start += batch) {
      const wave = Array.from({ length: Math.min(batch, CLIENTS - start) }, () => new WebSocket(`ws://127.0.0.1:${port}/?x-am-authorization=${token}`));
      sockets.push(...wave);
      await Promise.all(
        wave.map(async (socket) => {
          await once(socket, 'message'); // CONNECTED
          socket.send(register);
          await once(socket, 'message'); // the REGISTER reply
        }),
      );
    }
    const growth = (await nodeMetric({ http }, 'herald_process_max_resident_memory_bytes')) - atRest;
    const peakHandshakes = await nodeMetric({ http }, 'herald_handshakes_in_flight_peak');
    for (const socket of sockets) socket.terminate();
    return { growth, peakHandshakes };
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
}

test('3,000 clients at once: all get in, and the peak memory stays near what they cost when let in slowly', async () => {
  const slowly = await peakGrowth(100);
  const atOnce = await peakGrowth(CLIENTS);
  assert.ok(atOnce.peakHandshakes <= 256, `in the handshake at once: ${atOnce.peakHandshakes}`);
  const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
  // Near: within twice plus 16 MB. Peak RSS moves with GC timing and with whatever else the 2 cores run
  // (measured: slowly 35-59 MB, at once 56-69 MB; without admission control up to 74 MB at once). Waiting
  // clients still cost their parsed upgrade request: pausing sockets before parsing would tighten this.
  const bound = slowly.growth * 2 + 16 * 2 ** 20;
  assert.ok(atOnce.growth <= bound, `peak growth at once ${mb(atOnce.growth)} MB, slowly ${mb(slowly.growth)} MB`);
  process.stdout.write(`# peak RSS growth for ${CLIENTS} clients: slowly ${mb(slowly.growth)} MB, at once ${mb(atOnce.growth)} MB\n`);
});
