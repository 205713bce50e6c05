/**
 * The WebSocket transport: owns sockets from upgrade to close. The upgrade runs through fastify's routing
 * (@fastify/websocket), so token checks are an onRequest hook; frames are parsed here and turned into hub calls.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import {
  API_TOKEN_QUERY,
  CONNECTED_FRAME,
  CloseCode,
  ErrorCode,
  encodeErrors,
  encodeFrame,
  parseClientFrame,
  parseEventId,
  parseOnEvent,
  PERSON_TOKEN_QUERY,
  StandardCloseCode,
  type FrameLimits,
  type Parsed,
  type RawClientFrame,
  type InvalidOnEvent,
  type ValidOnEvent,
  type WireError,
  type RefreshFrame,
} from '@herald/protocol';
import type { Authenticator, VerifiedApiToken, VerifiedPersonToken } from '../auth/authenticator.ts';
import type { CanConnectGate } from '../code/gate.ts';
import { GatewayError, type Contain } from '../errors.ts';
import type { EventCatalogue } from '../events/catalogue.ts';
import type { Hub } from '../hub/hub.ts';
import { Session, type SessionHandler } from '../hub/session.ts';
import type { Metrics } from '../metrics.ts';
import type { SessionHooks } from '../session/local.ts';
import { textFrame, writeFrame } from '../wire/frames.ts';
import { compactListeners, releaseHttpObjects, shareNoExtensions } from '../wire/ws-private.ts';
import { slotOf, type Slot } from './admission.ts';

type Identity =
  | { ok: true; apiToken: VerifiedApiToken; personToken: VerifiedPersonToken | undefined }
  | { ok: false; error: GatewayError };

declare module 'fastify' {
  interface FastifyRequest {
    identity: Identity | null;
  }
}

const CLOSE_FOR: Partial<Record<ErrorCode, CloseCode>> = {
  TOKEN_MISSING: CloseCode.TOKEN_MISSING,
  TOKEN_EXPIRED: CloseCode.TOKEN_EXPIRED,
  TOKEN_REVOKED: CloseCode.TOKEN_REVOKED,
};

// Socket listeners are module functions that find their session on the socket: a node holds tens of
// thousands of sockets, and closures per connection would cost memory on each.
const kSession = Symbol('herald.session');
/** CONNECTED, the same frame for every client, built once. */
const CONNECTED = textFrame(CONNECTED_FRAME);
/** The ping sweep runs in ticks this far apart, each pinging its share of the clients. */
const PING_TICK_MS = 100;
/**
 * Frames of one client waiting for their answers (they are answered one after another) before its socket stops being
 * read: a client that sends faster than the node answers is held back by TCP, not queued in the node's memory.
 */
const MAX_FRAMES_IN_FLIGHT = 16;
/** Close codes in the herald_connections_closed_total label as they are; any other a client sends is put in a class. */
const KNOWN_CLOSE_CODES: ReadonlySet<number> = new Set([...Object.values(StandardCloseCode), ...Object.values(CloseCode)]);

/** A label value for a close code: bounded, whatever codes clients send. */
export function closeCodeLabel(code: number): string {
  return KNOWN_CLOSE_CODES.has(code) ? String(code) : `other_${Math.floor(code / 1000)}xxx`;
}
type SessionSocket = WebSocket & { [kSession]?: Session };

function onMessage(this: SessionSocket, data: RawData): void {
  const session = this[kSession];
  session?.handler.onFrame(session, data);
}

function onClose(this: SessionSocket, code: number): void {
  const session = this[kSession];
  session?.handler.onClose(session, code);
}

function onPong(this: SessionSocket, payload: Buffer): void {
  const session = this[kSession];
  session?.handler.onPong(session, payload);
}

/** Socket errors (resets, frames over maxPayload) end in a 'close' event; unlistened, they would crash the node. */
function onError(): void {}

