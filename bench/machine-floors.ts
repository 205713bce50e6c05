/**
 * This machine's floors, in the same run: what a server that does no protocol work gets from it, so that the
 * gateway's rates and latencies can be read against them (the misses in bench/missed.ts sit at them). A one-person
 * emit answered and written with nothing else done (bench/plain-http-emit.ts, on node:http, on fastify and on an HTTP
 * reader of its own as the gateway's emit fast path has), and one
 * broadcast written to every client of the last level from a plain `net` server (bench/plain-socket-broadcast.ts, ten of them).
 * Run by bench/run.ts after the targets, with nothing else running; each prints one JSON line with `--json`.
 */
import { median, ROOT, startLoad } from './procs.ts';
import type { Results } from './report.ts';

const NOTIFY_FLOOR = `${ROOT}bench/plain-http-emit.ts`;
const BROADCAST_FLOOR = `${ROOT}bench/plain-socket-broadcast.ts`;

export interface FloorContext {
  runDir: string;
  results: Results;
  record(name: string, value: number | undefined): void;
  /** The broadcast's sockets: as many as the gateway's broadcast scenario tells (the last memory level). */
  clients: number;
  /** The seconds counted of each notify floor, as of each notify run. */
  seconds: number;
}

export async function floorScenario(ctx: FloorContext): Promise<void> {
  const { results, record } = ctx;
  const measure = async (name: string, script: string, args: string[]): Promise<Record<string, any> | undefined> => {
    results.commands.push(`node ${script.replace(ROOT, '')} ${args.join(' ')}`);
    try {
      const out = await startLoad(name, script, [...args, '--json'], { logFile: `${ctx.runDir}/${name.replace(' ', '-')}.log`, timeoutS: 300 }).done;
      results.runs[name] = out;
      return out;
    } catch (error) {
      results.errors.push(`${name}: ${(error as Error).message}`);
      return undefined;
    }
  };
  for (const server of ['http', 'fastify', 'raw']) {
    const out = await measure(`floors notify-${server}`, NOTIFY_FLOOR, ['--server', server, '--seconds', String(ctx.seconds)]);
    record(`floor_notify_${server}_per_s`, out?.emitsPerSecond);
    record(`floor_notify_${server}_us_per_emit`, out?.cpuUsPerEmit);
  }
  const told: number[] = (await measure('floors broadcast', BROADCAST_FLOOR, ['--clients', String(ctx.clients)]))?.lastToldMs ?? [];
  record('floor_broadcast_last_ms', told.length > 0 ? Math.max(...told) : undefined);
  record('floor_broadcast_last_p50_ms', median(told));
}
