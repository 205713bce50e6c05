/** Test support: raw HTTP/1.1 over TCP, for what fetch cannot show (bytes, pieces, pipelining, one connection's life). */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';

export const EMIT_PATH = '/api/system-api/bench/emit-event-ws';

export interface RawResponse {
  status: number;
  /** The head's lines after the status line, Date left out. */
  headers: string[];
  body: string;
}

/** One raw HTTP/1.1 connection: writes bytes as given, reads responses by their Content-Length. */
export class RawHttp {
  readonly socket: Socket;
  readonly closed: Promise<void>;
  #bytes = Buffer.alloc(0);
  #wake: (() => void) | undefined;

  constructor(port: number) {
    this.socket = connect({ port, host: '127.0.0.1', noDelay: true });
    this.socket.on('data', (chunk: Buffer) => {
      this.#bytes = Buffer.concat([this.#bytes, chunk]);
      this.#wake?.();
    });
    this.closed = once(this.socket, 'close').then(() => this.#wake?.());
  }

  write(text: string): void {
    this.socket.write(text);
  }

  /** Every response until the server closes the connection, and the bytes after the last whole one. */
  async rest(): Promise<{ responses: RawResponse[]; unread: string }> {
    await this.closed;
    const responses: RawResponse[] = [];
    for (let response = this.#take(); response; response = this.#take()) responses.push(response);
    return { responses, unread: this.#bytes.toString('latin1') };
  }

  async next(): Promise<RawResponse> {
    for (;;) {
      const response = this.#take();
      if (response) return response;
      if (this.socket.destroyed) throw new Error(`the connection closed; unread: ${this.#bytes.toString()}`);
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  #take(): RawResponse | undefined {
    const headEnd = this.#bytes.indexOf('\r\n\r\n');
    if (headEnd < 0) return undefined;
    const [statusLine, ...lines] = this.#bytes.toString('latin1', 0, headEnd).split('\r\n');
    const length = Number(lines.find((line) => /^content-length:/i.test(line))?.split(':')[1] ?? 0);
    const end = headEnd + 4 + length;
    if (this.#bytes.length < end) return undefined;
    const body = this.#bytes.toString('utf8', headEnd + 4, end);
    this.#bytes = this.#bytes.subarray(end);
    return { status: Number(statusLine!.split(' ')[1]), headers: lines.filter((line) => !/^date:/i.test(line)), body };
  }
}

/**
 * A connection to `port` with the server's end of it, found on Node's `net.server.socket` channel: a test can make the
 * server read pieces of the sizes it chooses, by emitting them as the server socket's 'data' events.
 */
export async function connectionPair(port: number): Promise<{ client: RawHttp; server: Socket }> {
  const accepted: Socket[] = [];
  let wake: (() => void) | undefined;
  const onAccepted = (message: unknown): void => {
    accepted.push((message as { socket: Socket }).socket);
    wake?.();
  };
  subscribe('net.server.socket', onAccepted);
  try {
    const client = new RawHttp(port);
    await once(client.socket, 'connect');
    const ours = (socket: Socket): boolean => socket.localPort === port && socket.remotePort === client.socket.localPort;
    for (;;) {
      const server = accepted.find(ours);
      if (server) return { client, server };
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    unsubscribe('net.server.socket', onAccepted);
  }
}

export function request(head: string, body = ''): string {
  return `${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

export function emitRequest(token: string | undefined, body: string, extra = ''): string {
  const auth = token === undefined ? '' : `\r\nx-am-authorization: ${token}`;
  return request(`POST ${EMIT_PATH} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json${auth}${extra}`, body);
}
