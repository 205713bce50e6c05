import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryDataSource } from '../../src/data/memory.ts';
import { dataSourceContract } from './data-source.contract.ts';

dataSourceContract('MemoryDataSource', async () => ({ source: new MemoryDataSource(), database: 'contract' }));

describe('MemoryDataSource beyond the contract', () => {
  const ref = { database: 'd', collection: 'c' };

  it('serves its seed, each row given an _id', async () => {
    const source = new MemoryDataSource({ 'd/c': [{ n: 1 }, { n: 2 }] });
    const rows = await source.getAll({ ...ref, find: { n: 2 } });
    assert.equal(rows.length, 1);
    assert.match(String(rows[0]?._id), /^[0-9a-f]{24}$/);
  });
});
