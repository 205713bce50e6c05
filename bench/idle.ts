/**
 * Issue 36: a node with no client. The gateway as `make run` starts it (its Node.js options, the compile cache, the
 * default config: in-process broker, in-memory data, events with can-connect code), then with Redis, and the bare
 * `ws` peer (bench/peers/bare-ws.ts, with its Redis) on the same machine: each started afresh, its RSS read
 * IDLE_S after it answers, the figure the median of the starts. A first start of each is not counted: it fills the
 * compile cache, as any first start after a change does.
 *
 *   node bench/run.ts --only idle [--quick]
 */
import type { BenchContext } from './context.ts';
import { GATEWAY_NODE_ARGS, ROOT, rssKb, sleep, start, startRedis, stop, waitFor } from './procs.ts';

/** How long a node idles before its RSS is read: V8 returns what its start grew (main.ts) within ~10 s. */
const IDLE_S = 20;
const PORT = 25150;
const REDIS_PORT = 25151;
const COMPILE_CACHE = `${ROOT}.run/node-compile-cache`;

interface Idler { figure: string; name: string; args: string[]; env: Record<string, string>; ready: string }

const idlers = (redisUrl: string): Idler[] => [
  { figure: 'node_idle_rss_mb', name: 'gateway', args: [...GATEWAY_NODE_ARGS, 'packages/gateway/src/main.ts'], env: {}, ready: '/readyz' },
  { figure: 'node_idle_redis_rss_mb', name: 'gateway-redis', args: [...GATEWAY_NODE_ARGS, 'packages/gateway/src/main.ts'], env: { REDIS_URL: redisUrl }, ready: '/readyz' },
  { figure: 'bare_node_idle_rss_mb', name: 'bare', args: ['bench/peers/bare-ws.ts'], env: { REDIS_URL: redisUrl }, ready: '/stats' },
];

/** One start: its RSS in MB once it has answered and idled IDLE_S. */
async function idleRssMb(ctx: BenchContext, idler: Idler): Promise<number> {
  const env = { ...idler.env, PORT: String(PORT), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_COMPILE_CACHE: COMPILE_CACHE };
  const proc = start(`idle ${idler.name}`, 'node', idler.args.map((arg) => (arg.endsWith('.ts') ? `${ROOT}${arg}` : arg)), env, `${ctx.options.runDir}/idle-${idler.name}.log`);
  try {
    await waitFor(`${idler.name} on ${PORT}`, async () => (await fetch(`http://127.0.0.1:${PORT}${idler.ready}`)).ok, 60_000, 100, proc);
    await sleep(IDLE_S * 1000);
    return rssKb(proc.child.pid!) / 1024;
  } finally {
    await stop(proc, 'SIGTERM', 5000);
  }
}

export async function idleScenario(ctx: BenchContext): Promise<void> {
  const redis = await startRedis('idle redis', REDIS_PORT, `${ctx.options.runDir}/idle-redis.log`);
  try {
    for (const idler of idlers(`redis://127.0.0.1:${REDIS_PORT}`)) {
      ctx.results.commands.push(`${Object.entries({ ...idler.env, NODE_COMPILE_CACHE: '.run/node-compile-cache' }).map(([k, v]) => `${k}=${v}`).join(' ')} node ${idler.args.join(' ')}`);
      const runs = ctx.options.quick ? 1 : 3;
      await ctx.medianOfRuns(`idle ${idler.name}`, runs + 1, async (run) => {
        const mb = await idleRssMb(ctx, idler);
        ctx.results.runs[`idle ${idler.name} ${run}`] = { rssMb: mb, counted: run > 1 };
        return run === 1 ? {} : { [idler.figure]: mb };
      });
    }
  } finally {
    await stop(redis);
  }
}