export interface TransportOptions {
  authenticator: Authenticator;
  /** Counts and logs a throw met while answering a frame (its client is closed with 1011; nothing else is). */
  contain: Contain;
  /** Bounds on a client frame (config websocket.maxEntriesPerFrame, maxCriteriaValueBytes). */
  frameLimits: FrameLimits;
  catalogue: EventCatalogue;
  /** Runs events' can-connect code. */
  gate: CanConnectGate;
  hub: Hub;
  metrics: Metrics;
  pingIntervalMs: number;
  /** Told of every connection that opens and closes; answers REFRESH frames (session/local.ts). */
  sessions: SessionHooks;
}

export class WebSocketTransport implements SessionHandler {
  readonly #options: TransportOptions;
  #pingTimer: NodeJS.Timeout | undefined;
  /** Where the ping sweep's round stands: the clients not yet pinged in it, in the hub's order. */
  #sweep: Iterator<Session> | undefined;
  /** Clients the sweep owes a ping: its share of each tick, in fractions. */
  #pingCredit = 0;
  /** Each admission slot held until its session's first REGISTER is answered (admission releases it on a close). */
  readonly #slots = new WeakMap<Session, Slot>();

  constructor(options: TransportOptions) {
    this.#options = options;
  }

  /** Add the WebSocket route at `/` to an app that has @fastify/websocket registered, and start pinging. */
  route(app: FastifyInstance): void {
    app.decorateRequest('identity', null);
    app.route({
      method: 'GET',
      url: '/',
      onRequest: async (request) => {
        if (!request.ws) return;
        request.identity = this.#identify(request);
        // The 101 response and the first frame leave in one write system call, not two: #accept uncorks once
        // it has written that frame, and a refused upgrade ends the socket, which uncorks it too.
        request.raw.socket.cork();
      },
      handler: async () => ({ name: 'herald', websocket: `connect with ?${API_TOKEN_QUERY}=<API user token>` }),
      wsHandler: (socket, request) => this.#accept(socket, request),
    });
    const ticks = Math.max(1, Math.round(this.#options.pingIntervalMs / PING_TICK_MS));
    this.#pingTimer = setInterval(() => this.#pingShare(ticks), this.#options.pingIntervalMs / ticks);
    this.#pingTimer.unref();
    app.addHook('onClose', async () => clearInterval(this.#pingTimer));
  }

  onFrame(session: Session, data: RawData): void {
    try {
      this.#answerInTurn(session, parseClientFrame(data.toString(), this.#options.frameLimits));
    } catch (error) {
      this.#failFrame(session, error);
    }
  }

  /** Any pong shows the client alive; a lag probe's also says how far behind it is. */
  onPong(session: Session, payload: Buffer): void {
    session.alive = true;
    if (payload.length > 0) this.#options.hub.lag.answered(session, payload);
  }

  onClose(session: Session, code: number): void {
    this.#options.metrics.closes.inc({ code: closeCodeLabel(code) });
    this.#options.hub.close(session);
    this.#options.sessions.closed(session, code);
  }

  /** Frames are answered one after another, in order; a client with too many waiting is not read meanwhile. */
  #answerInTurn(session: Session, parsed: Parsed<RawClientFrame>): void {
    const answer = async (): Promise<void> => {
      if (!parsed.ok) return this.#reply(session, encodeErrors('ERROR', parsed.errors), parsed.errors);
      const frame = parsed.value;
      if (frame.objType === 'REFRESH') return this.#refresh(session, frame);
      if (frame.objType === 'UNREGISTER') return this.#unregister(session, frame.onEvents);
      return this.#register(session, frame.onEvents);
    };
    const reply = (session.replying ?? Promise.resolve()).then(answer).catch((error: unknown) => this.#failFrame(session, error));
    session.replying = reply;
    if (++session.framesInFlight === MAX_FRAMES_IN_FLIGHT) {
      this.#options.metrics.framesPaused.inc();
      session.socket.pause();
    }
    void reply.then(() => {
      if (session.replying === reply) session.replying = undefined;
      if (session.framesInFlight-- === MAX_FRAMES_IN_FLIGHT) session.socket.resume();
    });
  }

  /**
   * A throw while answering a frame is the node's fault, not the client's: it is counted and logged, and that one
   * client is told (ERROR, INTERNAL) and closed (1011, reconnect), so that whatever state the frame left half-done
   * goes with it. Nothing else is touched.
   */
  #failFrame(session: Session, error: unknown): void {
    this.#options.contain('frame', error);
    const errors = [{ code: ErrorCode.INTERNAL, message: 'the node failed to answer this frame: reconnect' }];
    this.#reply(session, encodeErrors('ERROR', errors), errors);
    this.#options.hub.close(session);
    if (session.socket.readyState === session.socket.OPEN) session.socket.close(CloseCode.INTERNAL_ERROR, 'internal error');
  }

  #identify(request: FastifyRequest): Identity {
    const query = request.query as Record<string, unknown>;
    const apiToken = query[API_TOKEN_QUERY];
    const personToken = query[PERSON_TOKEN_QUERY];
    const { authenticator } = this.#options;
    try {
      if (Array.isArray(apiToken) || Array.isArray(personToken)) {
        throw new GatewayError('TOKEN_INVALID', 'each token may be given once');
      }
      if (typeof apiToken !== 'string' || apiToken.length === 0) {
        throw new GatewayError('TOKEN_MISSING', `${API_TOKEN_QUERY} (the API user token) is required`);
      }
      const verifiedApi = authenticator.verifyApiToken(apiToken);
      const hasPerson = typeof personToken === 'string' && personToken.length > 0;
      return { ok: true, apiToken: verifiedApi, personToken: hasPerson ? authenticator.verifyPersonToken(personToken) : undefined };
    } catch (error) {
      if (error instanceof GatewayError) return { ok: false, error };
      throw error;
    }
  }

  #accept(socket: SessionSocket, request: FastifyRequest): void {
    // @fastify/websocket's own error listener closes over the request and reply, which would keep them alive
    // as long as the socket; ours holds nothing. Errors (resets, 1009) still end in a counted 'close'.
    socket.removeAllListeners('error');
    socket.on('error', onError);
    releaseHttpObjects(request.raw.socket);
    const identity = request.identity;
    const slot = slotOf(request.raw);
    if (identity?.ok) this.#open(socket, identity, slot);
    else this.#refuse(socket, identity, slot);
    request.raw.socket.uncork();
  }

  /** Tokens refused: TOKEN_VALIDATION with the error, then the close code that tells the client whether to retry. */
  #refuse(socket: SessionSocket, identity: (Identity & { ok: false }) | null, slot: Slot | undefined): void {
    const { metrics } = this.#options;
    slot?.release();
    const error = identity?.error ?? new GatewayError('INTERNAL', 'the handshake was not authenticated');
    const code = CLOSE_FOR[error.code] ?? CloseCode.TOKEN_INVALID;
    metrics.refusals.inc({ code: error.code });
    metrics.closes.inc({ code: closeCodeLabel(code) });
    writeFrame(socket, textFrame(encodeErrors('TOKEN_VALIDATION', [error.toWire()])));
    socket.close(code, error.code);
  }

