#!/usr/bin/env node
/**
 * What users would pick instead: Socket.IO with @socket.io/redis-adapter on the same Redis. The minimum to run
 * the same scenarios: the handshake carries ?token= (present, not verified), a `register` event (with an ack)
 * joins the room of a recipientId, POST /emit does io.to(room).emit (a broadcast: the room of BROADCAST_ID). WebSocket
 * transport only: long polling would be measuring something else.
 *
 *   PORT=25200 REDIS_URL=redis://127.0.0.1:25001 node bench/peers/socketio.ts
 */
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { Server } from 'socket.io';
import { BROADCAST_ID, httpServer, portFromEnv, redisUrlFromEnv } from './common.ts';

const redisUrl = redisUrlFromEnv();
const pubClient = new Redis(redisUrl);
const subClient = pubClient.duplicate();

const server = httpServer({
  emit: (body) => {
    const recipientId = body.broadcast ? BROADCAST_ID : body.recipientId;
    if (recipientId !== undefined) io.to(`r:${recipientId}`).emit('notification', body);
  },
  clients: () => io.engine.clientsCount,
});
const io = new Server(server, { transports: ['websocket'], perMessageDeflate: false, adapter: createAdapter(pubClient, subClient) });

io.use((socket, next) => (socket.handshake.query.token ? next() : next(new Error('token required'))));
io.on('connection', (socket) => {
  socket.on('register', (recipientId: unknown, ack?: (ok: boolean) => void) => {
    if (typeof recipientId !== 'string') return ack?.(false);
    void socket.join(`r:${recipientId}`);
    ack?.(true);
  });
});
server.listen(portFromEnv(), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
