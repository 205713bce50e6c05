/** What every command does first: tokens from the token API, and the roster every client is planned from. */
import { setTimeout as delay } from 'node:timers/promises';
import type { CommonOptions } from './options.ts';
import { loadPeople, type Roster } from './roster.ts';
import { TokenCache } from './tokens.ts';

/** `wsUrl`: one node's URL, or several separated by commas (a fleet's nodes, each client to one in turn). */
export async function prepareRoster(options: CommonOptions, wsUrl: string): Promise<Roster> {
  const cache = new TokenCache(options.tokenApi);
  const needPeople = options.tokens === 'both' || options.criteria === 'person';
  const people = needPeople ? loadPeople(options.peopleFile) : [];
  const [apiToken, personTokens] = await Promise.all([
    cache.apiToken(),
    Promise.all(options.tokens === 'both' ? people.map((person) => cache.personToken(person)) : []),
  ]);
  return {
    wsUrls: wsUrl.split(','),
    apiToken,
    personTokens,
    customerIds: people.map((person) => person.customerId),
    event: options.event,
    criteria: options.criteria,
  };
}

/** Wait `ms`, or less if `signal` fires (Ctrl-C ends a hold early, and the run still reports). */
export async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return;
  await delay(ms, undefined, { signal }).catch(() => undefined);
}
