/**
 * Why a figure of issue 4 is missed on this machine, with the profile that shows it and what would close it. The
 * report prints the entry of each figure its run misses. Written from measurements (the commands are in each
 * entry); when a change moves a figure, measure again and rewrite the entry. The profiles: the gateway started by
 * hand with `node --cpu-prof --cpu-prof-dir=DIR --no-node-snapshot --max-semi-space-size=16
 * packages/gateway/src/main.ts` (REDIS_URL set), the load below against it, then SIGTERM writes the profile.
 */
export const WHY_MISSED: Readonly<Record<string, string>> = {
  node_rss_kb_per_client:
    'The JS heap per client is at its target (≤ 2.5 KB); RSS adds ~1.2 KB per client outside it. A bare Node ' +
    'process holding plain net sockets (no ws, no HTTP; `--max-semi-space-size=16`, 6k → 18k, after GC) costs ' +
    '1.65 KB of RSS per socket, 0.86 KB of it heap: ~0.8 KB per socket is native (TCP wrap, libuv handle) before ' +
    'any WebSocket. The rest is V8\'s page slack and its young generation, which grows with a burst of connections ' +
    '(`--max-semi-space-size=16` caps it; at 4 the slope read 3.4 KB by hand, but throughput fell 10-15%). A heap ' +
    'snapshot diff 0 → 6k clients (`--heapsnapshot-signal=SIGUSR1`) puts ws and net objects at ~1.9 KB per client ' +
    '(Socket, 2 WritableStates, Receiver, WebSocket, Sender) and ours at ~0.5 KB. Closing it needs fewer objects ' +
    'per socket than ws keeps (a Receiver and a Sender each), i.e. a leaner WebSocket layer than ws.',
  node_heap_kb_per_client:
    'Varies between runs more than the peers do: 2.48, 3.10 and 2.82 KB in the three full memory runs of one ' +
    'afternoon (Socket.IO\'s and the bare peer\'s levels repeated to 0.1 MB), 2.53-2.65 KB by hand (fill 6k then ' +
    '18k, two forced GCs, /metrics). By space, 6k → 18k by hand: old space +33.5 MB (2.7 KB per client), large ' +
    'objects −1.9 MB, code and bytecode ±1 MB. What a client holds (heap snapshot diff): ws and net objects ~1.9 KB, ' +
    'ours ~0.5 KB (session, route, bucket, subscription, person). Listener tables were taken out of dictionary mode ' +
    '(−0.22 KB); the rest is ws\'s per-socket Receiver and Sender and Node\'s socket.',
  churn_subscribe_per_s:
    'The node spends ~160 µs of CPU per client; with wsload on the same 2 cores it is ~80% busy. Profile under ' +
    '`wsload churn ws://… -c 100 -w 2 -d 8 --register announcements --per-client --tokens both`: write system calls ' +
    '23% (the 101 answer with CONNECTED, now one write; the REGISTER reply; ws echoing the close frame), GC 7%, the ' +
    'upgrade through fastify\'s routing and hooks ~12% inclusive, the Sec-WebSocket-Accept SHA-1 3%, socket close ' +
    '3%, then two JWT checks and one Redis script per route. The bare ws peer, which checks no token and answers ' +
    'nothing, reaches 5,000-5,800/s in the same runs: 6,000 is above the floor Node reaches here with its load ' +
    'generator on the same cores.',
  churn_subscribe_vs_socketio:
    'Depends on what the node went through before, and on noise: 1.99× on fresh servers, 1.50× when the rate ' +
    'scenarios ran after the memory levels (18,000 clients came and left; the bench now restarts each server ' +
    'before them). By hand, one-person notify on a fresh node 16,100/s, 13,400/s with 18,000 clients held, ' +
    '14,000-14,800/s after they left (heap back to 27 MB). The gateway does more per client than Socket.IO (two ' +
    'JWTs, the REGISTER reply, a Redis route write).',
  notify_person_per_s:
    'Profile under `wsload notify http://… --clients 1000 -c 100 -d 8`: write system calls 22% (the HTTP answer, ' +
    'the NOTIFICATION frame, Redis), idle 21% (the HTTP load and the 1,000 clients run on the same 2 cores), GC 8.5%, ' +
    'JSON.parse of the body 3%, the JWT cache hashing the API token 2%, and ioredis (an allocation profile puts ' +
    '~44% of the ~36 KB allocated per emit under broker.publish, mostly ioredis\'s commands and per-tick pipelines). ' +
    'The bare ws peer (one PUBLISH, no token) reaches ~12,100-12,800/s here, so 20,000 is above the floor on this ' +
    'machine. Would help: a leaner path for the two hot reads (SMEMBERS of the shapes, HGET of the bucket; they ' +
    'already share one round trip when the event\'s shapes have not changed since its last emit).',
  notify_person_vs_socketio:
    '2.02× on fresh servers, 1.51× after the memory levels: see churn_subscribe_vs_socketio.',
  paced_p99_ms:
    'Run-to-run noise on this VM: 1.94 ms in one run, 3.1-3.6 ms in the later ones; by hand (`wsload notify http://… ' +
    '--clients 1000 -c 100 -R 1000 -d 10` on a fresh node) both this code and the code before this round of changes ' +
    'read 4-5 ms: young-generation GC pauses of the node and of wsload, on shared cores.',
  broadcast_1k_per_s:
    'Within the run-to-run noise of the target (167,000-179,000/s per run, 1.9-2.3× Socket.IO in the last runs): one ' +
    'write system call per recipient, with the 1,000 clients\' process on the same cores.',
  broadcast_1k_vs_socketio: 'See broadcast_1k_per_s.',
  broadcast_18k_last_ms:
    'One write system call per recipient, ~15 µs each while three wsload processes holding the 18,000 clients ' +
    'share the 2 cores: ~270 ms of writes on one core at best, plus the yields every 128 writes (fanOutChunk) that ' +
    'keep one-person notifications within 20 ms during the broadcast. Would close it: the load generators on other ' +
    'cores, or writes batched below Node\'s per-socket write.',
  person_during_broadcast_ms:
    'Noisy around the target. With 256 writes per chunk: 19.6, 31.2, 21.4 and 18.8 ms over four runs; with 128 ' +
    '(websocket.fanOutChunk, now the default): 16.4, 15.9 and 9.1 ms. A one-person emit that arrives during a broadcast ' +
    'waits for a chunk of writes at each of its steps (HTTP, Redis reply, delivery); the four wsload processes on ' +
    'the same 2 cores decide the rest.',
  restart_all_back_s:
    'Restarted as a deploy does it (the new process first on the same port, `server.reusePort`, then SIGTERM to the ' +
    'old one), there is no gap: every client comes back to the new process at its first try. What is left is the ' +
    'spread and the intake: the old node closes its 18,000 clients over ~2.3 s (256 every 20 ms), each waits its ' +
    'random 1-5 s, and the new process takes them at ~3,300/s (new process 70-80% CPU, wsload\'s reconnecting workers ' +
    '~100%, the old one draining at 90% in the first second: the 2 cores are full). Draining faster (5 ms, 0 ms) made ' +
    'it worse by hand (9.7-11.9 s against 7.7 s): the drops bunch up ahead of the intake. Stopped and then started ' +
    '(restart_cold), the same clients take ~12 s: the new process listens ~1.5 s after the old one exits, and every ' +
    'attempt in that gap waits another 1-5 s. Would close it: a cheaper handshake (the intake), or the load generator ' +
    'on other cores.',
};
