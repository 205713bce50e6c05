/** REGISTER and UNREGISTER: what is accepted, every refusal, and bad frames that must disturb nobody. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Broker } from '../../src/broker/broker.ts';
import { MemoryBus } from '../../src/broker/memory.ts';
import { passThrough } from '../support/brokers.ts';
import { until } from '../support/fleet.ts';
import { TestSocket, apiToken, metric, onEvent, personToken, startNode, type TestNode } from '../support/gateway.ts';

let node: TestNode;
let api: string;
let nick: string;

before(async () => {
  node = await startNode((raw) => {
    raw.websocket = { maxSubscriptionsPerConnection: 3, maxPayload: 2048 };
    raw.apiUsers.viewer = { password: 'viewer-password', groups: ['viewers'] };
    raw.events['staff-only'] = { groups: { register: ['staff'], emit: ['staff'] } };
  });
  api = await apiToken(node);
  nick = await personToken(node, 'NICK', 'WAHLBERG');
});
after(() => node.close());

const codes = (invalid: Array<{ errors: Array<{ code: string }> }>) => invalid.map((entry) => entry.errors[0]?.code);

describe('REGISTER', () => {
  test('your own recipientId is accepted, with an eventId, and the entry echoed', async () => {
    const client = await TestSocket.connect(node, api, nick);
    const reply = await client.register(onEvent('order-updates', { recipientId: '2' }));
    assert.equal(reply.invalidOnEvents.length, 0);
    const [valid] = reply.validOnEvents;
    assert.equal(valid?.apiName, 'order-updates');
    assert.deepEqual(valid?.condition, { conditionType: 'RESPONSE', criteria: { recipientId: '2' } });
    assert.match(valid?.eventId ?? '', /^[\w-]{22}$/);
    await client.close();
  });

  test('the number 2 is the same recipient as "2"; registering it again is idempotent', async () => {
    const client = await TestSocket.connect(node, api, nick);
    const held = await metric(node, 'herald_subscriptions');
    const first = await client.register(onEvent('order-updates', { recipientId: 2 }));
    const again = await client.register(onEvent('order-updates', { recipientId: '2' }));
    assert.equal(first.validOnEvents[0]?.eventId, again.validOnEvents[0]?.eventId);
    assert.equal(await metric(node, 'herald_subscriptions'), held + 1);
    await client.close();
  });

  test('every refusal lands in invalidOnEvents with its code, beside the valid entries', async () => {
    const viewer = await apiToken(node, 'viewer', 'viewer-password');
    const client = await TestSocket.connect(node, api, nick);
    const reply = await client.register(
      onEvent('order-updates', { recipientId: '3' }),
      onEvent('order-updates'),
      onEvent('no-such-event'),
      onEvent('staff-only'),
      onEvent('announcements', { region: { $ne: 'EU' } }),
      { ...onEvent('announcements'), eventType: 'DATABASE_EVENTS' },
      'not an object',
      onEvent('announcements'),
    );
    assert.deepEqual(codes(reply.invalidOnEvents), [
      'CRITERIA_NOT_YOURS',
      'CRITERIA_NOT_YOURS',
      'UNKNOWN_EVENT',
      'EVENT_FORBIDDEN',
      'CRITERIA_NOT_SCALAR',
      'UNKNOWN_EVENT_TYPE',
      'BAD_FRAME',
    ]);
    assert.equal(reply.invalidOnEvents[2]?.apiName, 'no-such-event');
    assert.equal(reply.invalidOnEvents[6]?.entry, 'not an object');
    assert.deepEqual(reply.validOnEvents.map((entry) => entry.apiName), ['announcements']);
    await client.close();

    const viewing = await TestSocket.connect(node, viewer);
    const refused = await viewing.register(onEvent('announcements'));
    assert.deepEqual(codes(refused.invalidOnEvents), ['EVENT_FORBIDDEN']);
    await viewing.close();
  });

  test('a bound event needs a person token', async () => {
    const client = await TestSocket.connect(node, api);
    const reply = await client.register(onEvent('order-updates', { recipientId: '2' }));
    assert.deepEqual(codes(reply.invalidOnEvents), ['PERSON_TOKEN_REQUIRED']);
    await client.close();
  });

  test('past the subscription cap: TOO_MANY_SUBSCRIPTIONS, the rest kept', async () => {
    const client = await TestSocket.connect(node, api, nick);
    const reply = await client.register(
      onEvent('announcements'),
      onEvent('announcements', { region: 'EU' }),
      onEvent('announcements', { region: 'US' }),
      onEvent('announcements', { region: 'IN' }),
    );
    assert.equal(reply.validOnEvents.length, 3);
    assert.deepEqual(codes(reply.invalidOnEvents), ['TOO_MANY_SUBSCRIPTIONS']);
    await client.close();
  });
});

describe('UNREGISTER', () => {
  test('a held eventId is released; an unknown one or a bad entry is refused', async () => {
    const client = await TestSocket.connect(node, api, nick);
    const { validOnEvents } = await client.register(onEvent('announcements'));
    const eventId = validOnEvents[0]?.eventId;
    client.send({ objType: 'UNREGISTER', onEvents: [{ eventId }, { eventId: 'nope' }, {}] });
    const reply = (await client.next('UNREGISTER')).response;
    assert.deepEqual(reply.validOnEvents, [{ eventId }]);
    assert.deepEqual(codes(reply.invalidOnEvents), ['UNKNOWN_EVENT_ID', 'BAD_FRAME']);
    await client.close();
  });
});

describe('bad frames', () => {
  test('malformed JSON, a non-object, an unknown objType, a missing onEvents: an ERROR each, and the connection goes on', async () => {
    const client = await TestSocket.connect(node, api, nick);
    const before = await metric(node, 'herald_refusals_total', { code: 'MALFORMED_JSON' });
    for (const [frame, code] of [
      ['{"objType":', 'MALFORMED_JSON'],
      ['[1,2]', 'BAD_FRAME'],
      ['{"objType":"SUBSCRIBE","onEvents":[]}', 'UNKNOWN_OBJ_TYPE'],
      ['{"objType":"REGISTER"}', 'BAD_FRAME'],
    ] as const) {
      client.send(frame);
      const error = await client.next('ERROR');
      assert.equal(error.errors[0]?.code, code, frame);
    }
    assert.equal(await metric(node, 'herald_refusals_total', { code: 'MALFORMED_JSON' }), before + 1);
    const reply = await client.register(onEvent('announcements'));
    assert.equal(reply.validOnEvents.length, 1);
    await client.close();
  });

  test('a frame over the size limit closes that socket with 1009 and nobody else', async () => {
    const bystander = await TestSocket.connect(node, api, nick);
    const offender = await TestSocket.connect(node, api, nick);
    offender.send(JSON.stringify({ objType: 'REGISTER', onEvents: [], padding: 'x'.repeat(4096) }));
    assert.equal((await offender.closed).code, 1009);
    const reply = await bystander.register(onEvent('announcements'));
    assert.equal(reply.validOnEvents.length, 1);
    await bystander.close();
  });
});

describe('a client that leaves before its REGISTER is answered', () => {
  test('what it subscribed goes with it, a REGISTER taken up after the close subscribes nothing, and the replies are counted as dropped', async () => {
    // A broker whose first route write waits for the test: the client leaves while its REGISTER is unanswered.
    const memory = new MemoryBus().broker('gated');
    let reached!: () => void;
    const routeWriteReached = new Promise<void>((resolve) => (reached = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const broker: Broker = {
      ...passThrough(memory),
      addRoute: async (route) => {
        reached();
        await released;
        await memory.addRoute(route);
      },
      // Behind the gate too, so that the routes' writes keep their call order (the Broker contract).
      removeRoute: async (route) => {
        await released;
        await memory.removeRoute(route);
      },
    };
    const gated = await startNode(() => {}, { broker });
    try {
      const client = await TestSocket.connect(gated, await apiToken(gated));
      client.send({ objType: 'REGISTER', onEvents: [onEvent('announcements')] });
      await routeWriteReached;
      // Queued behind the first reply: the node takes it up only after the close.
      client.send({ objType: 'REGISTER', onEvents: [onEvent('announcements', { recipientId: '7' })] });
      await client.close();
      await until(async () => (await metric(gated, 'herald_connections')) === 0, 'the node to let the client go');
      release();
      await until(async () => (await metric(gated, 'herald_replies_dropped_total')) === 2, 'both replies to be dropped');
      assert.equal(await metric(gated, 'herald_subscriptions'), 0);
      assert.equal(await metric(gated, 'herald_routes'), 0);
      assert.equal(await metric(gated, 'herald_refusals_total', { code: 'UNAVAILABLE' }), 1);
    } finally {
      await gated.close();
    }
  });
});
