/** Route keys and matching (events/routing.ts): the strings the hub and the fleet's registry meet on. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { EventType, type OnEvent } from '@herald/protocol';
import { eventIdOf, project, routeEventOf, routeOf, scalarString, tableEvent, valuesKeyIn } from '../../src/events/routing.ts';

const register = (more: Partial<OnEvent> = {}): OnEvent => ({ eventType: EventType.CUSTOM_WS_EVENTS, apiName: 'order-updates', getEventData: true, ...more });

describe('route keys', () => {
  it('are <event>|<sorted fields>|<values>, as docs/architecture.md shows them', () => {
    assert.equal(routeOf('order-updates', { recipientId: 2 }).key, 'order-updates|recipientId|2');
    assert.equal(routeOf('announcements', undefined).key, 'announcements||');
    assert.equal(routeOf('order-updates', { status: 'shipped', recipientId: 2 }).key, 'order-updates|recipientId,status|1:27:shipped');
  });

  it('compare values in string form: 2, "2" and true, "true" are one route', () => {
    assert.equal(routeOf('e', { id: 2 }).key, routeOf('e', { id: '2' }).key);
    assert.equal(routeOf('e', { flag: true }).key, routeOf('e', { flag: 'true' }).key);
    assert.equal(scalarString(null), undefined);
    assert.equal(scalarString({}), undefined);
  });

  it('never meet for different criteria: no value can forge the separators', () => {
    const criteria = fc.dictionary(fc.constantFrom('a', 'b', 'c'), fc.oneof(fc.string(), fc.integer()), { minKeys: 1 });
    fc.assert(
      fc.property(criteria, criteria, (one, other) => {
        const same = routeOf('e', one).key === routeOf('e', other).key;
        const equal = JSON.stringify(Object.entries(one).map(([k, v]) => [k, String(v)]).sort()) ===
          JSON.stringify(Object.entries(other).map(([k, v]) => [k, String(v)]).sort());
        assert.equal(same, equal);
      }),
    );
  });

  it('an emit finds the route of every criteria it satisfies, per shape, and none when a field is missing or not a scalar', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1 }), fc.oneof(fc.string(), fc.integer(), fc.boolean()), { minKeys: 1 }), (criteria) => {
        const route = routeOf('e', criteria);
        assert.equal(valuesKeyIn({ ...criteria, other: 'x' }, route.fields), route.valuesKey);
      }),
    );
    const { fields } = routeOf('e', { a: 1, b: 2 });
    assert.equal(valuesKeyIn({ a: 1 }, fields), undefined);
    assert.equal(valuesKeyIn({ a: 1, b: { nested: true } }, fields), undefined);
    assert.equal(valuesKeyIn({ a: [1] }, routeOf('e', { a: 1 }).fields), undefined);
  });
});

describe('events and eventIds', () => {
  it("a table's INSTANCES entry routes under the table's internal event", () => {
    const entry = register({ eventType: EventType.INSTANCES, apiName: 'SCHEMA_POST_BULK_INSERT', instance: 'mongodb', database: 'db', collection: 'c' });
    assert.equal(routeEventOf(entry), tableEvent('mongodb', 'db', 'c'));
    assert.equal(routeEventOf(register()), 'order-updates');
    assert.ok(!tableEvent('mongodb', 'db', 'c').includes('|'));
  });

  it('an eventId is the same for the same asking, and differs with the route, select or getEventData', () => {
    const route = routeOf('order-updates', { recipientId: 2 });
    const id = eventIdOf(route, register());
    assert.equal(eventIdOf(routeOf('order-updates', { recipientId: '2' }), register()), id);
    assert.match(id, /^[A-Za-z0-9_-]{22}$/);
    const others = [
      eventIdOf(routeOf('order-updates', { recipientId: 3 }), register()),
      eventIdOf(route, register({ select: ['status'] })),
      eventIdOf(route, register({ getEventData: false })),
    ];
    assert.equal(new Set([id, ...others]).size, 4);
  });

  it('project keeps the selected fields eventData has, and nothing else', () => {
    assert.deepEqual(project({ a: 1, b: 2, c: 3 }, ['a', 'c', 'missing']), { a: 1, c: 3 });
    assert.deepEqual(project({ a: 1 }, []), {});
  });
});
