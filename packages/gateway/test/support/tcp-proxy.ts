/**
 * A TCP proxy on loopback that can stop forwarding without closing anything, as a network partition does: while cut,
 * what either side sends, a connection's close and new connections are held, neither delivered nor refused (a new
 * connection is accepted, as a SYN would be retransmitted, but reaches nothing). `heal()` lets everything held through
 * in order, as TCP delivers its retransmissions once the path is back, and forwards as before. No root needed.
 * `loseAnswers(everyNth)` cuts connections instead: every Nth chunk the target sends back is not forwarded, and both
 * sides of its connection are closed, as a connection lost after a request reached the server and before its answer
 * reached the caller.
 */
import { once } from 'node:events';
import { createServer, Socket } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Stop forwarding; nothing is closed. */
  cut(): void;
  /** Forward what was held, in order, and everything after it. */
  heal(): void;
  readonly isCut: boolean;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** From now, every `everyNth` chunk answered is lost with its connection (0: none); answers how many were lost so far. */
  loseAnswers(everyNth: number): void;
  readonly answersLost: number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let cut = false;
  let held: Array<() => void> = [];
  let accepted = 0;
  let loseEvery = 0;
  let answered = 0;
  let lost = 0;
  const sockets = new Set<Socket>();
  /** Now, or once healed: what reaches the other side of the path. */
  const pass = (action: () => void) => (cut ? held.push(action) : action());
  const server = createServer((client) => {
    accepted++;
    const upstream = new Socket();
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    pass(() => upstream.connect(targetPort, '127.0.0.1'));
    const forward = (from: Socket, to: Socket) => {
      from.on('data', (chunk: Buffer) => pass(() => to.write(chunk)));
      from.on('close', () => pass(() => to.destroy()));
    };
    forward(client, upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (loseEvery === 0 || ++answered % loseEvery !== 0) return pass(() => client.write(chunk));
      lost++;
      client.destroy();
      upstream.destroy();
    });
    upstream.on('close', () => pass(() => client.destroy()));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    get isCut() {
      return cut;
    },
    get accepted() {
      return accepted;
    },
    loseAnswers(everyNth) {
      loseEvery = everyNth;
    },
    get answersLost() {
      return lost;
    },
    cut() {
      cut = true;
    },
    heal() {
      cut = false;
      const actions = held;
      held = [];
      for (const action of actions) action();
    },
    async close() {
      held = [];
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}
