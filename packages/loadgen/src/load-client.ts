/**
 * One WebSocket client of a load run, with the time of each phase: TCP connect, CONNECTED, the REGISTER
 * reply, and leaving. Many clients share one observer, which turns their phases into figures.
 */
import { connect, type Socket } from 'node:net';
import { StandardCloseCode } from '@herald/protocol';
import { firstErrorCode, frameType, notRecovered, positionOf, registerAccepted, registerFrame, type FramePosition } from './frames.ts';
import { registerFrameOf, type ClientPlan } from './roster.ts';
import { readInto } from './receive.ts';
import { clientFrame, CLOSE_TIMEOUT_MS, closeFrame, Opcode, upgradeRequest, WireReader, type WireHandler } from './wire.ts';

export interface ClientObserver {
  /** CONNECTED, and the REGISTER reply with every entry accepted when the plan registers. */
  ready(client: LoadClient): void;
  /** The client never got ready; `reason` counts it (an error code, an HTTP status, a refusal code). */
  failed(client: LoadClient, reason: string): void;
  /** A ready client's socket closed: it left, or the node dropped it. */
  closed(client: LoadClient, code: number): void;
  notification(client: LoadClient, frame: Buffer): void;
  /** With `resume`: a repeat (dropped), a gap in the offsets, or a resume the node answered whole or not. */
  history?(client: LoadClient, what: HistoryOutcome): void;
  /** The answer to a ready client's further REGISTER (`subscribe`): every entry accepted, or not. */
  subscribed?(client: LoadClient, accepted: boolean): void;
}

export type HistoryOutcome = 'duplicate' | 'skipped' | 'recovered' | 'unrecovered';

export interface ClientOptions {
  /** Source address (127.0.0.x), so that clients beyond one address's ephemeral ports can connect. */
  localAddress?: string | undefined;
  /** From start until ready. */
  timeoutMs: number;
  /** Keep the last position of an event with history, resume from it (since), and drop repeats, as the SDK does. */
  resume?: boolean;
  /** raw (default): this class, on a plain TCP socket; ws: on the `ws` library (ws-client.ts). */
  kind?: ClientKind;
  /** ws clients: messages a second read at most, a pause after each (a slow reader); undefined: as fast as it can. */
  readRate?: number | undefined;
}

/** Which client a load run is made of (--client). */
export type ClientKind = 'raw' | 'ws';

export type State = 'new' | 'connecting' | 'registering' | 'ready' | 'leaving' | 'done';

/** No close frame came before the connection ended (RFC 6455 7.1.5). */
const { ABNORMAL_CLOSURE, NO_STATUS_RECEIVED, NORMAL_CLOSURE, PROTOCOL_ERROR } = StandardCloseCode;

/**
 * A client on a plain TCP socket speaking WebSocket through wire.ts (WireHandler: called by its reader only). The
 * protocol (CONNECTED, REGISTER, notifications, resumes) is this class's; the socket's part is in the methods a
 * client on another WebSocket implementation overrides (connect, sendText, closeLink, dropLink: ws-client.ts).
 */
export class LoadClient implements WireHandler {
  readonly index: number;
  readonly plan: ClientPlan;
  /** `performance.now()` instants; 0 until the phase happened. */
  startAt = 0;
  tcpAt = 0;
  connectedAt = 0;
  registerSentAt = 0;
  readyAt = 0;
  leaveAt = 0;
  leftAt = 0;
  /** With `resume`: the last position seen, and the one this client resumes from. */
  position: FramePosition | undefined;
  /** With `resume`: the REGISTER reply's position, where a replay ends and the live notifications begin. */
  replyPosition: FramePosition | undefined;
  readonly #since: FramePosition | undefined;
  #state: State = 'new';
  #tcp: Socket | undefined;
  #reader: WireReader | undefined;
  /** The code of the server's close frame, once it came. */
  #closeCode: number = ABNORMAL_CLOSURE;
  #closeSent = false;
  #timer: NodeJS.Timeout | undefined;
  readonly #observer: ClientObserver;
  readonly #options: ClientOptions;

  constructor(index: number, plan: ClientPlan, observer: ClientObserver, options: ClientOptions, since?: FramePosition) {
    this.index = index;
    this.plan = plan;
    this.#observer = observer;
    this.#options = options;
    this.#since = since;
    this.position = since;
  }

  get state(): State {
    return this.#state;
  }

