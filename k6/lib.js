// Shared by the k6 scripts: where the gateway is, the people who log in, tokens, and the frames.
//
//   BASE_URL      HTTP base of the gateway or its load balancer (default http://localhost:38246)
//   WS_URL        WebSocket base (default: BASE_URL with ws:// for http://)
//   API_URL       HTTP base of the back end's API, for emits (default BASE_URL; docker compose: http://localhost:38247)
//   USER_PATH     the config's userPath (default bench)
//   API_USER, API_PASSWORD   the API user (default bench / bench, as in the default config)
//   PEOPLE_FILE   JSON array of people (default ../packages/gateway/data/customers.json, the 10 customers)
import http from 'k6/http';
import { fail } from 'k6';

export const BASE_URL = (__ENV.BASE_URL || 'http://localhost:38246').replace(/\/+$/, '');
export const WS_URL = (__ENV.WS_URL || BASE_URL.replace(/^http/, 'ws')).replace(/\/+$/, '');
export const API_URL = (__ENV.API_URL || BASE_URL).replace(/\/+$/, '');
export const USER_PATH = __ENV.USER_PATH || 'bench';
const API_USER = __ENV.API_USER || 'bench';
const API_PASSWORD = __ENV.API_PASSWORD || 'bench';

// Each row logs in with first_name / last_name (the `customers` token generator: a demo person's password is
// their last name, which the gateway holds only as a scrypt hash in password_hash) and may register
// order-updates only with criteria.recipientId equal to its customer_id. open() runs in the init context.
const people = JSON.parse(open(__ENV.PEOPLE_FILE || '../packages/gateway/data/customers.json'));

const JSON_HEADERS = { 'content-type': 'application/json' };

function token(body) {
  const res = http.post(`${BASE_URL}/api/system-api/${USER_PATH}/token`, JSON.stringify(body), {
    headers: JSON_HEADERS,
    tags: { name: 'token' },
  });
  if (res.status !== 200) fail(`token request failed: HTTP ${res.status} ${res.body}`);
  return res.json('data.token');
}

/** For setup(): the API user's token and one person token per person. Tokens live an hour (tokenTtlSeconds). */
export function fetchTokens() {
  const api = token({ authTokenType: 'AM', authTokenAM: { u: API_USER, p: API_PASSWORD } });
  const persons = people.map((row) => ({
    recipientId: row.customer_id,
    token: token({
      authTokenType: 'AM_DB',
      authTokenAMDB: { generator: 'customers', u: row.first_name, p: row.last_name },
    }),
  }));
  return { api, persons };
}

/** The person a VU plays: VUs take the people in turn. */
export function personFor(tokens, vu) {
  return tokens.persons[(vu - 1) % tokens.persons.length];
}

export function wsUrl(tokens, person) {
  return `${WS_URL}/?x-am-authorization=${encodeURIComponent(tokens.api)}` +
    `&x-am-user-authorization=${encodeURIComponent(person.token)}`;
}

/** REGISTER for this person's order-updates. */
export function registerFrame(person) {
  return JSON.stringify({
    objType: 'REGISTER',
    onEvents: [
      {
        eventType: 'CUSTOM_WS_EVENTS',
        apiName: 'order-updates',
        condition: { conditionType: 'RESPONSE', criteria: { recipientId: person.recipientId } },
      },
    ],
  });
}

/** True when a REGISTER reply accepted every entry. */
export function registered(frame) {
  return frame.type === 'REGISTER' && frame.response.invalidOnEvents.length === 0 &&
    frame.response.validOnEvents.length > 0;
}

/** POST emit-event-ws as the application's back end would. */
export function emit(tokens, name, eventData) {
  return http.post(`${API_URL}/api/system-api/${USER_PATH}/emit-event-ws`, JSON.stringify({ name, eventData }), {
    headers: { ...JSON_HEADERS, 'x-am-authorization': tokens.api },
    tags: { name: 'emit' },
  });
}
