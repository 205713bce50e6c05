import { startNode } from './support/gateway.ts';
import { connectionPair } from './support/raw-http.ts';
const nodes = [await startNode(), await startNode((raw) => { raw.server.emitFastPath = false; })];
const calls = ["POST /api/system-api/bench/emit-event-ws HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n","POST /api/system-api/bench/emit-event-ws HTTP/1.1\r\nconnection: Keep-Alive, Close\r\nContent-Length: 58\r\n\r\n{\"name\":\"order-updates\",\"eventData\":{\"__proto__\":{\"x\":1}}}","POST /api/system-api/bench/emit-event-ws HTTP/1.1\r\nContent-Length: 39\r\n\r\n{\"name\":\"order-updates\",\"eventData\":{}}"];
const bytes = Buffer.from(calls.join(''));
for (const size of [1, 1000]) for (const node of nodes) {
  const { client, server } = await connectionPair(Number(new URL(node.http).port));
  let raw = '';
  client.socket.on('data', (d) => { raw += d.toString('latin1'); });
  for (let at = 0; at < bytes.length && !server.destroyed; at += size) server.push(bytes.subarray(at, at + size));
  client.socket.end();
  await client.closed;
  console.log(size, JSON.stringify(raw.replace(/Date: [^\r]*\r\n/g, '')));
}
await Promise.all(nodes.map((n) => n.close()));
