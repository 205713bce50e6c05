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
    'Around the target in this machine\'s slow phase for connections, met outside it: the full runs of 2026-12-02 ' +
    '07:41 and 08:30 UTC read 6,548/6,556 and 7,136/7,077/s (Socket.IO 2,948 and 3,052). Earlier that day, the full run of 05:49 UTC read ' +
    '6,083 and 6,050/s, the rerun of 07:07 (`--only memory,churn,pairs`) 5,689 and 5,764/s while its side-by-side ' +
    'rounds read 6,069-6,599/s (2.23× Socket.IO); Socket.IO\'s own churn fell from ~3,430 to ~2,800/s the same way. ' +
    'The full run of 2026-12-02 02:50 UTC, on the code before the emit fast path, had read 10,102/s. The fast path ' +
    'reads each connection\'s first bytes before Node\'s HTTP server does (src/http/fast-path.ts): 2.0 µs more per ' +
    'upgrade on a bare Node HTTP server (36.6 against 38.8 µs, a script alternating the two, three rounds of 20,000 ' +
    'upgrades each), and 1-2% of the node\'s CPU per churned client (`wsload churn ws://… -c 100 -w 3 -d 10 ' +
    '--register announcements --per-client --tokens both`, /proc/<pid>/stat, four alternated pairs each: ' +
    '`server.emitFastPath` on 151-160 µs against off 147-156; HEAD against the commit before the fast path 154-164 ' +
    'against 150-163). A first set of five pairs, in a noisier minute, had read 5-7%. ' +
    '`server.emitFastPath: false` gives it back. ' +
    'The node\'s one core is the limit: a third of its time per client is the kernel\'s (~17 system calls; on ' +
    'loopback each write also runs the receiving end\'s TCP and wakes its reader), the rest spread over Node\'s ' +
    'HTTP parser and upgrade, ws\'s handshake (its SHA-1), ioredis, ours and GC with no single hot spot. Would ' +
    'close it: a handshake read off the raw socket, leaner than Node\'s HTTP server and ws; or the churn on more ' +
    'than one core (a second process on the port, as the restart\'s SO_REUSEPORT allows, is another node)',
  churn_subscribe_vs_socketio:
    'The full run of 2026-12-01 04:10 UTC: 1.81× (3,266 against 1,801/s); that of 03:29 UTC: 1.69× (3,854 against 2,285/s); that of 02:45 UTC: 1.78× (4,030 against 2,266/s). The full runs before it read 1.73-2.51×, ' +
    'but there Socket.IO\'s first churn ran at half speed: peer-load bound each churn client to a source address ' +
    'that the memory levels\' fills had just left TIME_WAITs on, and its load generator spent ~12 s of the 20 in ' +
    'the kernel finding ports (sampled: 100% of a core, ~95% system). peer-load\'s churn now takes no source ' +
    'address, as wsload\'s never did, and its two runs agree (2,324 and 2,209/s). Socket.IO\'s rate is held by its ' +
    'own client (socket.io-client at 100% of a core, the server at 66%), which is what its users run. Closing it is ' +
    'closing churn_subscribe_per_s.',
  notify_person_per_s:
    'The notify-person rerun of 2026-12-01 23:18 UTC (`node bench/run.ts --only notify-person`): 19,248 and 19,741/s, ' +
    'its side-by-side pairs 18,881-23,475/s; the bare peer, which does no protocol work, read 18,747 and 21,427/s in ' +
    'the same rerun. The full run of 21:58 UTC, on the same code: 29,266/s (the bare peer 16,068/s). The machine\'s ' +
    'phase, then: the same build read 32-50 µs of node CPU per emit within minutes by hand. ' +
    'The full run of 2026-12-01 07:21 UTC: 19,463 and 19,844/s (2.11× Socket.IO, whose runs read 9,746 and ' +
    '8,923/s; the bare peer 14,239/s). Met in that of 06:48 UTC: 21,243 and 21,394/s (2.92×; the bare peer 13,248/s). ' +
    'That of 06:11 UTC read 16,105 and 16,869/s (2.27×; the bare peer 10,271/s). Since then the emits of one turn of the event loop share one read of their event\'s shapes (broker/redis/broker.ts ' +
    '#readShapes): ~60 unpaced emits to a turn, 2,790 SMEMBERS for 166,505 HGETs (INFO commandstats), so ~1 Redis ' +
    'command per emit instead of 2; by hand, 14 runs each alternated on a machine that swung 10,000-20,500/s, a ' +
    'median of 18,426/s against 14,936/s. ' +
    'The node is the limit: 93-96% of a core through the run ("Where the CPU went"; wsload ~50%), and what a ' +
    'notification costs it moves with the machine, not with our state. Alternated by hand on fresh nodes on ' +
    '2026-12-01 (60 s idle, or 40 s of churn on another node, then a fill of 9,000 and two `wsload notify ' +
    'http://… --clients 1000 -c 100 -d 10`): idle first 17,776, 17,837, 16,984 and 17,249/s; churn first 16,942, ' +
    '15,969, 20,230 and 22,169/s, while a fixed CPU loop took the same 1.1 s throughout; the full run of 01:34 ' +
    'read 13,968 and 17,211/s (~60 µs of the node a notification), those of 02:16 and 02:45 18,493, 18,798, 16,757 ' +
    'and 19,230/s (~52 µs), that of 03:29 16,815 and 16,381/s, that of 04:10 11,522 and 11,950/s (the peers as low: ' +
    'Socket.IO 5,975/s against 8,775 at 03:29, bare 8,841 against 12,891), that of 04:44 13,112 and 15,709/s, and ' +
    'the run of 00:49 22,564/s (~43 µs). Two changes took it this far: the Redis commands of a turn go out through one corked ' +
    'socket instead of ioredis\'s autopipelining (broker/redis/connection.ts; 16,300-18,700/s by hand against ' +
    '13,700-14,100/s), and a verified API token is kept by its exact text (auth/jwt.ts), which spares fast-jwt\'s ' +
    'SHA-256 cache key on every emit (~2.5 µs). Profile (`--cpu-prof`): the write system calls ~20% (the HTTP ' +
    'answer, the NOTIFICATION frame, Redis), ioredis ~8%, fastify\'s JSON body parser ~3% (secure-json-parse, ' +
    'kept: it guards against prototype poisoning), GC ~4%; no part of ours above 3%. Writing a turn\'s frames per ' +
    'client in one system call (what took broadcasts to ~1,000,000/s) does not help here: each emit names another ' +
    'client. Would close it for good: fewer system calls per emit (the HTTP answer and the frame are one each, ' +
    'and Redis\'s share is one per turn already), or the emitter on other cores.',
  notify_person_vs_socketio:
    'Met in the full run of 2026-12-02 05:49 UTC, the first with the fast path: 2.25× (rounds 2.28, 2.15, 2.46, 2.12, ' +
    '2.25; the gateway 29,899-34,092/s at 29.3 µs per emit, Socket.IO 13,511-14,875/s at 71.5). ' +
    'Node\'s HTTP server was half the node\'s CPU per emit, so plain emits are now read by the gateway itself ' +
    '(src/http/fast-path.ts; anything else still goes to fastify). By hand on 2026-12-02 ~05:35 UTC (a fresh node on ' +
    'Redis, `wsload notify http://… --clients 1000 -c 100 -w 2 -d 10`, /proc/<pid>/stat over 5 s, alternated): ' +
    '29.1 and 31.3 µs per emit at 31,490-33,825/s with the fast path, 41.3 and 47.1 µs at 21,104-24,081/s without ' +
    '(`server.emitFastPath: false`). The floors of the same kind (`node bench/plain-http-emit.ts`, 5 s each): an HTTP ' +
    'reader of its own 18.9 µs, node:http 35.5. What is left above that floor (~10 µs) is the protocol: the registry ' +
    'read on Redis (~15% of the profile with its promises), the match, the frame, the metrics. Socket.IO\'s server ' +
    'costs 48-97 µs per emit here depending on the minute, and the ratio is the median of five side-by-side rounds ' +
    'whose single rounds have read 1.08-1.94× before the fast path: a miss now is a round of Socket.IO\'s fast phase ' +
    'against one of our slow ones. Would close it further: the registry read per emit (a node-local cache of the ' +
    'routes, kept by the same Redis channel that carries the emits), or the emitter on other cores',
  paced_p99_ms:
    'The full run of 2026-12-02 01:50 UTC: 3.67 and 1.59 ms (the bare peer 1.37, Socket.IO 4.92), with the machine ' +
    '34% busy of 200 and nothing stolen. Met in the full runs of 2026-12-01 21:58 UTC (0.92 and 1.50 ms; Socket.IO 5.28 median, the bare peer 1.57) ' +
    'and 20:35 UTC (2.00 and 1.50 ms; Socket.IO 4.50 and 4.04, the bare peer 4.16 ' +
    'and 2.75), missed in that of 19:43 UTC (4.59 and 4.09 ms, the bare peer 1.64): the tail moves with the ' +
    'machine more than with the code. Its floor here: a message relayed through three processes at 1,000/s ' +
    '(client → relay → echo and back, plain TCP, Node) returns in p99 0.39 ms, so the gateway\'s path (emitter → ' +
    'node → Redis → node → listener) leaves ~1 ms of the 2 to the processes. By hand (fresh node on Redis, a fill ' +
    'of 9,000, `wsload notify http://… --clients 1000 -c 100 -w 2 -R 1000 -d 20`, 2026-12-01 20:15-20:30 UTC): p99 ' +
    '1.54-2.42 ms; 60-s runs after unpaced runs 0.85 ms, and 1.39 ms on a node that had also held 8,000 more ' +
    'clients and churned 340,000. The slow deliveries (over 1.5 ms) come alone or in twos, 10-20 a second in the ' +
    'first seconds and 0-8 a second after ~15 s, not in stalls; the emitter\'s HTTP answers have the same p99, so ' +
    'the delay is on the shared path. The node scavenges every ~0.55 s for 0.45-1.5 ms (`--trace-gc`): a paced ' +
    'emit allocated ~26 KB (sampling heap profile with collected objects, 5 s of `-R 1000`, 2026-12-01 20:25 UTC: ' +
    'fastify 5.8 KB, Node\'s HTTP 5.4, our broker 5.7, ioredis 3.9, hub 2.1; the emit\'s reads have left ioredis ' +
    'since, reads.ts). The machine adds its own: the kernel is booted with ' +
    '`haltpoll.guest_halt_poll_ns=0`, so an idle vCPU is woken through the host, and a C process sleeping 1 ms at ' +
    'a time woke 5-35 ms late several times a minute under this load (never at idle); 200 µs of polling (set by ' +
    'hand, then back) took two 20-s runs from 5.26/4.14 to 3.58/2.33 ms. Each run emits 2 s before it counts ' +
    '(`-w 2`): its listeners connect just before, and the collections of the next second copy them (4-10 ms ' +
    'pauses, 0.5-1.5 ms after). Would close it for good: fewer bytes allocated per emit (fewer scavenges), and ' +
    'idle vCPUs that poll before they halt',
  broadcast_1k_per_s:
    'Was the write system call per recipient: the node\'s profile was 76% in the native write (handleWriteReq), ' +
    '~4.8 µs per loopback write here (`wsload notify http://… --clients 1000 -c 100 -d 10 --broadcast`), 145,000-' +
    '182,000/s over the runs. The hub now holds a client\'s frames of one turn of the event loop and sends them in ' +
    'one writev (CoalescedWrites, transport/frames.ts): 786,000-871,000/s by hand, ~990,000/s in the full run. A ' +
    'miss now would be the machine\'s phase: see the bare and Socket.IO peers of the same run',
  broadcast_1k_vs_socketio: 'See broadcast_1k_per_s.',
  broadcast_18k_last_ms:
    'At the machine\'s floor, once the floor writes in the gateway\'s order and both leave out their first rounds. ' +
    'The figure is the median over two runs of each run\'s slowest broadcast, the first two of a run not counted (as ' +
    'the other notify runs\' first seconds): the first after the 18,000 connect was the slowest of every run (full ' +
    'run of 2026-12-02 08:30 UTC, all counted: 280 and 263 ms, the rest 159-241; by hand without the person run ' +
    '193-202, the rest 158-182), with cold code in the readers and the node and the person run\'s process starting ' +
    'beside it. Counted so, `--only broadcast-18k` at 09:17 UTC read 175 and 194 (median broadcast 168); the floor ' +
    'of 09:18 (`node bench/plain-socket-broadcast.ts`, interleaved, 2 rounds of warm-up) 229, median 172. On loopback each write also ' +
    'runs the reader\'s TCP and, when the reader sleeps, wakes it (an IPI to the other vCPU, dear in a VM). wsload\'s ' +
    'three workers connect side by side, so the hub\'s subscribers alternate between them and nearly every write ' +
    'wakes one: `perf record -g -p <node>` during the broadcasts (2026-12-02 ~06:05 UTC) put 22% of the node\'s ' +
    'samples in those wakeups (sock_def_readable, from the write), against 11% for a floor writing one reader\'s ' +
    'sockets after another (`--order grouped`: median 114-129 ms, slowest 143-166; interleaved: median 189-213, ' +
    'slowest 214-245, same minutes). Per broadcast the node spends 30-70 ms in user space (our JS ~10 ms of it, ' +
    '`--cpu-prof`) and 110-210 in the kernel (/proc/<pid>/stat every 5 ms); writing each frame at once instead of ' +
    'corked until the turn\'s end changed neither. Would close it for good: the load generators on other machines ' +
    '(the readers\' TCP and wakeups then run there, as in the reference\'s runs), or clients that reach the node ' +
    'grouped by load process (the grouped floor above)',
  person_during_broadcast_ms:
    'Noisy around the target: 7.5-14.2 ms by hand on a fresh node (`wsload notify … --clients 18000 --per-worker ' +
    '6000 -c 1 -R 1 -d 10 --broadcast`, and 100 one-person emits a second meanwhile), 9.5-11.6 ms in `--only ' +
    'broadcast-18k` runs, 31.8 and 34.9 ms in two full runs and 10.5 ms in the next. On a node that first ran ' +
    'the other scenarios (churn and the notify runs by hand) one run in four read 33 ms. A one-person emit that ' +
    'arrives during a broadcast waits for a chunk of 128 writes (fanOutChunk) at each of its steps (HTTP, Redis ' +
    'reply, delivery); the four wsload processes on the same 2 cores decide the rest',
  restart_all_back_s:
    'Restarted as a deploy does it (the new process first on the same port, `server.reusePort`, then SIGTERM to ' +
    'the old one), none is lost. Four changes took it from 7.1-8.0 s with away p50 3.9 s to 6.8-7.6 s with away ' +
    'p50 0.75-1.1 s (`--only restart`, two runs at a time): the listen backlog (Node\'s 511 overflowed, `nstat` ' +
    'ListenOverflows, each dropped handshake costing its client 1 s and more of TCP retries; now 4096), the SDK\'s ' +
    'first attempt after a 1001 within 0-1 s instead of 1-5 s (the drain has spread the closes already), the drain ' +
    'paced at 256 every 75 ms instead of 20, and an admission queue of 8192 instead of 4096. At 20 ms the ' +
    'successor\'s queue overflowed (4,642 refused, 9.2 s); at 50 ms in some runs (0-1,206 refused, 6.3-11.7 s); at ' +
    '75 ms with a queue of 4096 in one run of four (1,383 refused, 11.3 s); a refused client waits 1-5 s. Backing ' +
    'off from 0-1 s after a refusal instead brought more refusals (4,991) and 8.3-10.2 s. What is left is the drain ' +
    'itself (70 batches, ~5.3 s), the last client\'s own wait (up to 1 s), and the successor\'s intake, ~2,700-' +
    '3,400 clients/s while the old node drains and wsload\'s reconnecting workers share the 2 cores (`wsload fill ' +
    'ws://… --clients 18000 --rate 4000 --per-worker 6000 --register announcements --per-client` on a fresh node: ' +
    '2,756-3,253/s). Its profile (`--cpu-prof`, same command): write system calls ~19% (the 101 and CONNECTED in ' +
    'one writev, the REGISTER reply, Redis), fastify\'s routing and hooks of the upgrade ~18%, ws\'s upgrade ~12%, ' +
    'GC ~6%, no single part of ours above 1%. Two later changes met it (6.21 s, 6.21 and 6.22, in the full run ' +
    'of 2026-12-01 00:17 UTC): wsload\'s clients speak WebSocket on plain TCP sockets (wire.ts; ~30% less CPU per ' +
    'connect than a ws client, which the successor gets: away p50 0.5-0.6 s against ~1 s), and batch n of the drain ' +
    'is due n × 75 ms after its start (70 pauses of 75 ms after each batch\'s closes took ~6 s, not 5.2). In a slow ' +
    'phase the successor still falls behind the drain: 8.07 s in one run of the full run of 2026-11-30 23:46.',
};
