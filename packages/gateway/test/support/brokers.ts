/** Test support for brokers: an observer that ignores all, and a broker wrapped to misbehave in one way. */
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

/**
 * Every part of `inner`, passed on unchanged with all its arguments: spread it, then replace the part a test makes
 * misbehave. One place to grow with the Broker, so that no wrapper drops an argument the Broker gained.
 */
export function passThrough(inner: Broker): Broker {
  return {
    nodeId: inner.nodeId,
    ready: () => inner.ready(),
    start: (...args) => inner.start(...args),
    addRoute: (...args) => inner.addRoute(...args),
    removeRoute: (...args) => inner.removeRoute(...args),
    publish: (...args) => inner.publish(...args),
    claim: (...args) => inner.claim(...args),
    settle: (...args) => inner.settle(...args),
    history: (...args) => inner.history(...args),
    broadcast: (...args) => inner.broadcast(...args),
    sendTo: (...args) => inner.sendTo(...args),
    revoke: (...args) => inner.revoke(...args),
    revocations: (...args) => inner.revocations(...args),
    liveNodes: () => inner.liveNodes(),
    sendCanary: (...args) => inner.sendCanary(...args),
    putStatus: (...args) => inner.putStatus(...args),
    fleetStatus: () => inner.fleetStatus(),
    close: () => inner.close(),
  };
}
