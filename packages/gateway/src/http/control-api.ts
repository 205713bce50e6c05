/**
 * The control API, routes of the system API for the back end: disconnect and revoke a person or an API user on every
 * node, and presence. Only API users in a group of config `control.groups` may call it. Routes only translate: what
 * crosses the fleet is FleetControl's (session/fleet.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_TOKEN_HEADER, controlPaths, isRecord, quoted, utf8Length } from '@herald/protocol';
import type { Authenticator } from '../auth/authenticator.ts';
import { GatewayError } from '../errors.ts';
import type { FleetControl } from '../session/fleet.ts';
import { MAX_CLOSE_REASON_BYTES } from '../session/messages.ts';
import { personSubject, type Subject } from '../session/subjects.ts';
import { ok } from './envelope.ts';
import { tokenHeader } from './headers.ts';

export interface ControlApiOptions {
  userPath: string;
  authenticator: Authenticator;
  control: FleetControl;
  /** Groups whose API users may call it (config control.groups). */
  groups: readonly string[];
}

/** The reason a disconnect gives when the back end gives none. */
export const DEFAULT_DISCONNECT_REASON = 'disconnected by the back end';
/** Characters of a person's id (their login's `u`) or an event name the control API takes. */
const MAX_ID_LENGTH = 1024;
const NAME = /^[A-Za-z0-9_.-]{1,128}$/;

const bad = (message: string): GatewayError => new GatewayError('BAD_REQUEST', message);

/** `{ "person": { "generator": "<name>", "id": "<id>" } }` or `{ "apiUser": "<name>" }`, exactly one. */
export function subjectOfBody(body: Record<string, unknown>): Subject {
  const { person, apiUser } = body;
  if ((person === undefined) === (apiUser === undefined)) throw bad('name exactly one of person ({ "generator", "id" }) and apiUser');
  if (apiUser !== undefined) {
    if (typeof apiUser !== 'string' || !NAME.test(apiUser)) throw bad(`apiUser must be an API user's name, got ${quoted(apiUser)}`);
    return { kind: 'apiUser', name: apiUser };
  }
  if (!isRecord(person)) throw bad('person must be { "generator": "<name>", "id": "<id>" }');
  const { generator, id } = person;
  if (typeof generator !== 'string' || !NAME.test(generator)) throw bad(`person.generator must be a token generator's name, got ${quoted(generator)}`);
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
    throw bad(`person.id must be a string of 1 to ${MAX_ID_LENGTH} characters (the sub of their tokens), got ${quoted(id)}`);
  }
  return personSubject(generator, id);
}

/** A disconnect's body: the subject, whether they may come back (default true), and the close reason. */
export function disconnectOf(body: unknown): { subject: Subject; reconnect: boolean; reason: string } {
  if (!isRecord(body)) throw bad('the body must be a JSON object');
  const { reconnect = true, reason = DEFAULT_DISCONNECT_REASON } = body;
  if (typeof reconnect !== 'boolean') throw bad(`reconnect must be true or false, got ${quoted(reconnect)}`);
  if (typeof reason !== 'string' || utf8Length(reason) > MAX_CLOSE_REASON_BYTES) {
    throw bad(`reason must be a string of at most ${MAX_CLOSE_REASON_BYTES} bytes (UTF-8): it is the close frame's reason`);
  }
  return { subject: subjectOfBody(body), reconnect, reason };
}

/** A presence query: `?person=<generator>:<id>` or `?event=<name>`, exactly one. */
export function presenceQueryOf(query: unknown): { subject: Subject } | { event: string } {
  const { person, event } = isRecord(query) ? query : {};
  if ((person === undefined) === (event === undefined)) throw bad('ask about exactly one of person=<generator>:<id> and event=<name>');
  if (event !== undefined) {
    if (typeof event !== 'string' || event.length === 0 || event.length > MAX_ID_LENGTH) throw bad(`event must be an event's name, got ${quoted(event)}`);
    return { event };
  }
  const text = typeof person === 'string' ? person : '';
  const colon = text.indexOf(':');
  return { subject: subjectOfBody({ person: { generator: text.slice(0, Math.max(colon, 0)), id: colon < 0 ? undefined : text.slice(colon + 1) } }) };
}

export function controlApi(app: FastifyInstance, { userPath, authenticator, control, groups }: ControlApiOptions): void {
  const paths = controlPaths(userPath);
  const allowed = new Set(groups);
  // A callback, as the emit's: whoever may not call it learns so before anything about its body.
  const authorize = (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void => {
    try {
      const token = tokenHeader(request, API_TOKEN_HEADER);
      if (token === undefined) throw new GatewayError('TOKEN_MISSING', `the ${API_TOKEN_HEADER} header (the API user token) is required`);
      const user = authenticator.verifyApiUser(token);
      if (![...user.groups].some((group) => allowed.has(group))) {
        throw new GatewayError('FORBIDDEN', `API user ${user.name} may not use the control API (config control.groups)`);
      }
    } catch (error) {
      return done(error as Error);
    }
    done();
  };

  app.post(paths.disconnect, { onRequest: authorize }, async (request) => {
    const { subject, reconnect, reason } = disconnectOf(request.body);
    return ok({ nodes: await control.disconnect(subject, reconnect, reason) });
  });

  app.post(paths.revoke, { onRequest: authorize }, async (request) => {
    if (!isRecord(request.body)) throw bad('the body must be a JSON object');
    return ok(await control.revoke(subjectOfBody(request.body)));
  });

  app.get(paths.presence, { onRequest: authorize }, async (request) => {
    const query = presenceQueryOf(request.query);
    const { count, nodes, complete, missing } = await control.presence(query);
    if ('event' in query) return ok({ event: query.event, subscribers: count, nodes, complete, missing });
    const { subject } = query;
    const person = subject.kind === 'person' ? { generator: subject.generator, id: subject.id } : undefined;
    return ok({ person, connected: count > 0, connections: count, nodes, complete, missing });
  });
}
