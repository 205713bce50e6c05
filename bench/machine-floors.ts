/**
 * This machine's floors, in the same run: what a server that does no protocol work gets from it, so that the
 * gateway's rates and latencies can be read against them. A one-person emit answered and written with nothing else
 * done (bench/plain-http-emit.ts: on node:http, on fastify, and on an HTTP reader of its own as the gateway's emit
 * fast path has), and one broadcast written to every client of the last level from a plain `net` server
 * (bench/plain-socket-broadcast.ts, ten of them). Run after the targets, with nothing else running.
 */
import type { BenchContext } from './context.ts';
import { median, ROOT, startLoad } from './procs.ts';
import type { RunRecord } from './results.ts';

const EMIT_FLOOR = `${ROOT}bench/plain-http-emit.ts`;
const BROADCAST_FLOOR = `${ROOT}bench/plain-socket-broadcast.ts`;

/** plain-http-emit.ts's `--json` line. */
type EmitFloor = { emitsPerSecond: number; cpuUsPerEmit: number };
/** plain-socket-broadcast.ts's `--json` line: each counted round's last one told. */
type BroadcastFloor = { lastToldMs: number[] };

export async function machineFloors(ctx: BenchContext): Promise<void> {
  const measure = async <Report extends RunRecord>(name: string, script: string, args: string[]): Promise<Report | undefined> => {
    ctx.results.commands.push(`node ${script.replace(ROOT, '')} ${args.join(' ')}`);
    try {
      const out = await startLoad<Report>(name, script, [...args, '--json'], { logFile: `${ctx.options.runDir}/${name.replace(' ', '-')}.log`, timeoutS: 300 }).done;
      ctx.results.runs[name] = out;
      return out;
    } catch (error) {
      ctx.failed(name, error);
      return undefined;
    }
  };
  for (const server of ['http', 'fastify', 'raw']) {
    const out = await measure<EmitFloor>(`floors notify-${server}`, EMIT_FLOOR, ['--server', server, '--seconds', String(ctx.options.notifyS)]);
    ctx.record(`floor_notify_${server}_per_s`, out?.emitsPerSecond);
    ctx.record(`floor_notify_${server}_us_per_emit`, out?.cpuUsPerEmit);
  }
  // As many sockets as the gateway's broadcast scenario tells: the last memory level.
  const clients = ctx.options.levels.at(-1)!;
  const told = (await measure<BroadcastFloor>('floors broadcast', BROADCAST_FLOOR, ['--clients', String(clients)]))?.lastToldMs ?? [];
  ctx.record('floor_broadcast_last_ms', told.length > 0 ? Math.max(...told) : undefined);
  ctx.record('floor_broadcast_last_p50_ms', median(told));
}
