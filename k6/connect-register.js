// Connect + REGISTER: each VU opens one WebSocket as one of the 10 customers, waits for CONNECTED,
// registers its order-updates, and keeps the connection open for HOLD_SECONDS; then does it again.
// Measures the time to CONNECTED and the REGISTER round trip. How to run: k6/README.md.
//
//   VUS (default 100)      connections held at once
//   DURATION (default 1m)  how long to keep going
//   HOLD_SECONDS (default 30)  how long each connection stays registered
//   plus BASE_URL, WS_URL, ... (k6/lib.js)
import ws from 'k6/ws';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { fetchTokens, personFor, registerFrame, registered, wsUrl } from './lib.js';

const HOLD_MS = Number(__ENV.HOLD_SECONDS || 30) * 1000;
const REPLY_TIMEOUT_MS = 10000;

const connectedMs = new Trend('herald_connected_ms', true);
const registerMs = new Trend('herald_register_ms', true);
const registerOk = new Rate('herald_register_ok');
const refused = new Counter('herald_refused');

export const options = {
  scenarios: {
    connect_register: {
      executor: 'constant-vus',
      vus: Number(__ENV.VUS || 100),
      duration: __ENV.DURATION || '1m',
      gracefulStop: `${Math.ceil(HOLD_MS / 1000) + 10}s`,
    },
  },
  thresholds: {
    herald_register_ok: ['rate>0.99'],
    herald_connected_ms: ['p(95)<500'],
  },
};

export function setup() {
  return fetchTokens();
}

export default function (tokens) {
  const person = personFor(tokens, __VU);
  const started = Date.now();
  let registerSent = 0;
  let replied = false;
  const res = ws.connect(wsUrl(tokens, person), {}, (socket) => {
    socket.on('message', (text) => {
      const frame = JSON.parse(text);
      if (frame.type === 'CONNECTED') {
        connectedMs.add(Date.now() - started);
        registerSent = Date.now();
        socket.send(registerFrame(person));
      } else if (frame.type === 'REGISTER') {
        replied = true;
        registerMs.add(Date.now() - registerSent);
        registerOk.add(registered(frame));
        socket.setTimeout(() => socket.close(), HOLD_MS);
      } else if (frame.type === 'TOKEN_VALIDATION') {
        replied = true;
        refused.add(1);
        registerOk.add(false);
      }
    });
    // A node that drains closes with 1001; the next iteration reconnects through the load balancer.
    socket.on('error', () => registerOk.add(false));
    // Never wait forever for CONNECTED and the REGISTER reply.
    socket.setTimeout(() => {
      if (!replied) {
        registerOk.add(false);
        socket.close();
      }
    }, REPLY_TIMEOUT_MS);
  });
  check(res, { 'upgraded (101)': (r) => r && r.status === 101 });
}
