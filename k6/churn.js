// Churn: connections that come and go. Each iteration connects as one of the 10 customers, waits for
// CONNECTED, registers its order-updates, and leaves at once. One Trend per phase, so a slow phase shows
// by itself. How to run: k6/README.md.
//
//   RATE (default 50)      new connections per second
//   DURATION (default 1m)
//   MAX_VUS (default 500)  VUs k6 may use to keep the rate
//   plus BASE_URL, WS_URL, ... (k6/lib.js)
import ws from 'k6/ws';
import { check } from 'k6';
import { Rate, Trend } from 'k6/metrics';
import { fetchTokens, personFor, registerFrame, registered, wsUrl } from './lib.js';

const REPLY_TIMEOUT_MS = 10000;

// Phases: upgrade (connect() to the socket open), connected (open to the CONNECTED frame),
// register (REGISTER sent to its reply), leave (close() to the close event), and the whole cycle.
const upgradeMs = new Trend('herald_churn_upgrade_ms', true);
const connectedMs = new Trend('herald_churn_connected_ms', true);
const registerMs = new Trend('herald_churn_register_ms', true);
const leaveMs = new Trend('herald_churn_leave_ms', true);
const cycleMs = new Trend('herald_churn_cycle_ms', true);
const cycleOk = new Rate('herald_churn_ok');

export const options = {
  scenarios: {
    churn: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 50),
      timeUnit: '1s',
      duration: __ENV.DURATION || '1m',
      preAllocatedVUs: Math.min(Number(__ENV.RATE || 50), Number(__ENV.MAX_VUS || 500)),
      maxVUs: Number(__ENV.MAX_VUS || 500),
    },
  },
  thresholds: {
    herald_churn_ok: ['rate>0.99'],
    herald_churn_cycle_ms: ['p(95)<1000'],
  },
};

export function setup() {
  return fetchTokens();
}

export default function (tokens) {
  // Iterations of one VU go through the people in turn, so every person churns.
  const person = personFor(tokens, __VU + __ITER);
  const started = Date.now();
  let opened = 0;
  let connected = 0;
  let leaving = 0;
  let ok = false;
  const res = ws.connect(wsUrl(tokens, person), {}, (socket) => {
    socket.on('open', () => {
      opened = Date.now();
      upgradeMs.add(opened - started);
    });
    socket.on('message', (text) => {
      const frame = JSON.parse(text);
      if (frame.type === 'CONNECTED') {
        connected = Date.now();
        connectedMs.add(connected - opened);
        socket.send(registerFrame(person));
      } else if (frame.type === 'REGISTER') {
        registerMs.add(Date.now() - connected);
        ok = registered(frame);
        leaving = Date.now();
        socket.close();
      } else {
        socket.close(); // TOKEN_VALIDATION or ERROR: counted as a failed cycle
      }
    });
    socket.on('close', () => {
      if (leaving > 0) leaveMs.add(Date.now() - leaving);
      cycleOk.add(ok);
      if (ok) cycleMs.add(Date.now() - started);
    });
    socket.setTimeout(() => socket.close(), REPLY_TIMEOUT_MS);
  });
  // No upgrade, no close event: count the failed cycle here.
  if (!check(res, { 'upgraded (101)': (r) => r && r.status === 101 })) cycleOk.add(false);
}
