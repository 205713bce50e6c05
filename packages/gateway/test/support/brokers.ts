/** Test support for brokers wrapped to misbehave in one way: the parts they leave as the inner broker has them. */
import type { Broker, BrokerObserver } from '../../src/broker/broker.ts';

/** An observer of a broker's health that ignores all of it. */
export const quietObserver: BrokerObserver = {
  resynced() {},
  swept() {},
  sweepDeferred() {},
  spared() {},
  writeFailed() {},
  leanReads() {},
  undeliverable() {},
  historyAppended() {},
  historyAppendFailed() {},
  redisLost() {},
  redisBack() {},
};

/** Control messages, revocations, canaries, status records and idempotency keys, passed on to `inner` unchanged. */
export function controlOf(
  inner: Broker,
): Pick<Broker, 'broadcast' | 'sendTo' | 'revoke' | 'revocations' | 'liveNodes' | 'sendCanary' | 'putStatus' | 'fleetStatus' | 'claim' | 'settle'> {
  return {
    claim: (once, digest, pendingMs) => inner.claim(once, digest, pendingMs),
    settle: (once, digest, answer) => inner.settle(once, digest, answer),
    liveNodes: () => inner.liveNodes(),
    sendCanary: (nodeId, canary) => inner.sendCanary(nodeId, canary),
    putStatus: (record) => inner.putStatus(record),
    fleetStatus: () => inner.fleetStatus(),
    broadcast: (message) => inner.broadcast(message),
    sendTo: (nodeId, message) => inner.sendTo(nodeId, message),
    revoke: (subject, revokedAt, keepMs) => inner.revoke(subject, revokedAt, keepMs),
    revocations: (since) => inner.revocations(since),
  };
}
