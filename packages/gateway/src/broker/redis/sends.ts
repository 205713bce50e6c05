/**
 * An emit's sends to other nodes, settled together: a send whose channel's shard is failing over neither hides those
 * that went nor makes the emit look refused (a retry would deliver it twice where it went).
 */
import { DeliveryPending } from '../broker.ts';

/**
 * Answers `nodes` once every send reached its node; `sends`: the SPUBLISHes (answering how many subscribers got it),
 * the others went to this node, already delivered. A send that no subscriber got did not reach its node either: its
 * subscription is being made again (its shard failed over, or came back), or it died. Rejects with DeliveryPending
 * when some reached theirs, or none but the emit is `appended` to a history; else with why.
 */
export async function sentTo(nodes: number, sends: readonly Promise<number>[], appended: boolean): Promise<number> {
  const failures = (await Promise.allSettled(sends)).flatMap((sent): unknown[] => {
    if (sent.status === 'rejected') return [sent.reason];
    return sent.value === 0 ? [new Error('a node is not subscribed to its channel (its shard failing over, or the node gone)')] : [];
  });
  if (failures.length === 0) return nodes;
  const reached = nodes - failures.length;
  throw reached > 0 || appended ? new DeliveryPending(reached, failures[0]) : failures[0];
}