  start(): void {
    this.startAt = performance.now();
    this.#state = 'connecting';
    this.#timer = setTimeout(() => this.#fail('timeout'), this.#options.timeoutMs);
    this.connect(this.#options.localAddress);
  }

  /** Open the connection from `localAddress`; once the TCP connection is up, set tcpAt. */
  protected connect(localAddress: string | undefined): void {
    const { hostname, port } = new URL(this.plan.url);
    const reader = new WireReader(this);
    const tcp = connect({ host: hostname, port: Number(port || 80), localAddress, noDelay: true, onread: readInto(reader) });
    this.#tcp = tcp;
    this.#reader = reader;
    tcp.once('connect', () => {
      this.tcpAt = performance.now();
      tcp.write(upgradeRequest(this.plan.url));
    });
    tcp.on('error', (error: NodeJS.ErrnoException) => this.lost(error.code ?? error.message));
    tcp.on('close', () => this.ended(this.#closeCode));
  }

  /** Close with 1000 and wait for the node's close frame and the end of the connection (`leftAt`). */
  leave(): void {
    if (this.#state !== 'ready') return;
    this.#state = 'leaving';
    this.leaveAt = performance.now();
    this.closeLink();
  }

  protected closeLink(): void {
    this.#closeSent = true;
    this.#tcp?.write(closeFrame(NORMAL_CLOSURE));
  }

  /**
   * Drop the connection at once, with a TCP reset: at the end of a hold, thousands of close handshakes would
   * only add noise, and a reset leaves no TIME_WAIT holding the source port for the next run's minute.
   */
  terminate(): void {
    this.#state = 'done';
    clearTimeout(this.#timer);
    this.dropLink();
  }

  protected dropLink(): void {
    this.#reader?.stop();
    const tcp = this.#tcp;
    if (tcp && !tcp.destroyed) {
      if (tcp.connecting) tcp.destroy();
      else tcp.resetAndDestroy();
    }
  }

  /** Another REGISTER (a whole frame) once ready, such as a broadcast's audience joining; false when not ready. */
  subscribe(frame: string): boolean {
    if (this.#state !== 'ready') return false;
    this.sendText(frame);
    return true;
  }

  protected sendText(text: string): void {
    this.#tcp?.write(clientFrame(Opcode.TEXT, text));
  }

  refused(status: number): void {
    this.lost(status === 0 ? 'not a WebSocket answer' : `HTTP ${status}`);
  }

  /** The connection failed before the client was ready (`reason` counts it); after, its close is what counts. */
  protected lost(reason: string): void {
    this.#fail(reason);
  }

  message(payload: Buffer): void {
    this.#onFrame(payload);
  }

  control(opcode: Opcode, payload: Buffer): void {
    if (opcode === Opcode.PING) {
      this.#tcp?.write(clientFrame(Opcode.PONG, payload));
    } else if (opcode === Opcode.CLOSE) {
      this.#closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : NO_STATUS_RECEIVED;
      if (!this.#closeSent) this.#tcp?.write(closeFrame(this.#closeCode === NO_STATUS_RECEIVED ? NORMAL_CLOSURE : this.#closeCode));
      this.#closeSent = true;
      // The server ends the TCP connection first (RFC 6455 7.1.1), so the TIME_WAIT is its own and not a source
      // port this client's next connect from the same address must step over; unless it never does.
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.#tcp?.destroy(), CLOSE_TIMEOUT_MS);
    }
  }

  malformed(reason: string): void {
    this.#closeCode = PROTOCOL_ERROR;
    this.#fail(reason);
    this.#tcp?.destroy();
  }

  #onFrame(frame: Buffer): void {
    const type = frameType(frame);
    if (type === 'NOTIFICATION') {
      if (this.#state !== 'ready' && this.#state !== 'registering') return;
      if (this.#options.resume === true && !this.#advance(frame)) return;
      this.#observer.notification(this, frame);
    } else if (this.#state === 'connecting') {
      if (type !== 'CONNECTED') return this.#fail(type === 'TOKEN_VALIDATION' ? firstErrorCode(frame) : `first frame ${type}`);
      this.connectedAt = performance.now();
      const register = registerFrameOf(this.plan);
      if (register === undefined) return this.#ready();
      this.#state = 'registering';
      this.registerSentAt = performance.now();
      const since = this.#since;
      this.sendText(since === undefined ? register : registerFrame(this.plan.event!, this.plan.recipient || undefined, since));
    } else if (this.#state === 'registering' && type === 'REGISTER') {
      if (!registerAccepted(frame)) return this.#fail(firstErrorCode(frame));
      if (this.#options.resume === true) this.#registered(frame);
      this.#ready();
    } else if (this.#state === 'ready' && type === 'REGISTER') {
      this.#observer.subscribed?.(this, registerAccepted(frame));
    }
  }

  /** A REGISTER reply: a resume answered whole keeps the position (the replay moves it on); else the reply's is taken. */
  #registered(frame: Buffer): void {
    const recovered = this.#since !== undefined && !notRecovered(frame);
    this.replyPosition = positionOf(frame);
    if (this.#since !== undefined) this.#observer.history?.(this, recovered ? 'recovered' : 'unrecovered');
    if (!recovered) this.position = this.replyPosition;
  }

  /** A NOTIFICATION's position; answers false for a repeat, which is not counted as received. */
  #advance(frame: Buffer): boolean {
    const position = positionOf(frame);
    if (position === undefined) return true;
    const last = this.position;
    if (last !== undefined && last.epoch === position.epoch) {
      if (position.offset <= last.offset) {
        this.#observer.history?.(this, 'duplicate');
        return false;
      }
      if (position.offset > last.offset + 1) this.#observer.history?.(this, 'skipped');
    }
    this.position = position;
    return true;
  }

  #ready(): void {
    clearTimeout(this.#timer);
    // A cleared Timeout kept for the client's life would cost it ~130 bytes.
    this.#timer = undefined;
    this.readyAt = performance.now();
    this.#state = 'ready';
    this.#observer.ready(this);
  }

  #fail(reason: string): void {
    if (this.#state !== 'connecting' && this.#state !== 'registering') return;
    this.terminate();
    this.#observer.failed(this, reason);
  }

  /** The connection ended, with the close code the node sent (1006: none). */
  protected ended(code: number): void {
    clearTimeout(this.#timer);
    if (this.#state === 'connecting' || this.#state === 'registering') return this.#fail(`closed ${code}`);
    const reported = this.#state === 'ready' || this.#state === 'leaving';
    if (this.#state === 'leaving') this.leftAt = performance.now();
    this.#state = 'done';
    if (reported) this.#observer.closed(this, code);
  }
}
