/**
 * Every touch of a private field of `ws` (8.23.0, pinned and patched: patches/ws@8.23.0.patch) or of Node's upgraded
 * HTTP socket, in one file: a ws upgrade that renames one breaks here and nowhere else. Each is there for memory or
 * write cost per socket, which a node pays tens of thousands of times.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';

/** The WebSocket's TCP socket (`_socket`): a prebuilt frame is written on it directly (frames.ts). */
export function tcpSocketOf(socket: WebSocket): Socket {
  return (socket as WebSocket & { _socket: Socket })._socket;
}

/**
 * The upgrade went through a ServerResponse that stays assigned to the TCP socket (`_httpMessage`), and with it the
 * request: a few KB per connection for its whole life. Detach it once the socket is the WebSocket's.
 */
export function releaseHttpObjects(tcp: Socket): void {
  (tcp as Socket & { _httpMessage?: ServerResponse | null })._httpMessage?.detachSocket(tcp);
}

/**
 * An EventEmitter whose listener was removed keeps its listener table (`_events`) in dictionary mode, here after
 * @fastify/websocket's error listener goes. The same listeners copied into a plain object, built in the same order
 * for every socket (so all share one hidden class), take a fraction of it (docs/architecture.md, "Measured costs").
 * Node shapes its streams' `_events` as such plain objects too; no event ws emits is named like an Object.prototype
 * member.
 */
export function compactListeners(emitter: WebSocket): void {
  const table = emitter as unknown as { _events: Record<string, unknown> };
  const compact: Record<string, unknown> = {};
  for (const name of Object.keys(table._events)) compact[name] = table._events[name];
  table._events = compact;
}

/**
 * With permessage-deflate off (node.ts sets it so) ws still gives each connection its own empty table of
 * negotiated extensions (`_extensions`), shared by the WebSocket, its Receiver and its Sender: an object per socket.
 * They only read it (a client-side negotiation writes to its own), so every socket can share one frozen empty table.
 * A socket that did negotiate permessage-deflate (ws's only extension) keeps its own.
 */
const NO_EXTENSIONS = Object.freeze({});

export function shareNoExtensions(socket: WebSocket): void {
  const ws = socket as unknown as { _extensions: object; _receiver: { _extensions: object }; _sender: { _extensions: object } };
  if ('permessage-deflate' in ws._extensions) return;
  ws._extensions = NO_EXTENSIONS;
  ws._receiver._extensions = NO_EXTENSIONS;
  ws._sender._extensions = NO_EXTENSIONS;
}
