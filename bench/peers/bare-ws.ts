#!/usr/bin/env node
/**
 * The floor: a bare `ws` server that does no protocol work. A client connects (any ?token= is accepted, no
 * check), sends {"register":"<recipientId>"}, and is kept in a Map by recipientId. POST /emit publishes the
 * payload on one Redis channel and every node (here: one) writes it to the matching socket(s) as it arrives (a
 * broadcast: those registered as BROADCAST_ID), so an emit crosses Redis as it does in the gateway and in
 * Socket.IO's adapter.
 *
 *   PORT=25100 REDIS_URL=redis://127.0.0.1:25001 node bench/peers/bare-ws.ts
 */
import { Redis } from 'ioredis';
import { WebSocketServer, type WebSocket } from 'ws';
import { BROADCAST_ID, httpServer, portFromEnv, redisUrlFromEnv, type Emit } from './common.ts';

const CHANNEL = 'bare-ws:emit';
const byRecipient = new Map<string, Set<WebSocket>>();
let connected = 0;

function deliver(message: string): void {
  const emit = JSON.parse(message) as Emit;
  const recipientId = emit.broadcast ? BROADCAST_ID : emit.recipientId;
  const sockets = recipientId === undefined ? undefined : byRecipient.get(recipientId);
  if (sockets) for (const socket of sockets) socket.send(message);
}

function onConnection(socket: WebSocket): void {
  connected++;
  let recipientId: string | undefined;
  socket.on('message', (data) => {
    const text = String(data);
    const id = (JSON.parse(text) as { register?: string }).register;
    if (id === undefined || recipientId !== undefined) return;
    recipientId = id;
    let sockets = byRecipient.get(id);
    if (!sockets) byRecipient.set(id, (sockets = new Set()));
    sockets.add(socket);
    socket.send('{"registered":true}');
  });
  socket.on('close', () => {
    connected--;
    if (recipientId === undefined) return;
    const sockets = byRecipient.get(recipientId);
    sockets?.delete(socket);
    if (sockets?.size === 0) byRecipient.delete(recipientId);
  });
}

const redisUrl = redisUrlFromEnv();
const publisher = new Redis(redisUrl);
const subscriber = new Redis(redisUrl);
await subscriber.subscribe(CHANNEL);
subscriber.on('message', (_channel: string, message: string) => deliver(message));

const server = httpServer({
  emit: (body) => void publisher.publish(CHANNEL, JSON.stringify(body)),
  clients: () => connected,
});
const wss = new WebSocketServer({ server, perMessageDeflate: false });
wss.on('connection', onConnection);
server.listen(portFromEnv(), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
