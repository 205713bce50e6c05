/**
 * `--client ws`: a load client built on the `ws` library, as Node back ends are (and as browsers behave): its frames
 * masked, a close handshake when it leaves, every message checked as UTF-8 and parsed as JSON. Beside the raw
 * clients (load-client.ts), which read the node's bytes in place and parse nothing, it shows what a usual client
 * adds to a figure: against the same node, the difference between the two is the client's part.
 */
import type { ClientRequestArgs } from 'node:http';
import { connect, type NetConnectOpts, type Socket } from 'node:net';
import WebSocket from 'ws';
import type { FramePosition } from './frames.ts';
import { LoadClient, type ClientKind, type ClientObserver, type ClientOptions } from './load-client.ts';
import type { ClientPlan } from './roster.ts';

export const CLIENT_KINDS: readonly ClientKind[] = ['raw', 'ws'];

/** A client of the kind `options` names. */
export function newClient(index: number, plan: ClientPlan, observer: ClientObserver, options: ClientOptions, since?: FramePosition): LoadClient {
  return options.kind === 'ws' ? new WsLoadClient(index, plan, observer, options, since) : new LoadClient(index, plan, observer, options, since);
}

export class WsLoadClient extends LoadClient {
  #socket: WebSocket | undefined;
  /** --read-rate: the pause after each message, in ms (0: none). */
  readonly #readGapMs: number;
  /** When the paced client may read its next message (performance.now()). */
  #nextReadAt = 0;

  constructor(index: number, plan: ClientPlan, observer: ClientObserver, options: ClientOptions, since?: FramePosition) {
    super(index, plan, observer, options, since);
    this.#readGapMs = options.readRate === undefined ? 0 : 1000 / options.readRate;
  }

  protected override connect(localAddress: string | undefined): void {
    const socket = new WebSocket(this.plan.url, {
      localAddress,
      // ws's own TCP connect, with the moment it is up: the phase the raw clients time as `tcp`.
      createConnection: (options: ClientRequestArgs) => {
        const tcp: Socket = connect({ ...(options as NetConnectOpts), noDelay: true });
        tcp.once('connect', () => (this.tcpAt = performance.now()));
        return tcp;
      },
    });
    this.#socket = socket;
    socket.on('message', (data, isBinary) => {
      // What an application does with each message: its text parsed (the load client then reads the same bytes).
      const bytes = data as Buffer;
      if (!isBinary) JSON.parse(bytes.toString('utf8'));
      this.message(bytes);
      if (this.#readGapMs > 0) this.#pace(socket);
    });
    socket.on('unexpected-response', (_request, response) => {
      this.refused(response.statusCode ?? 0);
      response.destroy();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => this.lost(error.code ?? error.message));
    socket.on('close', (code: number) => this.ended(code));
  }

  /**
   * A slow reader: the socket is paused until the next message is due, so that the node's data waits in the kernels'
   * buffers, as behind a slow device or network. A message ws had already read still comes: the pace holds on average.
   */
  #pace(socket: WebSocket): void {
    const now = performance.now();
    this.#nextReadAt = Math.max(this.#nextReadAt, now) + this.#readGapMs;
    if (this.#nextReadAt - now < 1) return;
    socket.pause();
    setTimeout(() => socket.resume(), this.#nextReadAt - now);
  }

  protected override sendText(text: string): void {
    if (this.#socket?.readyState === WebSocket.OPEN) this.#socket.send(text);
  }

  protected override closeLink(): void {
    this.#socket?.close(1000);
  }

  protected override dropLink(): void {
    this.#socket?.terminate();
  }
}
