/**
 * One WebSocket to a node, from the handshake to its close, on the standard WebSocket (browsers, Node 22+).
 * The client makes a new one for every attempt; reconnecting is the client's business, not this one's.
 */
import { API_TOKEN_QUERY, PERSON_TOKEN_QUERY, StandardCloseCode, type ClientFrame, type NotificationFrame, type ServerFrame, type WireError } from '@herald/protocol';
import { Liveness } from './liveness.ts';
import type { Tokens } from './tokens.ts';

/** A NOTIFICATION as the wire has it (the client names it by handle and event before the application sees it). */
export type WireNotification = NotificationFrame['response'];

/** How a socket ended: the close code and reason, and the TOKEN_VALIDATION errors when the handshake was refused. */
export interface Ended {
  code: number;
  reason: string;
  errors: WireError[];
}

/** The gateway refused: TOKEN_VALIDATION at connect, or an ERROR frame, or the socket closed first. */
export class HeraldError extends Error {
  readonly errors: WireError[];
  readonly closeCode: number | undefined;

  constructor(message: string, errors: WireError[], closeCode?: number) {
    super(message);
    this.name = 'HeraldError';
    this.errors = errors;
    this.closeCode = closeCode;
  }
}

/** The liveness probe: an UNREGISTER of nothing, which every node answers and which changes nothing. */
const PROBE: ClientFrame = { objType: 'UNREGISTER', onEvents: [] };

export interface LivenessTiming {
  idleMs: number;
  timeoutMs: number;
}

export interface Timing {
  connectTimeoutMs: number;
  /** Undefined: no liveness check. */
  liveness: LivenessTiming | undefined;
}

export interface ConnectionHandlers {
  notification(notification: WireNotification): void;
  /** The socket closed; `connection.ended` says how. Called after `ready` and pending requests have been rejected. */
  closed(connection: Connection): void;
  /** A frame that answers nothing: not JSON, or an ERROR with no request waiting. */
  error(error: Error): void;
  /** The node says the connection's tokens expire at `expiresAt` (ms): REFRESH before then, or it closes with 4001. */
  expiring(expiresAt: number): void;
}

interface Waiter {
  resolve(frame: ServerFrame): void;
  reject(error: Error): void;
  /** Called with the reply as it is read, before the frames after it (the promise's reactions come later). */
  onReply: ((frame: ServerFrame) => void) | undefined;
}

export class Connection {
  /** Resolves on CONNECTED; rejects with the TOKEN_VALIDATION errors and close code if the socket closes first. */
  readonly ready: Promise<void>;
  /** Set when the socket has closed, before anything waiting on it is told. */
  ended: Ended | undefined;
  readonly #socket: WebSocket;
  readonly #handlers: ConnectionHandlers;
  // The gateway answers a connection's frames in the order it received them, so a FIFO matches replies.
  readonly #waiting: Waiter[] = [];
  #refusal: WireError[] = [];
  #rejectReady: (error: Error) => void = () => {};
  #liveness: Liveness | undefined;

  constructor(url: string, tokens: Tokens, handlers: ConnectionHandlers, timing: Timing) {
    const address = new URL(url);
    address.searchParams.set(API_TOKEN_QUERY, tokens.apiToken);
    if (tokens.personToken) address.searchParams.set(PERSON_TOKEN_QUERY, tokens.personToken);
    this.#handlers = handlers;
    if (typeof globalThis.WebSocket !== 'function') throw new TypeError('no global WebSocket: @herald/client needs a browser or Node.js 22+');
    this.#socket = new WebSocket(address);
    this.ready = new Promise((resolve, reject) => {
      this.#rejectReady = reject;
      const handshake = setTimeout(() => this.#abandon(`no CONNECTED within ${timing.connectTimeoutMs} ms`), timing.connectTimeoutMs);
      const connected = (): void => {
        clearTimeout(handshake);
        if (timing.liveness) this.#liveness = this.#watch(timing.liveness);
        resolve();
      };
      this.#socket.addEventListener('message', ({ data }) => this.#onFrame(String(data), connected));
      this.#socket.addEventListener('close', ({ code, reason }) => {
        clearTimeout(handshake);
        this.#end(code, reason);
      });
    });
  }

  /**
   * Send a frame and answer its reply (REGISTER, UNREGISTER or REFRESH); an ERROR reply rejects with its errors.
   * `onReply` sees the reply as soon as it is read: frames read with it in one chunk are handled before the promise's
   * reactions.
   */
  request(frame: ClientFrame, onReply?: (frame: ServerFrame) => void): Promise<ServerFrame> {
    if (this.ended) {
      const { code, reason } = this.ended;
      return Promise.reject(new HeraldError(`connection closed (${code} ${reason})`, [], code));
    }
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject, onReply });
      this.#socket.send(JSON.stringify(frame));
    });
  }

  close(code: number, reason: string): void {
    this.#socket.close(code, reason);
  }

  /** Ended, once: everything waiting is told, then the client. */
  #end(code: number, reason: string): void {
    if (this.ended) return;
    this.#liveness?.stop();
    this.ended = { code, reason, errors: this.#refusal };
    this.#rejectReady(new HeraldError(`not connected (${code} ${reason})`, this.#refusal, code));
    const error = new HeraldError(`connection closed (${code} ${reason})`, [], code);
    for (const waiter of this.#waiting.splice(0)) waiter.reject(error);
    this.#handlers.closed(this);
  }

  /**
   * Give up on a socket that does not answer: it ends now, as dropped (1006), without waiting for a closing
   * handshake that a dead path would never complete; the close sent is for a node that is only slow.
   */
  #abandon(reason: string): void {
    this.#end(StandardCloseCode.ABNORMAL_CLOSURE, reason);
    this.#socket.close(StandardCloseCode.NORMAL_CLOSURE, reason);
  }

  #watch({ idleMs, timeoutMs }: LivenessTiming): Liveness {
    return new Liveness({
      idleMs,
      timeoutMs,
      probe: () => void this.request(PROBE).catch(() => {}),
      dead: () => this.#abandon(`no frame from the node within ${timeoutMs} ms of a probe`),
    });
  }

  #onFrame(text: string, connected: () => void): void {
    this.#liveness?.heard();
    let frame: ServerFrame;
    try {
      frame = JSON.parse(text) as ServerFrame;
    } catch {
      this.#handlers.error(new Error(`a frame that is not JSON: ${text.slice(0, 100)}`));
      return;
    }
    switch (frame.type) {
      case 'CONNECTED':
        connected();
        return;
      case 'TOKEN_VALIDATION':
        this.#refusal = frame.errors;
        return;
      case 'NOTIFICATION':
        this.#handlers.notification(frame.response);
        return;
      case 'REGISTER':
      case 'UNREGISTER':
      case 'REFRESH': {
        const waiter = this.#waiting.shift();
        waiter?.onReply?.(frame);
        waiter?.resolve(frame);
        return;
      }
      case 'TOKEN_EXPIRING':
        this.#handlers.expiring(frame.response.expiresAt);
        return;
      case 'ERROR': {
        const error = new HeraldError(frame.errors.map((e) => e.message).join('; '), frame.errors);
        const waiter = this.#waiting.shift();
        if (waiter) waiter.reject(error);
        else this.#handlers.error(error);
        return;
      }
    }
  }
}
