/**
 * HeraldClient: the typed client SDK for the Herald gateway, for browsers and Node, on the standard WebSocket.
 * It connects with the two tokens, registers and unregisters, delivers notifications, and keeps the
 * connection: after any close that is not final it waits (full jitter), connects again with fresh tokens
 * if it has a way to get them, and registers everything the application still holds. docs/client.md.
 */
import {
  CloseCode,
  type Criteria,
  EventType,
  shouldReconnect,
  StandardCloseCode,
  type ClientFrame,
  type InvalidOnEvent,
  type OnEvent,
  type RefreshReply,
  type RegisterReply,
  type ServerFrame,
  type UnregisterReply,
  type WireError,
} from '@herald/protocol';
import { reconnectDelayAfter } from './backoff.ts';
import { Connection, HeraldError, type ConnectionHandlers, type Ended, type WireNotification } from './connection.ts';
import { Emitter, iterate, type Listener } from './emitter.ts';
import { settingsOf, type ConnectOptions, type Settings } from './options.ts';
import { Subscriptions } from './subscriptions.ts';
import { msUntilRefresh, type TokenReason, type Tokens } from './tokens.ts';
import { Callbacks, entryOf, type EventMap, type Notification, type SubscribeOptions, type Subscription } from './typed.ts';
import type { ClientEvents, CloseInfo } from './client-events.ts';

/** What a REGISTER entry may leave out: eventType defaults to CUSTOM_WS_EVENTS, getEventData to true. */
export type OnEventInput = Partial<Pick<OnEvent, 'eventType' | 'getEventData'>> & Omit<OnEvent, 'eventType' | 'getEventData'>;

export type RegisterResult = RegisterReply['response'];
export type UnregisterResult = UnregisterReply['response'];
export type ClientState = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

interface Reregistration {
  handle: string;
  onEvent: OnEvent;
  /** The eventId on the new connection; undefined when refused. */
  eventId: string | undefined;
  errors: WireError[];
  /** Whether it resumed whole, when it resumed (it had a position). */
  recovered: boolean | undefined;
}

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: Error): void;
}

/** A notification of one event of E. */
type NotificationOf<E extends object, K extends keyof E & string> = Extract<Notification<E>, { apiName: K }>;

/**
 * A client whose notifications are typed by event name: `createClient<{ 'order-updates': { orderId: number } }>(options)`.
 * The same as `new HeraldClient<E>(options)`; call `connect()` on it.
 */
export function createClient<E extends object = EventMap>(options: ConnectOptions): HeraldClient<E> {
  return new HeraldClient<E>(options);
}

export class HeraldClient<E extends object = EventMap> {
  /** Settles once, when the client stops for good: close(), a final close code, or maxAttempts used up. */
  readonly closed: Promise<CloseInfo>;
  readonly #settings: Settings;
  readonly #events = new Emitter<ClientEvents<E>>();
  readonly #subscriptions = new Subscriptions();
  readonly #callbacks = new Callbacks<Notification<E>>();
  readonly #handlers: ConnectionHandlers = {
    notification: (n) => this.#notify(n),
    closed: (connection) => this.#onClosed(connection),
    error: (error) => this.#events.emit('error', error),
    expiring: () => {
      if (this.#settings.refreshable) void this.#refresh();
    },
  };
  #resolveClosed: (info: CloseInfo) => void = () => {};
  #state: ClientState = 'idle';
  #tokens: Tokens | undefined;
  #connection: Connection | undefined;
  #everOpen = false;
  /** What close() asked for: once set, nothing reconnects. */
  #stopped: CloseInfo | undefined;
  readonly #openWaiters: Waiter<Connection>[] = [];
  #wake: (() => void) | undefined;
  #refreshTimer: ReturnType<typeof setTimeout> | undefined;
  /** The refresh in flight: the node's notice and the client's own timer may both ask for one. */
  #refreshing: Promise<void> | undefined;

  constructor(options: ConnectOptions) {
    this.#settings = settingsOf(options);
    if (options.apiToken) this.#tokens = { apiToken: options.apiToken, personToken: options.personToken };
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
  }

  /** A client, once connected. Rejects like connect(). */
  static async connect<E extends object = EventMap>(options: ConnectOptions): Promise<HeraldClient<E>> {
    const client = new HeraldClient<E>(options);
    await client.connect();
    return client;
  }

