/**
 * This node's side of session control: its connections by person, their tokens' expiry (a notice, then 4001),
 * in-band REFRESH, and closing the connections of a person or an API user when the fleet says so. The transport
 * tells it of every connection that opens and closes; the hub still owns the connections and their subscriptions.
 */
import { CloseCode, ErrorCode, encodeFrame, encodeTokenExpiring, type RefreshFrame, type WireError } from '@herald/protocol';
import { isRevoked, type Authenticator, type RevocationList, type VerifiedPersonToken } from '../auth/authenticator.ts';
import { GatewayError } from '../errors.ts';
import type { Hub } from '../hub/hub.ts';
import { addTo, membersOf, removeFrom, type OneOrMany } from '../hub/one-or-many.ts';
import type { Session } from '../hub/session.ts';
import type { Metrics } from '../metrics.ts';
import { textFrame } from '../wire/frames.ts';
import type { Webhooks } from '../webhooks.ts';
import { ExpiryQueue } from './expiry.ts';
import type { Subject } from './subjects.ts';

export interface LocalSessionsOptions {
  hub: Hub;
  authenticator: Authenticator;
  /** What the authenticator checks tokens against: checked again as a connection opens (below). */
  revocations: RevocationList;
  metrics: Metrics;
  /** TOKEN_EXPIRING is sent this long before a connection's tokens expire (auth.expiryNoticeMs). */
  expiryNoticeMs: number;
  /** The back end's connect and disconnect webhooks, when configured. */
  webhooks: Webhooks | undefined;
}

/** A reply to a frame: its text, and the errors it carries (counted by the transport). */
export interface FrameAnswer {
  text: string;
  errors: readonly WireError[];
}

/** What the transport tells of each connection and asks of REFRESH frames. */
export interface SessionHooks {
  opened(session: Session): void;
  closed(session: Session, code: number): void;
  refresh(session: Session, frame: RefreshFrame): FrameAnswer;
}

export class LocalSessions implements SessionHooks {
  readonly #options: LocalSessionsOptions;
  /** Person key -> their connections here (most people have one: see one-or-many.ts). */
  readonly #people = new Map<string, OneOrMany<Session>>();
  readonly #expiry: ExpiryQueue<Session>;

  constructor(options: LocalSessionsOptions) {
    this.#options = options;
    const { metrics } = options;
    this.#expiry = new ExpiryQueue<Session>({
      noticeMs: options.expiryNoticeMs,
      handler: {
        notice: (session, expiresAt) => {
          if (session.closed) return;
          metrics.expiryNotices.inc();
          options.hub.send(session, textFrame(encodeTokenExpiring(expiresAt)), 'reply');
        },
        expire: (session) => {
          if (session.closed) return;
          metrics.sessionsExpired.inc();
          this.#close(session, CloseCode.TOKEN_EXPIRED, ErrorCode.TOKEN_EXPIRED);
        },
      },
    });
  }

  start(): void {
    this.#expiry.start();
  }

  close(): void {
    this.#expiry.close();
  }

  opened(session: Session): void {
    const { person } = session;
    if (person !== undefined) this.#people.set(person.key, addTo(this.#people.get(person.key), session));
    this.#expiry.add(session);
    this.#options.webhooks?.connected(session);
    // A revocation that arrived between this connection's token check and now found nothing here to close.
    if (this.#revoked(session)) this.#close(session, CloseCode.TOKEN_REVOKED, ErrorCode.TOKEN_REVOKED);
  }

  #revoked({ apiToken, personToken }: Session): boolean {
    const { revocations } = this.#options;
    if (isRevoked(revocations.apiUserRevokedAt(apiToken.user.name), apiToken.issuedAt)) return true;
    return personToken !== undefined && isRevoked(revocations.personRevokedAt(personToken.person.key), personToken.issuedAt);
  }

  closed(session: Session, code: number): void {
    const { person } = session;
    if (person !== undefined) {
      const left = removeFrom(this.#people.get(person.key), session);
      if (left === undefined) this.#people.delete(person.key);
      else this.#people.set(person.key, left);
    }
    this.#expiry.remove(session);
    this.#options.webhooks?.disconnected(session, code);
  }

  /**
   * New tokens for an open connection: the same API user and person, verified as at the handshake. The connection
   * takes them only if they last longer than what it holds (tokens that expire sooner would shorten nothing the
   * client could not already do); either way it is told until when it may stay. A refusal leaves it as it was.
   */
  refresh(session: Session, frame: RefreshFrame): FrameAnswer {
    const { metrics } = this.#options;
    try {
      const { apiToken, personToken } = this.#verified(session, frame);
      const expiresAt = personToken === undefined ? apiToken.expiresAt : Math.min(apiToken.expiresAt, personToken.expiresAt);
      if (expiresAt > session.expiresAt) {
        session.apiToken = apiToken;
        session.personToken = personToken;
      }
      metrics.refreshes.inc({ result: 'accepted' });
      return { text: encodeFrame({ type: 'REFRESH', response: { expiresAt: session.expiresAt } }), errors: [] };
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      metrics.refreshes.inc({ result: 'refused' });
      const errors = [error.toWire()];
      return { text: encodeFrame({ type: 'REFRESH', errors }), errors };
    }
  }

  #verified(session: Session, { apiToken, personToken }: RefreshFrame) {
    const { authenticator } = this.#options;
    const api = authenticator.verifyApiToken(apiToken);
    if (api.user.name !== session.apiUser.name) {
      throw new GatewayError('TOKEN_MISMATCH', `this connection is API user ${session.apiUser.name}'s, not ${api.user.name}'s`);
    }
    const { person } = session;
    if (person === undefined) {
      if (personToken !== undefined) throw new GatewayError('TOKEN_MISMATCH', 'this connection has no person: send no personToken');
      return { apiToken: api, personToken: undefined };
    }
    if (personToken === undefined) {
      throw new GatewayError('PERSON_TOKEN_REQUIRED', `this connection is person ${person.key}'s: send their personToken too`);
    }
    const verified: VerifiedPersonToken = authenticator.verifyPersonToken(personToken);
    if (verified.person.key !== person.key) {
      throw new GatewayError('TOKEN_MISMATCH', `this connection is person ${person.key}'s, not ${verified.person.key}'s`);
    }
    return { apiToken: api, personToken: verified };
  }

  /** The open connections here of a person or an API user (an API user's: found by looking at every connection). */
  *of(subject: Subject): Generator<Session> {
    const sessions = subject.kind === 'person' ? membersOf(this.#people.get(subject.key)) : this.#options.hub.sessions;
    for (const session of sessions) {
      if (!session.closed && (subject.kind === 'person' || session.apiUser.name === subject.name)) yield session;
    }
  }

  /** How many open connections here are a person's or an API user's. */
  count(subject: Subject): number {
    let count = 0;
    for (const _ of this.of(subject)) count++;
    return count;
  }

  /**
   * Close the subject's connections here, those whose token of that subject was issued at or before `issuedUntil`
   * (a revocation; Infinity: all of them, a disconnect); answers how many.
   */
  closeAll(subject: Subject, code: number, reason: string, issuedUntil = Infinity): number {
    let closed = 0;
    for (const session of [...this.of(subject)]) {
      const token = subject.kind === 'person' ? session.personToken : session.apiToken;
      if (token === undefined || !isRevoked(issuedUntil, token.issuedAt)) continue;
      this.#close(session, code, reason);
      closed++;
    }
    return closed;
  }

  #close(session: Session, code: number, reason: string): void {
    this.#options.hub.close(session);
    session.end(code, reason);
  }
}
