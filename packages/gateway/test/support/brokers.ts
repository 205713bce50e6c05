/** Test support for brokers wrapped to misbehave in one way: the parts they leave as the inner broker has them. */
import type { Broker } from '../../src/broker/broker.ts';

/** Control messages and revocations, passed on to `inner` unchanged. */
export function controlOf(inner: Broker): Pick<Broker, 'broadcast' | 'sendTo' | 'revoke' | 'revocations'> {
  return {
    broadcast: (message) => inner.broadcast(message),
    sendTo: (nodeId, message) => inner.sendTo(nodeId, message),
    revoke: (subject, revokedAt, keepMs) => inner.revoke(subject, revokedAt, keepMs),
    revocations: (since) => inner.revocations(since),
  };
}
