/**
 * The emit stream's contract (broker/ingest.ts), on two consumers of one group: each entry is read by one of them,
 * once; what is added before the group exists is read too; an entry left unacknowledged is claimed by the other after
 * the idle time; dead letters leave the backlog; the backlog counts and ages what waits; a trim keeps what may still be
 * published.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { IngestStream, StreamEntry } from '../../src/broker/ingest.ts';

export interface StreamFixture {
  /** Two consumers of one group (not started). */
  consumers: [IngestStream, IngestStream];
  /** What a back end's XADD does: answers the id. */
  add(fields: Record<string, string>): Promise<string>;
  /** The dead-letter stream's entries: each one's reason and the id it had. */
  deadLetters(): Promise<Array<{ reason: string; id: string }>>;
  close(): Promise<void>;
}

export function streamContract(name: string, make: () => Promise<StreamFixture>): void {
  describe(`emit stream contract: ${name}`, () => {
    let fixture: StreamFixture;
    let a: IngestStream;
    let b: IngestStream;
    beforeEach(async () => {
      fixture = await make();
      [a, b] = fixture.consumers;
    });
    afterEach(() => fixture.close());

    const ids = (entries: StreamEntry[]) => entries.map((entry) => entry.id);

    it('entries added before the group existed are read; each entry goes to one consumer, once, with its fields', async () => {
      const first = await fixture.add({ name: 'announcements', eventData: '{"n":1}' });
      await Promise.all([a.start(), b.start()]);
      const second = await fixture.add({ name: 'announcements', eventData: '{"n":2}', idempotencyKey: 'k' });
      const [byA, byB] = [await a.read(1, 100), await b.read(10, 100)];
      assert.deepEqual([...ids(byA), ...ids(byB)], [first, second]);
      assert.deepEqual(byB[0]!.fields, { name: 'announcements', eventData: '{"n":2}', idempotencyKey: 'k' });
      assert.deepEqual(await a.read(10, 50), [], 'nothing more after a wait of blockMs');
    });

    it('a read waits for an entry added meanwhile', async () => {
      await a.start();
      const reading = a.read(10, 5000);
      await sleep(50);
      const id = await fixture.add({ name: 'x' });
      assert.deepEqual(ids(await reading), [id]);
    });

    it('an entry left unacknowledged is claimed by another consumer once idle past claimIdleMs; an acknowledged one is not', async () => {
      await Promise.all([a.start(), b.start()]);
      const [kept, acked] = [await fixture.add({ n: '1' }), await fixture.add({ n: '2' })];
      assert.deepEqual(ids(await a.read(10, 100)), [kept, acked]);
      await a.ack([acked]);
      assert.deepEqual(await b.claim(60_000, 10), [], 'not idle long enough');
      await sleep(150);
      assert.deepEqual(ids(await b.claim(100, 10)), [kept]);
      assert.equal((await b.backlog()).pending, 1);
      await b.ack([kept]);
      assert.deepEqual(await b.backlog(), { pending: 0, undelivered: 0, oldestMs: undefined });
    });

    it('one consumer at a time holds the reader\'s lease: it extends it, gives it up, or lets it run out', async () => {
      await Promise.all([a.start(), b.start()]);
      assert.equal(await a.lead(300), true);
      assert.equal(await b.lead(300), false);
      assert.equal(await a.lead(300), true, 'extended by its holder');
      await a.resign();
      assert.equal(await b.lead(100), true, 'free once given up');
      assert.equal(await a.lead(100), false);
      await sleep(150);
      assert.equal(await a.lead(100), true, 'free once run out');
    });

    it('a dead letter carries its reason and id, and leaves the backlog', async () => {
      await a.start();
      const id = await fixture.add({ name: 'no-such-event', eventData: '{}' });
      const [entry] = await a.read(10, 100);
      await a.deadLetter(entry!, 'UNKNOWN_EVENT: no event named "no-such-event"');
      assert.deepEqual(await fixture.deadLetters(), [{ reason: 'UNKNOWN_EVENT: no event named "no-such-event"', id }]);
      assert.equal((await a.backlog()).pending, 0);
    });

    it('the backlog counts entries pending and undelivered, aged from the oldest; a trim keeps them', async () => {
      await Promise.all([a.start(), b.start()]);
      for (let n = 0; n < 3; n++) await fixture.add({ n: String(n) });
      const [pending] = await a.read(1, 100);
      await sleep(30);
      const backlog = await a.backlog();
      assert.deepEqual([backlog.pending, backlog.undelivered], [1, 2]);
      assert.ok(backlog.oldestMs !== undefined && backlog.oldestMs >= 30, String(backlog.oldestMs));
      await a.trim();
      const undelivered = await b.read(10, 100);
      assert.equal(undelivered.length, 2, 'the undelivered ones are still there');
      await b.ack(ids(undelivered));
      await sleep(50);
      assert.deepEqual(ids(await b.claim(10, 10)), [pending!.id], 'and the pending one');
    });
  });
}
