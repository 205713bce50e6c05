/**
 * The DataSource contract: MongoDB's semantics for the filters every implementation supports (field equality,
 * $eq, $in, $and), so the in-memory source can stand in for a real server. Each test writes to its own
 * collection, so runs against a shared server do not collide.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { CollectionRef, DataSource, Filter, Row } from '../../src/data/data-source.ts';
import { GatewayError } from '../../src/errors.ts';

const withoutIds = (rows: Row[]): Row[] => rows.map(({ _id, ...rest }) => rest);

export function dataSourceContract(name: string, open: () => Promise<{ source: DataSource; database: string }>): void {
  describe(`DataSource contract: ${name}`, () => {
    let source: DataSource;
    let database: string;

    before(async () => {
      ({ source, database } = await open());
    });
    after(async () => {
      await source?.close();
    });

    const freshCollection = (): CollectionRef => ({ database, collection: `c_${randomBytes(6).toString('hex')}` });

    /** A fresh collection holding `rows`, and a query helper answering the matching rows without `_id`. */
    async function seeded(rows: Row[]) {
      const ref = freshCollection();
      await source.insert(ref, rows);
      return {
        ref,
        find: async (find: Filter, limit?: number) =>
          withoutIds(await source.getAll(limit === undefined ? { ...ref, find } : { ...ref, find, limit })),
      };
    }

    it('insert answers the rows as stored, each with a string _id, and leaves the given rows alone', async () => {
      const given = [{ name: 'a', n: 1 }, { name: 'b', n: 2 }];
      const stored = await source.insert(freshCollection(), given);
      assert.equal(stored.length, 2);
      for (const row of stored) assert.equal(typeof row._id, 'string');
      assert.notEqual(stored[0]?._id, stored[1]?._id);
      assert.deepEqual(withoutIds(stored), given);
      assert.deepEqual(given, [{ name: 'a', n: 1 }, { name: 'b', n: 2 }]);
    });

    it('getAll without find (or with an empty one) answers every row in insertion order', async () => {
      const rows = [{ i: 3 }, { i: 1 }, { i: 2 }, { i: 0 }];
      const { ref } = await seeded(rows);
      assert.deepEqual(withoutIds(await source.getAll(ref)), rows);
      assert.deepEqual(withoutIds(await source.getAll({ ...ref, find: {} })), rows);
    });

    it('getAll on a collection never written answers no rows', async () => {
      assert.deepEqual(await source.getAll(freshCollection()), []);
    });

    it('matches equality on string and number fields, type-strict like MongoDB', async () => {
      const { find } = await seeded([
        { id: 1, name: 'NICK', n: 2 },
        { id: 2, name: 'ED', n: '2' },
        { id: 3, name: 'nick', n: 3 },
      ]);
      assert.deepEqual(await find({ name: 'NICK' }), [{ id: 1, name: 'NICK', n: 2 }]);
      assert.deepEqual(await find({ n: 2 }), [{ id: 1, name: 'NICK', n: 2 }]);
      assert.deepEqual(await find({ n: '2' }), [{ id: 2, name: 'ED', n: '2' }]);
      assert.deepEqual(await find({ name: 'NICK', n: 3 }), []);
      assert.deepEqual(await find({ name: 'nobody' }), []);
    });

    it('equality on an array field matches an element of it, or the whole array', async () => {
      const { find } = await seeded([
        { id: 1, tags: ['red', 'blue'] },
        { id: 2, tags: ['green'] },
        { id: 3, tags: 'red' },
      ]);
      assert.deepEqual((await find({ tags: 'red' })).map((row) => row.id), [1, 3]);
      assert.deepEqual((await find({ tags: ['red', 'blue'] })).map((row) => row.id), [1]);
      assert.deepEqual(await find({ tags: 'yellow' }), []);
    });

    it('$eq matches like plain equality', async () => {
      const { find } = await seeded([{ id: 1, n: 2 }, { id: 2, n: '2' }, { id: 3, n: [5, 2] }]);
      assert.deepEqual((await find({ n: { $eq: 2 } })).map((row) => row.id), [1, 3]);
      assert.deepEqual((await find({ n: { $eq: '2' } })).map((row) => row.id), [2]);
    });

    it('$in matches a row equal to any listed value, type-strict', async () => {
      const { find } = await seeded([
        { id: 1, country: 'India' },
        { id: 2, country: 'Peru' },
        { id: 3, country: 'Chad' },
        { id: 4, country: ['Chad', 'Mali'] },
        { id: 5, country: 7 },
      ]);
      assert.deepEqual((await find({ country: { $in: ['India', 'Peru'] } })).map((row) => row.id), [1, 2]);
      assert.deepEqual((await find({ country: { $in: ['Mali'] } })).map((row) => row.id), [4]);
      assert.deepEqual((await find({ country: { $in: ['7'] } })).map((row) => row.id), []);
      assert.deepEqual(await find({ country: { $in: [] } }), []);
    });

    it('$and matches rows that match every part', async () => {
      const { find } = await seeded([
        { id: 1, a: 1, b: 'x' },
        { id: 2, a: 1, b: 'y' },
        { id: 3, a: 2, b: 'x' },
      ]);
      assert.deepEqual((await find({ $and: [{ a: 1 }, { b: 'x' }] })).map((row) => row.id), [1]);
      assert.deepEqual((await find({ $and: [{ a: 1 }, { b: { $in: ['x', 'y'] } }] })).map((row) => row.id), [1, 2]);
      assert.deepEqual((await find({ a: 2, $and: [{ b: 'y' }] })).map((row) => row.id), []);
    });

    it('a null filter value matches rows lacking the field, and rows holding null', async () => {
      const { find } = await seeded([{ id: 1, email: 'a@b.c' }, { id: 2 }, { id: 3, email: null }]);
      assert.deepEqual((await find({ email: null })).map((row) => row.id), [2, 3]);
      assert.deepEqual((await find({ email: { $in: [null, 'a@b.c'] } })).map((row) => row.id), [1, 2, 3]);
    });

    it('limit answers at most that many matching rows, the first ones', async () => {
      const { find } = await seeded([{ id: 1, k: 'a' }, { id: 2, k: 'b' }, { id: 3, k: 'a' }, { id: 4, k: 'a' }]);
      assert.deepEqual((await find({ k: 'a' }, 2)).map((row) => row.id), [1, 3]);
      assert.deepEqual((await find({ k: 'a' }, 10)).map((row) => row.id), [1, 3, 4]);
      assert.deepEqual((await find({ k: 'b' }, 1)).map((row) => row.id), [2]);
    });

    it('skip leaves out that many matching rows first; with limit, pages through them in order', async () => {
      const { ref } = await seeded([{ id: 1, k: 'a' }, { id: 2, k: 'b' }, { id: 3, k: 'a' }, { id: 4, k: 'a' }, { id: 5, k: 'a' }]);
      const ids = async (skip: number, limit?: number) =>
        (await source.getAll({ ...ref, find: { k: 'a' }, skip, ...(limit !== undefined && { limit }) })).map((row) => row.id);
      assert.deepEqual(await ids(0, 2), [1, 3]);
      assert.deepEqual(await ids(2, 2), [4, 5]);
      assert.deepEqual(await ids(4, 2), []);
      assert.deepEqual(await ids(1), [3, 4, 5]);
      assert.deepEqual(await ids(100, 2), []);
    });

    it('answers copies: mutating returned rows leaves the store unchanged', async () => {
      const ref = freshCollection();
      const [inserted] = await source.insert(ref, [{ name: 'a', nested: { n: 1 } }]);
      assert.ok(inserted);
      inserted.name = 'changed';
      const [read] = await source.getAll(ref);
      assert.ok(read);
      read.name = 'changed too';
      (read.nested as { n: number }).n = 99;
      assert.deepEqual(withoutIds(await source.getAll(ref)), [{ name: 'a', nested: { n: 1 } }]);
    });

    it('keeps collections independent, and appends to an existing one', async () => {
      const first = freshCollection();
      const second = freshCollection();
      await source.insert(first, [{ n: 1 }]);
      await source.insert(second, [{ n: 2 }]);
      await source.insert(first, [{ n: 3 }]);
      assert.deepEqual(withoutIds(await source.getAll(first)), [{ n: 1 }, { n: 3 }]);
      assert.deepEqual(withoutIds(await source.getAll(second)), [{ n: 2 }]);
    });

    it('refuses what is outside the filter language with BAD_REQUEST, whatever the store could do', async () => {
      const ref = freshCollection();
      await source.insert(ref, [{ n: 1 }]);
      const badRequest = (error: unknown) => error instanceof GatewayError && error.code === 'BAD_REQUEST';
      for (const find of [{ n: { $gt: 0 } }, { $or: [{ n: 1 }] }, { n: { $in: 1 } }, { $where: 'true' }, { $and: [{ $or: [] }] }]) {
        await assert.rejects(source.getAll({ ...ref, find: find as Filter }), badRequest, JSON.stringify(find));
      }
    });
  });
}
