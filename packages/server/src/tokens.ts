/**
 * The API user's token for every call: logged in for with the API user's credentials, refreshed (the token API's
 * REFRESH) once most of its life is spent, logged in for again when a refresh is refused or a call finds the token
 * refused (expired, revoked). A token given as it is (apiToken) is used until refused, and never renewed.
 */
import { tokenPath } from '@herald/protocol';
import { request, withRetries, type CallOptions } from './calls.ts';
import { HeraldServerError } from './errors.ts';

export interface Credentials {
  u: string;
  p: string;
}

/** A token is renewed once this share of its life is spent (or less than a minute is left). */
const RENEW_AT = 0.8;
const RENEW_MARGIN_MS = 60_000;

interface Held {
  token: string;
  refreshToken: string | undefined;
  renewAt: number;
}

export class ApiTokens {
  readonly #options: CallOptions;
  readonly #url: string;
  readonly #credentials: Credentials | undefined;
  #held: Held | undefined;
  #getting: Promise<Held> | undefined;

  constructor(options: CallOptions, baseUrl: string, userPath: string, source: { credentials: Credentials } | { apiToken: string }) {
    this.#options = options;
    this.#url = `${baseUrl}${tokenPath(userPath)}`;
    if ('credentials' in source) this.#credentials = source.credentials;
    else this.#held = { token: source.apiToken, refreshToken: undefined, renewAt: Infinity };
  }

  /** The token to call with: the one held, renewed first when due (one renewal at a time, however many callers). */
  async current(): Promise<string> {
    const held = this.#held;
    if (held !== undefined && Date.now() < held.renewAt) return held.token;
    this.#getting ??= this.#renew(held).finally(() => (this.#getting = undefined));
    return (await this.#getting).token;
  }

  /** A call found `token` refused: the next current() logs in again (false: nothing to log in with). */
  refused(token: string): boolean {
    if (this.#credentials === undefined) return false;
    if (this.#held?.token === token) this.#held = undefined;
    return true;
  }

  async #renew(held: Held | undefined): Promise<Held> {
    if (held?.refreshToken !== undefined) {
      const refreshed = await this.#grant({ authTokenType: 'REFRESH', refreshToken: held.refreshToken }).catch(() => undefined);
      if (refreshed !== undefined) return (this.#held = refreshed);
    }
    if (this.#credentials === undefined) throw new HeraldServerError(401, [], 'the API user token was refused, and no credentials were given to log in again');
    return (this.#held = await this.#grant({ authTokenType: 'AM', authTokenAM: this.#credentials }));
  }

  async #grant(body: object): Promise<Held> {
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
    const { body: answer } = await withRetries(this.#options, () => request(this.#options, this.#url, init));
    const { token, refresh_token: refreshToken, expires_in: expiresIn } = answer.data as { token: string; refresh_token?: string; expires_in: number };
    const lifeMs = expiresIn * 1000;
    return { token, refreshToken, renewAt: Date.now() + Math.min(lifeMs * RENEW_AT, lifeMs - RENEW_MARGIN_MS) };
  }
}
