/**
 * A typed client for the Herald gateway, on the standard WebSocket (browsers, and Node 22+'s global one).
 * This is the small first cut: connect, register, unregister, notifications. Reconnect with backoff and
 * token refresh come with the fleet.
 */
import type {
  ConnectedFrame,
  InvalidOnEvent,
  NotificationFrame,
  OnEvent,
  RegisterReply,
  ServerFrame,
  UnregisterReply,
  WireError,
} from '@herald/protocol';

export interface ConnectOptions {
  /** ws:// or wss:// address of the gateway (or its load balancer). */
  url: string;
  /** The API user token (x-am-authorization). */
  apiToken: string;
  /** The person token (x-am-user-authorization), when events need one. */
  personToken?: string | undefined;
}

/** What a REGISTER entry may leave out: eventType defaults to CUSTOM_WS_EVENTS, getEventData to true. */
export type OnEventInput = Partial<Pick<OnEvent, 'eventType' | 'getEventData'>> & Omit<OnEvent, 'eventType' | 'getEventData'>;

export type Notification = NotificationFrame['response'];

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

interface Waiter {
  resolve(frame: ServerFrame): void;
  reject(error: Error): void;
}

export class HeraldClient {
  readonly #socket: WebSocket;
  // The gateway answers a connection's frames in the order it sent them, so a FIFO matches replies.
  readonly #waiting: Waiter[] = [];
  readonly #listeners = new Set<(notification: Notification) => void>();
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    this.closed = new Promise((resolve) => {
      socket.addEventListener('close', ({ code, reason }) => {
        const error = new HeraldError(`connection closed (${code} ${reason})`, [], code);
        for (const waiter of this.#waiting.splice(0)) waiter.reject(error);
        resolve({ code, reason });
      });
    });
    socket.addEventListener('message', ({ data }) => this.#onFrame(JSON.parse(String(data)) as ServerFrame));
  }

  /** Resolves once the gateway says CONNECTED; rejects with the TOKEN_VALIDATION errors otherwise. */
  static connect({ url, apiToken, personToken }: ConnectOptions): Promise<HeraldClient> {
    const address = new URL(url);
    address.searchParams.set('x-am-authorization', apiToken);
    if (personToken) address.searchParams.set('x-am-user-authorization', personToken);
    const socket = new WebSocket(address);
    return new Promise((resolve, reject) => {
      let errors: WireError[] = [];
      const onMessage = ({ data }: MessageEvent) => {
        const frame = JSON.parse(String(data)) as ServerFrame | ConnectedFrame;
        if (frame.type === 'CONNECTED') {
          socket.removeEventListener('message', onMessage);
          socket.removeEventListener('close', onClose);
          resolve(new HeraldClient(socket));
        } else if (frame.type === 'TOKEN_VALIDATION') errors = frame.errors;
      };
      const onClose = ({ code, reason }: CloseEvent) =>
        reject(new HeraldError(`not connected (${code} ${reason})`, errors, code));
      socket.addEventListener('message', onMessage);
      socket.addEventListener('close', onClose);
    });
  }

  /** Subscribe; answers which entries were accepted (with their eventId) and which were refused (with errors). */
  async register(onEvents: OnEventInput[]): Promise<RegisterReply['response']> {
    const entries = onEvents.map((entry) => ({ eventType: 'CUSTOM_WS_EVENTS', getEventData: true, ...entry }));
    const reply = (await this.#request({ objType: 'REGISTER', onEvents: entries })) as RegisterReply;
    return reply.response;
  }

  async unregister(eventIds: string[]): Promise<UnregisterReply['response']> {
    const onEvents = eventIds.map((eventId) => ({ eventId }));
    const reply = (await this.#request({ objType: 'UNREGISTER', onEvents })) as UnregisterReply;
    return reply.response;
  }

  /** Call `listener` for every NOTIFICATION; answers a function that stops it. */
  onNotification(listener: (notification: Notification) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  close(code = 1000, reason = ''): Promise<{ code: number; reason: string }> {
    this.#socket.close(code, reason);
    return this.closed;
  }

  #request(frame: object): Promise<ServerFrame> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      this.#socket.send(JSON.stringify(frame));
    });
  }

  #onFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case 'NOTIFICATION':
        for (const listener of this.#listeners) listener(frame.response);
        return;
      case 'REGISTER':
      case 'UNREGISTER':
        this.#waiting.shift()?.resolve(frame);
        return;
      case 'ERROR':
        this.#waiting.shift()?.reject(new HeraldError(frame.errors.map((e) => e.message).join('; '), frame.errors));
        return;
      default:
        return;
    }
  }
}

export type { InvalidOnEvent };
