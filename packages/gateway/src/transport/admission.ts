/**
 * Admission control: at most `maxHandshakes` clients in the handshake at once (upgrade, token checks, and
 * their first REGISTER with its Redis writes); the rest wait in a bounded FIFO queue, and past it get HTTP 503
 * with Retry-After. It sits in front of fastify's routing, on the server's 'upgrade' event, so a waiting
 * client costs only its socket and parsed request: a reconnect storm does not grow the node's memory.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Metrics } from '../metrics.ts';

export interface AdmissionOptions {
  maxHandshakes: number;
  maxQueue: number;
  /** A slot is given back after this long even if the client never registers. */
  holdMs: number;
  metrics: Metrics;
}

/** A place in the handshake; released once (first REGISTER answered, close, or after holdMs). */
export interface Slot {
  release(): void;
}

type UpgradeListener = (request: IncomingMessage, socket: Duplex, head: Buffer) => void;

interface Waiting {
  request: IncomingMessage;
  socket: Duplex;
  head: Buffer;
}

const kSlot = Symbol('herald.admission.slot');
type AdmittedRequest = IncomingMessage & { [kSlot]?: Slot };

/** The slot a request was admitted with, for the transport to release when the handshake is over. */
export function slotOf(request: IncomingMessage): Slot | undefined {
  return (request as AdmittedRequest)[kSlot];
}

export class Admission {
  readonly #options: AdmissionOptions;
  readonly #queue: Waiting[] = [];
  #inFlight = 0;
  #peak = 0;
  /** Why every new client is refused now (the node drains, or lost Redis); undefined while clients are let in. */
  #refusing: string | undefined;
  #closed = false;
  #forward: UpgradeListener = () => {};

  constructor(options: AdmissionOptions) {
    this.#options = options;
  }

  /** Put the gate in front of the server's current upgrade listeners (@fastify/websocket's). */
  install(server: Server): void {
    const listeners = server.listeners('upgrade') as UpgradeListener[];
    server.removeAllListeners('upgrade');
    this.#forward = (request, socket, head) => {
      for (const listener of listeners) listener.call(server, request, socket, head);
    };
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => this.#arrive({ request, socket, head }));
  }

  /** Refuse every new client from now on (the node is draining). */
  close(): void {
    this.hold('the node is draining');
    this.#closed = true;
  }

  /** Refuse every new client (`why`, in the 503's body) until release(); those waiting too. */
  hold(why: string): void {
    if (this.#closed) return;
    this.#refusing = why;
    for (const waiting of this.#queue.splice(0)) this.#refuse(waiting.socket, why);
    this.#options.metrics.handshakesQueued.set(0);
  }

  /** Let new clients in again after hold(), unless the node is draining. */
  release(): void {
    if (!this.#closed) this.#refusing = undefined;
  }

  #arrive(waiting: Waiting): void {
    const { maxHandshakes, maxQueue, metrics } = this.#options;
    waiting.socket.on('error', ignoreResets);
    if (this.#refusing !== undefined) return this.#refuse(waiting.socket, this.#refusing);
    if (this.#inFlight < maxHandshakes) return this.#admit(waiting);
    if (this.#queue.length >= maxQueue) {
      return this.#refuse(waiting.socket, 'too many clients are connecting: try again shortly');
    }
    waiting.socket.once('close', () => this.#forget(waiting));
    this.#queue.push(waiting);
    metrics.handshakesQueued.set(this.#queue.length);
  }

  #forget(waiting: Waiting): void {
    const index = this.#queue.indexOf(waiting);
    if (index >= 0) this.#queue.splice(index, 1);
    this.#options.metrics.handshakesQueued.set(this.#queue.length);
  }

  #admit({ request, socket, head }: Waiting): void {
    const { metrics, holdMs } = this.#options;
    this.#inFlight++;
    if (this.#inFlight > this.#peak) metrics.handshakesPeak.set((this.#peak = this.#inFlight));
    metrics.handshakesInFlight.set(this.#inFlight);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      socket.removeListener('close', release);
      // Once ws listens for the socket's errors itself (it has by the first REGISTER; holdMs may come sooner).
      if (socket.listenerCount('error') > 1) socket.removeListener('error', ignoreResets);
      this.#inFlight--;
      metrics.handshakesInFlight.set(this.#inFlight);
      this.#next();
    };
    const timer = setTimeout(release, holdMs);
    (request as AdmittedRequest)[kSlot] = { release };
    socket.once('close', release);
    this.#forward(request, socket, head);
  }

  #refuse(socket: Duplex, message: string): void {
    this.#options.metrics.admissionRejected.inc();
    writeUnavailable(socket, message);
  }

  #next(): void {
    const waiting = this.#queue.shift();
    this.#options.metrics.handshakesQueued.set(this.#queue.length);
    if (waiting) this.#admit(waiting);
  }
}

/**
 * Node's HTTP server stops listening for a socket's errors once it hands the socket to 'upgrade', and ws starts
 * only once the token hooks have run: a client that resets its connection while it waits here, while its 503 is
 * written, or during its token checks, would otherwise crash the node. The error destroys the socket, which is
 * all there is to do ('close' then takes it out of the queue, or gives its slot back).
 */
function ignoreResets(): void {}

function writeUnavailable(socket: Duplex, message: string): void {
  const body = JSON.stringify({ success: false, statusCode: 503, errors: [{ code: 'UNAVAILABLE', message }] });
  socket.end(
    'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nContent-Type: application/json\r\nConnection: close\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}
