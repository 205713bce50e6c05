/** The DataSource contract on a real MongoDB server, when MONGODB_URL names one (docker-compose.yml has one). */
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { MongoClient } from 'mongodb';
import { MongoDataSource } from '../../src/data/mongodb.ts';
import { dataSourceContract } from './data-source.contract.ts';

const url = process.env.MONGODB_URL;

if (url === undefined) {
  test('DataSource contract: MongoDataSource', { skip: 'MONGODB_URL is not set: no MongoDB server on this machine' });
} else {
  const database = `herald_contract_${randomBytes(4).toString('hex')}`;
  dataSourceContract('MongoDataSource', async () => ({ source: await MongoDataSource.connect(url), database }));
  // Runs after the suite: leave the server as it was found.
  after(async () => {
    const client = await new MongoClient(url).connect();
    try {
      await client.db(database).dropDatabase();
    } finally {
      await client.close();
    }
  });
}
