/**
 * One WebSocket client of a load run, with the time of each phase: TCP connect, CONNECTED, the REGISTER
 * reply, and leaving. Many clients share one observer, which turns their phases into figures.
 */
import { connect, type createConnection, type NetConnectOpts, type Socket } from 'node:net';
import WebSocket from 'ws';
import { firstErrorCode, frameType, registerAccepted } from './frames.ts';
import type { ClientPlan } from './roster.ts';

export interface ClientObserver {
  /** CONNECTED, and the REGISTER reply with every entry accepted when the plan registers. */
  ready(client: LoadClient): void;
  /** The client never got ready; `reason` counts it (an error code, an HTTP status, a refusal code). */
  failed(client: LoadClient, reason: string): void;
  /** A ready client's socket closed: it left, or the node dropped it. */
  closed(client: LoadClient, code: number): void;
  notification(client: LoadClient, frame: Buffer): void;
}

export interface ClientOptions {
  /** Source address (127.0.0.x), so that clients beyond one address's ephemeral ports can connect. */
  localAddress?: string | undefined;
  /** From start until ready. */
  timeoutMs: number;
}

type State = 'new' | 'connecting' | 'registering' | 'ready' | 'leaving' | 'done';

/**
 * Client frames go out with an all-zero mask: the random mask of RFC 6455 5.3 guards browsers' proxies against
 * crafted payloads, not a load generator on loopback, and drawing it costs the client CPU that the run should
 * spend on load. ws's `generateMask` option exists for this; the node unmasks any mask alike.
 */
function keepZeroMask(): void {}

/** `performance.now()` instants; 0 until the phase happened. */
export class LoadClient {
  readonly index: number;
  readonly plan: ClientPlan;
  startAt = 0;
  tcpAt = 0;
  connectedAt = 0;
  registerSentAt = 0;
  readyAt = 0;
  leaveAt = 0;
  leftAt = 0;
  #state: State = 'new';
  #socket: WebSocket | undefined;
  #tcp: Socket | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #observer: ClientObserver;
  readonly #options: ClientOptions;

  constructor(index: number, plan: ClientPlan, observer: ClientObserver, options: ClientOptions) {
    this.index = index;
    this.plan = plan;
    this.#observer = observer;
    this.#options = options;
  }

  get state(): State {
    return this.#state;
  }

  start(): void {
    this.startAt = performance.now();
    this.#state = 'connecting';
    this.#timer = setTimeout(() => this.#fail('timeout'), this.#options.timeoutMs);
    const socket = new WebSocket(this.plan.url, {
      perMessageDeflate: false,
      skipUTF8Validation: true,
      generateMask: keepZeroMask,
      handshakeTimeout: this.#options.timeoutMs,
      localAddress: this.#options.localAddress,
      createConnection: ((options: NetConnectOpts) => {
        const tcp = connect(options);
        tcp.once('connect', () => (this.tcpAt = performance.now()));
        this.#tcp = tcp;
        return tcp;
      }) as typeof createConnection,
    });
    this.#socket = socket;
    socket.on('message', (data) => this.#onFrame(data as Buffer));
    socket.on('error', (error: NodeJS.ErrnoException) => this.#fail(reasonOf(error)));
    socket.on('close', (code) => this.#onClose(code));
  }

  /** Close with 1000 and wait for the node's close frame (`leftAt`). */
  leave(): void {
    if (this.#state !== 'ready') return;
    this.#state = 'leaving';
    this.leaveAt = performance.now();
    this.#socket?.close(1000);
  }

  /**
   * Drop the connection at once, with a TCP reset: at the end of a hold, thousands of close handshakes would
   * only add noise, and a reset leaves no TIME_WAIT holding the source port for the next run's minute.
   */
  terminate(): void {
    this.#state = 'done';
    clearTimeout(this.#timer);
    if (this.#tcp && !this.#tcp.destroyed && !this.#tcp.connecting) this.#tcp.resetAndDestroy();
    this.#socket?.terminate();
  }

  #onFrame(frame: Buffer): void {
    const type = frameType(frame);
    if (type === 'NOTIFICATION') {
      if (this.#state === 'ready' || this.#state === 'registering') this.#observer.notification(this, frame);
    } else if (this.#state === 'connecting') {
      if (type !== 'CONNECTED') return this.#fail(type === 'TOKEN_VALIDATION' ? firstErrorCode(frame) : `first frame ${type}`);
      this.connectedAt = performance.now();
      if (this.plan.register === undefined) return this.#ready();
      this.#state = 'registering';
      this.registerSentAt = performance.now();
      this.#socket?.send(this.plan.register);
    } else if (this.#state === 'registering' && type === 'REGISTER') {
      if (registerAccepted(frame)) this.#ready();
      else this.#fail(firstErrorCode(frame));
    }
  }

  #ready(): void {
    clearTimeout(this.#timer);
    this.readyAt = performance.now();
    this.#state = 'ready';
    this.#observer.ready(this);
  }

  #fail(reason: string): void {
    if (this.#state !== 'connecting' && this.#state !== 'registering') return;
    this.terminate();
    this.#observer.failed(this, reason);
  }

  #onClose(code: number): void {
    if (this.#state === 'connecting' || this.#state === 'registering') return this.#fail(`closed ${code}`);
    const reported = this.#state === 'ready' || this.#state === 'leaving';
    if (this.#state === 'leaving') this.leftAt = performance.now();
    this.#state = 'done';
    if (reported) this.#observer.closed(this, code);
  }
}

function reasonOf(error: NodeJS.ErrnoException): string {
  if (error.code) return error.code;
  const status = /Unexpected server response: (\d+)/.exec(error.message)?.[1];
  return status ? `HTTP ${status}` : error.message;
}
