/**
 * A worker process of `WorkerPools`: holds its pools (one per `open`: a bench adding clients level by level opens
 * another in the same worker) and answers its parent's requests over IPC. Forked by the parent, never run by hand.
 */
import { Pool, type PoolSpec } from './pool.ts';
import { emptySnapshot, mergeSnapshots } from './snapshot.ts';

export type WorkerRequest =
  | { id: number; op: 'open'; spec: PoolSpec }
  | { id: number; op: 'abort' }
  | { id: number; op: 'snapshot'; withRecipients: boolean }
  | { id: number; op: 'reset' }
  | { id: number; op: 'subscribe'; frame: string; rate: number }
  | { id: number; op: 'close' };

export interface WorkerReply {
  id: number;
  result?: unknown;
  error?: string;
}

const pools: Pool[] = [];
/** Aborts every open, now and later: once the parent stops adding clients, it adds no more. */
const opening = new AbortController();

async function handle(request: WorkerRequest): Promise<unknown> {
  switch (request.op) {
    case 'open': {
      const pool = new Pool(request.spec);
      pools.push(pool);
      return pool.open(opening.signal);
    }
    case 'abort':
      return opening.abort();
    case 'snapshot':
      if (pools.length === 0) return emptySnapshot();
      return pools.length === 1 ? pools[0]!.snapshot(request.withRecipients) : mergeSnapshots(await Promise.all(pools.map((pool) => pool.snapshot(request.withRecipients))));
    case 'reset':
      return Promise.all(pools.map((pool) => pool.resetDelivery()));
    case 'subscribe': {
      // Each pool takes its share of the rate, in proportion to its clients.
      const held = pools.reduce((sum, pool) => sum + pool.size, 0);
      const sent = await Promise.all(pools.map((pool) => pool.subscribeAll(request.frame, (request.rate * pool.size) / Math.max(1, held))));
      return sent.reduce((sum, n) => sum + n, 0);
    }
    case 'close':
      await Promise.all(pools.map((pool) => pool.close()));
      setImmediate(() => process.disconnect());
      return undefined;
  }
}

process.on('message', (request: WorkerRequest) => {
  handle(request).then(
    (result) => process.send?.({ id: request.id, result } satisfies WorkerReply),
    (error: unknown) => process.send?.({ id: request.id, error: (error as Error).message } satisfies WorkerReply),
  );
});

// Ctrl-C reaches the whole process group: the parent decides when the clients go, and reports first.
process.on('SIGINT', () => {});
// The parent is gone (or closed us): drop the clients and leave.
process.on('disconnect', () => {
  for (const pool of pools) void pool.close();
  process.exit(0);
});
