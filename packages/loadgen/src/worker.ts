/**
 * A worker process of `WorkerPools`: holds one Pool and answers its parent's requests over IPC.
 * Forked by the parent, never run by hand.
 */
import { Pool, type PoolSpec } from './pool.ts';
import { emptySnapshot } from './snapshot.ts';

export type WorkerRequest =
  | { id: number; op: 'open'; spec: PoolSpec }
  | { id: number; op: 'abort' }
  | { id: number; op: 'snapshot'; withRecipients: boolean }
  | { id: number; op: 'reset' }
  | { id: number; op: 'close' };

export interface WorkerReply {
  id: number;
  result?: unknown;
  error?: string;
}

let pool: Pool | undefined;
const opening = new AbortController();

async function handle(request: WorkerRequest): Promise<unknown> {
  switch (request.op) {
    case 'open':
      pool = new Pool(request.spec);
      return pool.open(opening.signal);
    case 'abort':
      return opening.abort();
    case 'snapshot':
      return pool ? pool.snapshot(request.withRecipients) : emptySnapshot();
    case 'reset':
      return pool?.resetDelivery();
    case 'close':
      await pool?.close();
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
  void pool?.close();
  process.exit(0);
});