  #open(socket: SessionSocket, identity: Identity & { ok: true }, slot: Slot | undefined): void {
    const { hub } = this.#options;
    const session = new Session(socket, identity.apiToken, identity.personToken, this);
    if (slot) this.#slots.set(session, slot);
    socket[kSession] = session;
    socket.on('message', onMessage);
    socket.on('close', onClose);
    socket.on('pong', onPong);
    compactListeners(socket);
    shareNoExtensions(socket);
    hub.open(session);
    writeFrame(socket, CONNECTED);
    this.#options.sessions.opened(session);
  }

  /**
   * A reply is one buffer (frames.ts), written within the client's send bound like a notification. Then what the hub
   * held for the reply to go first (an event with history's replay and notifications) follows it.
   */
  #reply(session: Session, frame: string, errors: readonly WireError[]): void {
    for (const { code } of errors) this.#options.metrics.refusals.inc({ code });
    this.#options.hub.send(session, textFrame(frame), 'reply');
    this.#options.hub.replied(session);
  }

  /** New tokens for the connection (session/local.ts); its subscriptions stay as they are. */
  #refresh(session: Session, frame: RefreshFrame): void {
    const { text, errors } = this.#options.sessions.refresh(session, frame);
    this.#reply(session, text, errors);
  }

  async #register(session: Session, entries: unknown[]): Promise<void> {
    const outcomes = await Promise.all(entries.map((entry) => this.#registerOne(session, entry)));
    const validOnEvents: ValidOnEvent[] = [];
    const invalidOnEvents: InvalidOnEvent[] = [];
    for (const outcome of outcomes) {
      if ('errors' in outcome) invalidOnEvents.push(outcome);
      else validOnEvents.push(outcome);
    }
    const frame = encodeFrame({ type: 'REGISTER', response: { validOnEvents, invalidOnEvents } });
    this.#reply(session, frame, invalidOnEvents.flatMap((entry) => entry.errors));
    // The first REGISTER answered ends the handshake: the next client may come in.
    this.#slots.get(session)?.release();
    this.#slots.delete(session);
  }

  async #registerOne(session: Session, entry: unknown): Promise<ValidOnEvent | InvalidOnEvent> {
    const parsed = parseOnEvent(entry, this.#options.frameLimits);
    if (!parsed.ok) return invalid(entry, parsed.errors);
    const onEvent = parsed.value;
    try {
      this.#options.catalogue.checkRegistration(onEvent, session.apiUser, session.person);
      await this.#options.gate.check(onEvent, session.apiUser, session.person);
      return await this.#options.hub.subscribe(session, onEvent);
    } catch (error) {
      if (error instanceof GatewayError) return invalid(entry, [error.toWire()]);
      throw error;
    }
  }

  #unregister(session: Session, entries: unknown[]): void {
    const validOnEvents: { eventId: string }[] = [];
    const invalidOnEvents: InvalidOnEvent[] = [];
    for (const entry of entries) {
      const parsed = parseEventId(entry);
      if (!parsed.ok) invalidOnEvents.push(invalid(entry, parsed.errors));
      else if (this.#options.hub.unsubscribe(session, parsed.value)) validOnEvents.push({ eventId: parsed.value });
      else {
        const message = `this connection holds no subscription ${parsed.value}`;
        invalidOnEvents.push(invalid(entry, [{ code: ErrorCode.UNKNOWN_EVENT_ID, message }]));
      }
    }
    const frame = encodeFrame({ type: 'UNREGISTER', response: { validOnEvents, invalidOnEvents } });
    this.#reply(session, frame, invalidOnEvents.flatMap((entry) => entry.errors));
  }

  /**
   * One tick of the ping sweep: the next 1/ticks of the clients, so that each is pinged once an interval (one that
   * has not answered the previous ping is closed) and the sweep never holds the node. Pinged all at once, a node's
   * clients held every emit back: a write system call each, then as many pongs to read (docs/architecture.md,
   * "Measured costs"). The share is counted in fractions (at 10 clients, one every 6 s), and a round that ends starts
   * the next.
   */
  #pingShare(ticks: number): void {
    const { sessions } = this.#options.hub;
    this.#pingCredit += sessions.size / ticks;
    for (; this.#pingCredit >= 1; this.#pingCredit--) {
      let next = (this.#sweep ??= sessions.values()).next();
      if (next.done) next = (this.#sweep = sessions.values()).next();
      if (next.done) {
        this.#pingCredit = 0; // no client: none is owed a ping
        return;
      }
      this.#ping(next.value);
    }
  }

  #ping(session: Session): void {
    if (session.closed) return;
    if (session.alive) {
      session.alive = false;
      session.socket.ping();
      return;
    }
    this.#options.metrics.pingTimeouts.inc();
    this.#options.hub.close(session);
    // The close frame is a courtesy to a peer that is only slow; terminate frees the socket now.
    session.socket.close(CloseCode.PING_TIMEOUT, 'no pong to the last ping');
    session.socket.terminate();
  }
}

function invalid(entry: unknown, errors: WireError[]): InvalidOnEvent {
  const fields = typeof entry === 'object' && entry !== null && !Array.isArray(entry) ? entry : { entry };
  return { ...fields, errors };
}
