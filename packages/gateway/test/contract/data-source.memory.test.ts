import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryDataSource } from '../../src/data/memory.ts';
import { GatewayError } from '../../src/errors.ts';
import { dataSourceContract } from './data-source.contract.ts';

dataSourceContract('MemoryDataSource', async () => ({ source: new MemoryDataSource(), database: 'contract' }));

// MongoDB supports these; the memory source refuses them rather than answer differently.
describe('MemoryDataSource beyond the contract', () => {
  const ref = { database: 'd', collection: 'c' };
  const badRequest = (error: unknown) => error instanceof GatewayError && error.code === 'BAD_REQUEST';

  it('refuses unsupported operators with BAD_REQUEST', async () => {
    const source = new MemoryDataSource({ 'd/c': [{ n: 1 }] });
    await assert.rejects(source.getAll({ ...ref, find: { n: { $gt: 0 } } }), badRequest);
    await assert.rejects(source.getAll({ ...ref, find: { $or: [{ n: 1 }] } }), badRequest);
    await assert.rejects(source.getAll({ ...ref, find: { n: { $in: 1 } } }), badRequest);
  });

  it('serves its seed, each row given an _id', async () => {
    const source = new MemoryDataSource({ 'd/c': [{ n: 1 }, { n: 2 }] });
    const rows = await source.getAll({ ...ref, find: { n: 2 } });
    assert.equal(rows.length, 1);
    assert.match(String(rows[0]?._id), /^[0-9a-f]{24}$/);
  });
});
