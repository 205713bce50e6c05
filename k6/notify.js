// Notify: LISTENERS clients stay connected, each registered for one person's order-updates (the 10
// customers in turn); an HTTP emitter sends RATE emits per second, each to one person, carrying the time
// it was sent in eventData.sentAt. Each listener records now - sentAt when the NOTIFICATION arrives: the
// delivery latency, through the load balancer, a node, the broker and the node holding the listener.
// Emitter and listeners run in one k6 process, so they read the same clock. How to run: k6/README.md.
//
//   LISTENERS (default 100)  connected clients
//   RATE (default 20)        emits per second (each reaches every listener of one person)
//   DURATION (default 1m)    how long the emitter runs
//   WARMUP (default 10s)     listeners connect and register before the first emit
//   plus BASE_URL, WS_URL, ... (k6/lib.js)
import ws from 'k6/ws';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';
import { emit as postEmit, fetchTokens, personFor, registerFrame, registered, wsUrl } from './lib.js';

const LISTENERS = Number(__ENV.LISTENERS || 100);
const WARMUP = __ENV.WARMUP || '10s';
const DURATION = __ENV.DURATION || '1m';

const deliveryMs = new Trend('herald_delivery_ms', true);
const received = new Counter('herald_notifications_received');
const sent = new Counter('herald_emits_sent');
const registerOk = new Rate('herald_register_ok');
const emitOk = new Rate('herald_emit_ok');

function seconds(text) {
  const m = /^(\d+)(ms|s|m|h)$/.exec(text);
  if (!m) throw new Error(`bad duration ${text} (use e.g. 500ms, 10s, 1m)`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
}

// Listeners stay until the emitter is done plus a little, so the last notifications are counted.
const HOLD_MS = (seconds(WARMUP) + seconds(DURATION) + 5) * 1000;

export const options = {
  scenarios: {
    listeners: {
      executor: 'per-vu-iterations',
      exec: 'listen',
      vus: LISTENERS,
      iterations: 1,
      maxDuration: `${Math.ceil(HOLD_MS / 1000) + 30}s`,
    },
    emitter: {
      executor: 'constant-arrival-rate',
      exec: 'emitOne',
      startTime: WARMUP,
      rate: Number(__ENV.RATE || 20),
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: 10,
      maxVUs: 100,
    },
  },
  thresholds: {
    herald_register_ok: ['rate>0.99'],
    herald_emit_ok: ['rate>0.99'],
    herald_delivery_ms: ['p(99)<50'],
  },
};

export function setup() {
  return fetchTokens();
}

export function listen(tokens) {
  const person = personFor(tokens, __VU);
  const res = ws.connect(wsUrl(tokens, person), {}, (socket) => {
    socket.on('message', (text) => {
      const frame = JSON.parse(text);
      if (frame.type === 'CONNECTED') {
        socket.send(registerFrame(person));
      } else if (frame.type === 'REGISTER') {
        registerOk.add(registered(frame));
      } else if (frame.type === 'NOTIFICATION') {
        const sentAt = Number(frame.response.eventData && frame.response.eventData.sentAt);
        if (sentAt > 0) deliveryMs.add(Date.now() - sentAt);
        received.add(1);
      } else if (frame.type === 'TOKEN_VALIDATION') {
        registerOk.add(false);
      }
    });
    socket.setTimeout(() => socket.close(), HOLD_MS);
  });
  check(res, { 'upgraded (101)': (r) => r && r.status === 101 });
}

let seq = 0;

export function emitOne(tokens) {
  // Emits go to the people in turn; `nodes` in the reply is how many nodes held a listener for that person.
  const person = personFor(tokens, __VU * 1000 + seq);
  seq += 1;
  const res = postEmit(tokens, 'order-updates', {
    recipientId: person.recipientId,
    sentAt: Date.now(),
    seq,
    status: 'shipped',
  });
  sent.add(1);
  emitOk.add(res.status === 200);
  check(res, { 'emit 200': (r) => r.status === 200 });
}
