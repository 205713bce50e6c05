/** Test support: raw HTTP/1.1 over TCP, for what fetch cannot show (bytes, pieces, pipelining, one connection's life). */
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

export function request(head: string, body = ''): string {
  return `${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

export function emitRequest(token: string | undefined, body: string, extra = ''): string {
  const auth = token === undefined ? '' : `\r\nx-am-authorization: ${token}`;
  return request(`POST ${EMIT_PATH} HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json${auth}${extra}`, body);
}
