/**
 * Who client i is: its tokens, what it registers, and the recipientId an emit must name to reach it.
 *
 * The gateway's default data has 10 people, and `order-updates` binds recipientId to the person's customer_id,
 * so real per-person subscriptions come in 10 routes only. For large counts, `announcements` (no bind)
 * registered with criteria recipientId = i gives one route per client, the cost of a per-person subscription.
 *
 *   criteria 'person'  recipientId = the customer_id of person i mod P   (what order-updates needs)
 *   criteria 'client'  recipientId = i                                   (--per-client)
 *   criteria 'none'    no criteria: every emit of the event reaches it   (a broadcast audience)
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { API_TOKEN_QUERY, PERSON_TOKEN_QUERY } from '@herald/protocol';
import { registerFrame } from './frames.ts';

export type CriteriaMode = 'person' | 'client' | 'none';
export type TokenMode = 'api' | 'both';

/** A person of the gateway's data: login and customer_id. */
export interface Person {
  username: string;
  password: string;
  customerId: string;
}

/** What every client of a run has in common; plain data, so that worker processes get it over IPC. */
export interface Roster {
  /** The nodes' WebSocket URLs: client i connects to wsUrls[i mod their number] (one URL per node of a fleet). */
  wsUrls: string[];
  apiToken: string;
  /** One token per person, in people order; empty with --tokens api. */
  personTokens: string[];
  customerIds: string[];
  /** The event each client registers; undefined: clients only connect. */
  event: string | undefined;
  criteria: CriteriaMode;
}

/**
 * One client's plan. A load process holds tens of thousands, so what clients share is shared: the URL (the node's,
 * with the person's tokens: ~550 bytes) is one string per node and person, and the REGISTER frame is built when it
 * is sent (registerFrameOf), not kept.
 */
export interface ClientPlan {
  url: string;
  /** The event to REGISTER after CONNECTED; undefined: the client only connects. */
  event: string | undefined;
  /** The key an emit's recipientId must equal to reach this client; '' for a criteria-less subscription. */
  recipient: string | undefined;
}

/** The customers of the gateway's embedded default config (as k6/lib.js reads them). */
export const DEFAULT_PEOPLE_FILE = fileURLToPath(new URL('../data/customers.json', import.meta.resolve('@herald/gateway')));

/**
 * The people of `file`, a JSON array of rows: each logs in with its first_name and, as the gateway's demo people do,
 * its last_name for a password (the gateway stores only the password's hash, in password_hash).
 */
export function loadPeople(file: string = DEFAULT_PEOPLE_FILE): Person[] {
  const rows = JSON.parse(readFileSync(file, 'utf8')) as Array<Record<string, unknown>>;
  return rows.map((row) => ({
    username: String(row.first_name),
    password: String(row.last_name),
    customerId: String(row.customer_id),
  }));
}

export function recipientOf(roster: Roster, index: number): string | undefined {
  if (roster.event === undefined) return undefined;
  switch (roster.criteria) {
    case 'person':
      return roster.customerIds[index % roster.customerIds.length];
    case 'client':
      return String(index);
    case 'none':
      return '';
  }
}

/** Per roster: the URL of each node for each person (or for the API user alone), made once. */
const urlsOf = new WeakMap<Roster, string[][]>();

function urlOf(roster: Roster, index: number): string {
  let urls = urlsOf.get(roster);
  if (!urls) {
    const queries = roster.personTokens.length === 0
      ? [`?${API_TOKEN_QUERY}=${roster.apiToken}`]
      : roster.personTokens.map((token) => `?${API_TOKEN_QUERY}=${roster.apiToken}&${PERSON_TOKEN_QUERY}=${token}`);
    urls = roster.wsUrls.map((wsUrl) => queries.map((query) => `${wsUrl.replace(/\/$/, '')}/${query}`));
    urlsOf.set(roster, urls);
  }
  const node = urls[index % urls.length]!;
  return node[index % node.length]!;
}

export function planClient(roster: Roster, index: number): ClientPlan {
  return { url: urlOf(roster, index), event: roster.event, recipient: recipientOf(roster, index) };
}

/** The REGISTER frame of a client's plan, when it registers. */
export function registerFrameOf(plan: ClientPlan): string | undefined {
  return plan.event === undefined ? undefined : registerFrame(plan.event, plan.recipient || undefined);
}