  get state(): ClientState {
    return this.#state;
  }

  /** Resolves once the gateway says CONNECTED; rejects with a HeraldError (TOKEN_VALIDATION errors, close code) otherwise. */
  async connect(): Promise<void> {
    if (this.#state !== 'idle') throw new Error(`connect() on a client that is ${this.#state}`);
    this.#state = 'connecting';
    if (this.#tokens) this.#setTokens(this.#tokens, 'connect');
    const opened = this.#whenOpen();
    void this.#run('connect', 0, 0);
    await opened;
  }

  /**
   * Subscribe; answers which entries were accepted (with their handle, `eventId`) and which were refused (with
   * errors). An entry may carry `since` (a position kept from an earlier session): the node then replays what it
   * missed, and its valid entry says whether it was `recovered`.
   */
  register(onEvents: OnEventInput[]): Promise<RegisterResult> {
    return this.#register(onEvents, () => {});
  }

  /**
   * Subscribe to one event, with criteria or without (undefined: every notification of the event the API user
   * may have), and call `listener` for each of its notifications, typed by the event's name. Resolves once the node
   * accepted it; rejects with a HeraldError carrying the node's errors when it refused it.
   */
  async subscribe<K extends keyof E & string>(
    apiName: K, criteria: Criteria | undefined, listener: (notification: NotificationOf<E, K>) => void, options: SubscribeOptions = {},
  ): Promise<Subscription> {
    // Each notification reaches the callback of its handle only, and a handle is one entry of event K.
    const callback = listener as (notification: Notification<E>) => void;
    const { validOnEvents, invalidOnEvents } = await this.#register([entryOf(apiName, criteria, options)], (handle) => this.#callbacks.set(handle, callback));
    const valid = validOnEvents[0];
    if (valid === undefined) {
      const errors = invalidOnEvents[0]?.errors ?? [];
      throw new HeraldError(`${apiName} refused: ${errors.map((e) => e.message).join('; ')}`, errors);
    }
    const { eventId, offset, epoch, recovered } = valid;
    return { eventId, apiName, offset, epoch, recovered, unsubscribe: async () => void (await this.unregister([eventId])) };
  }

  /** `held` sees each accepted entry's handle as its reply is read, before any of its notifications. */
  async #register(onEvents: OnEventInput[], held: (handle: string) => void): Promise<RegisterResult> {
    const frame: ClientFrame = { objType: 'REGISTER', onEvents: onEvents.map(withDefaults) };
    // Each accepted entry is held as soon as the reply is read: its replay and notifications come right after it.
    const hold = (reply: ServerFrame): void => {
      for (const valid of (reply as RegisterReply).response.validOnEvents) {
        const handle = this.#subscriptions.add(valid);
        this.#subscriptions.registered(handle, valid);
        held(handle);
      }
    };
    const { response } = (await this.#request(() => frame, hold)) as RegisterReply;
    const validOnEvents = response.validOnEvents.map((valid) => ({ ...valid, eventId: this.#subscriptions.add(valid) }));
    return { validOnEvents, invalidOnEvents: response.invalidOnEvents };
  }

  /** Unsubscribe by the handles register() answered; the reply names them the same way. */
  async unregister(eventIds: string[]): Promise<UnregisterResult> {
    const subscriptions = this.#subscriptions;
    const build = (): ClientFrame => ({
      objType: 'UNREGISTER',
      onEvents: eventIds.map((handle) => ({ eventId: subscriptions.eventIdOf(handle) })),
    });
    const { response } = (await this.#request(build)) as UnregisterReply;
    const invalidOnEvents = response.invalidOnEvents.map((entry): InvalidOnEvent =>
      typeof entry.eventId === 'string' ? { ...entry, eventId: subscriptions.handleOf(entry.eventId) } : entry,
    );
    const validOnEvents = response.validOnEvents.map(({ eventId }) => ({ eventId: subscriptions.remove(eventId) }));
    for (const { eventId } of validOnEvents) this.#callbacks.delete(eventId);
    return { validOnEvents, invalidOnEvents };
  }

  /** Listen to an event (see ClientEvents); answers a function that stops listening. */
  on<K extends keyof ClientEvents<E>>(type: K, listener: Listener<ClientEvents<E>[K]>): () => void {
    return this.#events.on(type, listener);
  }

  /** Call `listener` for every notification; answers a function that stops it. */
  onNotification(listener: Listener<Notification<E>>): () => void {
    return this.#events.on('notification', listener);
  }

  /** Notifications from now on, as an async iterator that ends when the client is closed. */
  notifications(): AsyncGenerator<Notification<E>, void, undefined> {
    return iterate((push) => this.onNotification(push), this.closed);
  }

  /** Close for good and stop reconnecting; `closed` settles with this code and reason once the socket is closed. */
  close(code: number = StandardCloseCode.NORMAL_CLOSURE, reason = ''): Promise<CloseInfo> {
    if (this.#state === 'closed' || this.#stopped) return this.closed;
    this.#stopped = { code, reason };
    const connection = this.#connection;
    if (this.#state === 'idle') this.#finish({ code, reason, errors: [] });
    // The socket's close ends the open state or the attempt in flight; between attempts, cut the wait short.
    else if (connection && !connection.ended) connection.close(code, reason);
    else this.#wake?.();
    return this.closed;
  }

  /** Attempts until one opens or the client must stop. `attempt` counts reconnect attempts (0: the first connect). */
  async #run(reason: TokenReason, attempt: number, delayMs: number): Promise<void> {
    for (;;) {
      if (delayMs > 0) await this.#sleep(delayMs);
      let ended: Ended | undefined;
      try {
        ended = await this.#attempt(reason, attempt);
      } catch (error) {
        // Nothing to retry with: getTokens failed with no tokens to fall back on, or the URL is not valid.
        const failure = error instanceof Error ? error : new Error(String(error));
        return this.#finish({ code: StandardCloseCode.ABNORMAL_CLOSURE, reason: failure.message, errors: [] }, failure);
      }
      if (ended === undefined) return;
      const next = this.#afterEnd(ended, attempt + 1);
      if (next === undefined) return;
      [reason, attempt, delayMs] = [reasonAfter(ended), attempt + 1, next];
    }
  }

  /** One attempt: tokens, socket, handshake, REGISTER of what is held. Answers how it ended, or undefined once open. */
  async #attempt(reason: TokenReason, attempt: number): Promise<Ended | undefined> {
    // close() may come during the wait before this attempt, or while getTokens runs.
    const stoppedBefore = this.#stoppedEnd();
    if (stoppedBefore) return stoppedBefore;
    const tokens = await this.#tokensFor(reason);
    const stoppedSince = this.#stoppedEnd();
    if (stoppedSince) return stoppedSince;
    const connection = new Connection(this.#settings.url, tokens, this.#handlers, this.#settings.timing);
    this.#connection = connection;
    const handshaken = await connection.ready.then(() => true, () => false);
    const replies = handshaken ? await this.#registerHeld(connection) : [];
    // Also covers a socket that closed after the last reply arrived and before this line ran.
    if (connection.ended) return connection.ended;
    this.#subscriptions.rebind(new Map(replies.map(({ handle, eventId }) => [handle, eventId])));
    this.#state = 'open';
    if (this.#everOpen) {
      const registered = replies.filter((reply) => reply.eventId !== undefined).map(({ handle }) => handle);
      const refused = replies
        .filter((reply) => reply.eventId === undefined)
        .map(({ handle, onEvent, errors }) => ({ eventId: handle, onEvent, errors }));
      for (const { eventId } of refused) this.#callbacks.delete(eventId);
      const recovered = Object.fromEntries(replies.flatMap(({ handle, eventId, recovered }) => (eventId === undefined || recovered === undefined ? [] : [[handle, recovered]])));
      this.#events.emit('reconnected', { attempt, registered, refused, recovered });
    }
    this.#everOpen = true;
    for (const waiter of this.#openWaiters.splice(0)) waiter.resolve(connection);
    return undefined;
  }

  /** Once close() was called, an attempt ends as the application asked. */
  #stoppedEnd(): Ended | undefined {
    return this.#stopped && { ...this.#stopped, errors: [] };
  }

  /**
   * One REGISTER per held entry (pipelined), so each reply belongs to exactly one handle; an entry with a position
   * resumes from it (`since`), and the node replays what it missed right after the reply.
   */
  #registerHeld(connection: Connection): Promise<Reregistration[]> {
    return Promise.all(
      this.#subscriptions.held().map(async ([handle, onEvent]): Promise<Reregistration> => {
        const since = this.#subscriptions.sinceOf(handle);
        try {
          const frame: ClientFrame = { objType: 'REGISTER', onEvents: [since === undefined ? onEvent : { ...onEvent, since }] };
          const held = ({ response }: RegisterReply): void => {
            if (response.validOnEvents[0] !== undefined) this.#subscriptions.registered(handle, response.validOnEvents[0]);
          };
          const { response } = (await connection.request(frame, (reply) => held(reply as RegisterReply))) as RegisterReply;
          const errors = response.invalidOnEvents[0]?.errors ?? [];
          const valid = response.validOnEvents[0];
          return { handle, onEvent, eventId: valid?.eventId, errors, recovered: since === undefined ? undefined : valid?.recovered === true };
        } catch (error) {
          // An ERROR reply refuses this entry; a closed socket is seen by the caller in connection.ended.
          return { handle, onEvent, eventId: undefined, errors: error instanceof HeraldError ? error.errors : [], recovered: undefined };
        }
      }),
    );
  }

  /**
   * A NOTIFICATION, named by its handle and event; one of an event with history is dropped when it is a repeat, and
   * one for a subscription the client does not hold (none is sent after its UNREGISTER reply) is reported, not delivered.
   */
  #notify(notification: WireNotification): void {
    const eventId = this.#subscriptions.handleOf(notification.eventId);
    const apiName = this.#subscriptions.apiNameOf(eventId);
    if (apiName === undefined) return this.#events.emit('error', new Error(`a notification for no held subscription (${eventId})`));
    const { offset, epoch } = notification;
    if (offset !== undefined && epoch !== undefined) {
      const seen = this.#subscriptions.seen(eventId, offset, epoch);
      if (seen === 'duplicate') return;
      // A new epoch, or the node's word that notifications before this one were lost while the connection stayed open.
      if (seen === 'epoch_changed' || notification.recovered === false) this.#events.emit('historyLost', { eventId });
    }
    // The node names the event by eventId only; its eventData is what the application declared for apiName.
    const typed = { ...notification, eventId, apiName } as Notification<E>;
    this.#events.emit('notification', typed);
    this.#callbacks.call(eventId, typed);
  }

  /** An open connection closed: reconnect, or stop. Attempts in flight watch their own socket instead. */
  #onClosed(connection: Connection): void {
    if (connection !== this.#connection || this.#state !== 'open' || !connection.ended) return;
    const delayMs = this.#afterEnd(connection.ended, 1);
    if (delayMs !== undefined) void this.#run(reasonAfter(connection.ended), 1, delayMs);
  }

  /**
   * Decide whether to try again, and tell the application once `state` says so; answers the wait before
   * the next attempt, or undefined when the client has stopped.
   */
  #afterEnd(ended: Ended, nextAttempt: number): number | undefined {
    const { refreshable, maxAttempts, retryFirstConnect, minDelayMs, maxDelayMs } = this.#settings;
    const willReconnect =
      this.#stopped === undefined &&
      (this.#everOpen || retryFirstConnect) &&
      nextAttempt <= maxAttempts &&
      shouldReconnect(ended.code) &&
      // Without getTokens the same expired token would only be refused again.
      (ended.code !== CloseCode.TOKEN_EXPIRED || refreshable);
    const delayMs = willReconnect ? reconnectDelayAfter(ended.code, nextAttempt, minDelayMs, maxDelayMs) : undefined;
    if (!willReconnect) this.#finish(ended);
    else if (this.#everOpen) this.#state = 'reconnecting';
    this.#events.emit('disconnected', { ...ended, willReconnect, delayMs });
    return delayMs;
  }

  #finish(ended: Ended, error?: Error): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    clearTimeout(this.#refreshTimer);
    const failure = error ?? new HeraldError(`not connected (${ended.code} ${ended.reason})`, ended.errors, ended.code);
    for (const waiter of this.#openWaiters.splice(0)) waiter.reject(failure);
    this.#resolveClosed(this.#stopped ?? { code: ended.code, reason: ended.reason });
  }

  /** Send once open; a request cut off by a disconnect is sent again after the reconnect (REGISTER and UNREGISTER are idempotent). */
  async #request(build: () => ClientFrame, onReply?: (frame: ServerFrame) => void): Promise<ServerFrame> {
    for (;;) {
      const connection = await this.#whenOpen();
      try {
        return await connection.request(build(), onReply);
      } catch (error) {
        // Not a disconnect (an ERROR reply), or a frame the node found too big (1009): sent again, it would
        // only close the next connection too.
        if (!connection.ended || connection.ended.code === CloseCode.MESSAGE_TOO_BIG) throw error;
      }
    }
  }

  #whenOpen(): Promise<Connection> {
    if (this.#state === 'open' && this.#connection) return Promise.resolve(this.#connection);
    if (this.#state === 'closed') return Promise.reject(new HeraldError('the client is closed', []));
    return new Promise((resolve, reject) => this.#openWaiters.push({ resolve, reject }));
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  /** Tokens for an attempt: the held ones at the first connect, or while refreshBeforeExpiryMs keeps them fresh; else getTokens. */
  async #tokensFor(reason: TokenReason): Promise<Tokens> {
    const held = this.#tokens;
    const margin = this.#settings.refreshBeforeExpiryMs;
    const fresh =
      reason === 'reconnect' && held !== undefined && margin !== undefined && (msUntilRefresh(held, margin, Date.now()) ?? 0) > 0;
    if (held !== undefined && (reason === 'connect' || fresh)) return held;
    try {
      const tokens = await this.#settings.getTokens({ reason });
      this.#setTokens(tokens, reason);
      return tokens;
    } catch (error) {
      if (held === undefined) throw error;
      // The token API may be down in the same outage; the held tokens may well still be accepted.
      this.#events.emit('error', error instanceof Error ? error : new Error(String(error)));
      return held;
    }
  }

  /** Hold tokens, and with refreshBeforeExpiryMs plan the call to getTokens ahead of their expiry. */
  #setTokens(tokens: Tokens, reason: TokenReason): void {
    this.#tokens = tokens;
    const margin = this.#settings.refreshBeforeExpiryMs;
    if (margin === undefined || this.#state === 'closed') return;
    clearTimeout(this.#refreshTimer);
    const delayMs = msUntilRefresh(tokens, margin, Date.now());
    // Tokens that a refresh answered and that are already due would be asked for again at once, in a loop.
    if (delayMs === undefined || (delayMs <= 0 && reason === 'refresh')) return;
    this.#refreshTimer = setTimeout(() => void this.#refresh(), Math.max(0, delayMs));
  }

  /**
   * New tokens from getTokens, held for the next connect and given to the open connection in band (REFRESH). If
   * that fails or is refused, nothing more: the node closes the connection at its tokens' expiry (4001), and the
   * reconnect that follows asks getTokens again (reason `expired`).
   */
  #refresh(): Promise<void> {
    this.#refreshing ??= this.#refreshNow().finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  async #refreshNow(): Promise<void> {
    let connection: Connection | undefined;
    try {
      const tokens = await this.#settings.getTokens({ reason: 'refresh' });
      this.#setTokens(tokens, 'refresh');
      connection = this.#state === 'open' ? this.#connection : undefined;
      if (connection === undefined || connection.ended) return;
      const reply = (await connection.request({ objType: 'REFRESH', apiToken: tokens.apiToken, personToken: tokens.personToken })) as RefreshReply;
      if ('errors' in reply) throw new HeraldError(`the node refused the new tokens: ${reply.errors.map((e) => e.message).join('; ')}`, reply.errors);
      this.#events.emit('refreshed', { expiresAt: reply.response.expiresAt });
    } catch (error) {
      // A connection that closed meanwhile is the reconnect's business, not an error of the refresh.
      if (connection?.ended) return;
      this.#events.emit('error', error instanceof Error ? error : new Error(String(error)));
    }
  }
}

function withDefaults(entry: OnEventInput): OnEvent {
  return { eventType: EventType.CUSTOM_WS_EVENTS, getEventData: true, ...entry };
}

/** After 4001 a cached token would fail again: tell getTokens so. */
function reasonAfter(ended: Ended): TokenReason {
  return ended.code === CloseCode.TOKEN_EXPIRED ? 'expired' : 'reconnect';
}

export { HeraldError, type ConnectOptions, type Notification };
export type { EventMap, SubscribeOptions, Subscription } from './typed.ts';
export type { ClientEvents, CloseInfo, DisconnectedEvent, HistoryLostEvent, ReconnectedEvent, RefusedSubscription } from './client-events.ts';
