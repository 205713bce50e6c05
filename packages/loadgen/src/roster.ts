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
  wsUrl: string;
  apiToken: string;
  /** One token per person, in people order; empty with --tokens api. */
  personTokens: string[];
  customerIds: string[];
  /** The event each client registers; undefined: clients only connect. */
  event: string | undefined;
  criteria: CriteriaMode;
}

export interface ClientPlan {
  url: string;
  /** The event it registers, if any, and its REGISTER frame to send after CONNECTED. */
  event: string | undefined;
  register: string | undefined;
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

export function planClient(roster: Roster, index: number): ClientPlan {
  const personToken = roster.personTokens.length > 0 ? roster.personTokens[index % roster.personTokens.length] : undefined;
  const query = personToken === undefined
    ? `?x-am-authorization=${roster.apiToken}`
    : `?x-am-authorization=${roster.apiToken}&x-am-user-authorization=${personToken}`;
  const recipient = recipientOf(roster, index);
  const register = roster.event === undefined ? undefined : registerFrame(roster.event, recipient || undefined);
  return { url: `${roster.wsUrl.replace(/\/$/, '')}/${query}`, event: roster.event, register, recipient };
}
