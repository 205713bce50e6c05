/** A node's status record from its own metrics: counts now, and rates, quantiles and drops over the last interval only. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createMetrics } from '../../src/metrics.ts';
import { StatusSampler } from '../../src/status/record.ts';

test('a record says what happened since the previous one: rates, fan-out, lag and canary quantiles (bucket bounds), drops by reason', async () => {
  const metrics = createMetrics();
  const sampler = new StatusSampler({ metrics, nodeId: 'n1', ready: () => true });
  metrics.connections.inc(3);
  metrics.subscriptions.inc(5);
  metrics.emits.inc({ event: 'a' }, 10);
  metrics.emits.inc({ event: 'b' }, 10);
  metrics.notificationsOut.inc(40);
  for (let i = 0; i < 99; i++) metrics.fanOutSeconds.observe(0.0003);
  metrics.fanOutSeconds.observe(0.2);
  metrics.canaryRoundTrip.observe({ target: 'self' }, 0.0007);
  metrics.deliveryLag.observe(0.04);
  metrics.deliveryLag.observe(0.3);
  metrics.drops.inc({ reason: 'slow_client' }, 2);
  metrics.shed.inc({ reason: 'lag' });
  metrics.canaryMissed.inc({ target: 'peer' });
  const first = await sampler.sample();
  assert.equal(first.nodeId, 'n1');
  assert.equal(first.ready, true);
  assert.deepEqual([first.connections, first.subscriptions], [3, 5]);
  assert.ok(first.emitsPerSecond > 0 && first.notificationsPerSecond === first.emitsPerSecond * 2);
  assert.deepEqual([first.fanOutP50Ms, first.fanOutP99Ms, first.canarySelfMs, first.canaryPeerMs], [0.5, 0.5, 1, null]);
  assert.deepEqual([first.lagP50Ms, first.lagP99Ms], [50, 500]);
  assert.deepEqual(first.drops, { 'notifications:slow_client': 2, 'canary_missed:peer': 1, 'slow_clients_closed:lag': 1 });

  // The next interval: only what happened in it.
  metrics.fanOutSeconds.observe(3);
  metrics.emitsFailed.inc();
  const second = await sampler.sample();
  assert.deepEqual([second.emitsPerSecond, second.notificationsPerSecond], [0, 0]);
  assert.deepEqual([second.fanOutP50Ms, second.fanOutP99Ms], [2500, 2500], 'past the last bucket: its bound');
  assert.equal(second.canarySelfMs, null);
  assert.equal(second.lagP99Ms, null);
  assert.deepEqual(second.drops, { emits_failed: 1 });
  assert.ok(second.at >= first.at);
});
