/**
 * An emit's sends to other nodes, settled together: a send whose channel's shard is failing over neither hides those
 * that went nor makes the emit look refused (a retry would deliver it twice where it went).
 */
import { DeliveryPending } from '../broker.ts';

/**
 * Answers `nodes` once every send went; `sends`: those through Redis (the others: this node, already delivered).
 * Rejects with DeliveryPending when some went, or none but the emit is `appended` to a history; else with the failure.
 */
export async function sentTo(nodes: number, sends: readonly Promise<unknown>[], appended: boolean): Promise<number> {
  const failures = (await Promise.allSettled(sends)).filter((sent) => sent.status === 'rejected');
  if (failures.length === 0) return nodes;
  const reached = nodes - failures.length;
  const cause: unknown = failures[0]!.reason;
  throw reached > 0 || appended ? new DeliveryPending(reached, cause) : cause;
}
