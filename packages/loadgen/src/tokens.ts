/**
 * Tokens from the gateway's token API: the API user's once, and each person's once however many clients use
 * it. Tokens are signed by the gateway, so a load run cannot make its own.
 */
import { tokenPath } from '@herald/protocol';
import type { Person } from './roster.ts';

export interface TokenApi {
  /** http(s)://host:port of a node (or of the load balancer). */
  httpBase: string;
  userPath: string;
  apiUser: string;
  apiPassword: string;
  /** The token generator people log in with. */
  generator: string;
}

async function requestToken(api: TokenApi, body: object): Promise<string> {
  const response = await fetch(`${api.httpBase.replace(/\/$/, '')}${tokenPath(api.userPath)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const envelope = (await response.json()) as { data?: { token?: string }; errors?: Array<{ code: string; message: string }> };
  const token = envelope.data?.token;
  if (!token) throw new Error(`token API refused (${response.status}): ${envelope.errors?.map((e) => `${e.code} ${e.message}`).join('; ')}`);
  return token;
}

export class TokenCache {
  readonly #api: TokenApi;
  readonly #people = new Map<string, Promise<string>>();
  #apiToken: Promise<string> | undefined;

  constructor(api: TokenApi) {
    this.#api = api;
  }

  apiToken(): Promise<string> {
    const { apiUser: u, apiPassword: p } = this.#api;
    return (this.#apiToken ??= requestToken(this.#api, { authTokenType: 'AM', authTokenAM: { u, p } }));
  }

  personToken(person: Person): Promise<string> {
    let token = this.#people.get(person.username);
    if (!token) {
      const authTokenAMDB = { generator: this.#api.generator, u: person.username, p: person.password };
      token = requestToken(this.#api, { authTokenType: 'AM_DB', authTokenAMDB });
      this.#people.set(person.username, token);
    }
    return token;
  }
}
