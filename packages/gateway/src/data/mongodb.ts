/**
 * The MongoDB DataSource, over the official driver. Its contract suite runs against a real server when
 * MONGODB_URL is set (docker-compose.yml provides one); no MongoDB server runs on the build machine.
 */
import { MongoClient, type Document } from 'mongodb';
import type { CollectionRef, DataSource, FindQuery, Row } from './data-source.ts';
import { checkFilter } from './filter.ts';

export class MongoDataSource implements DataSource {
  readonly #client: MongoClient;

  private constructor(client: MongoClient) {
    this.#client = client;
  }

  static async connect(url: string): Promise<MongoDataSource> {
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 5000 });
    await client.connect();
    return new MongoDataSource(client);
  }

  async getAll({ database, collection, find, skip, limit }: FindQuery): Promise<Row[]> {
    if (find) checkFilter(find);
    const cursor = this.#collection({ database, collection }).find(find ?? {});
    if (skip !== undefined) cursor.skip(skip);
    if (limit !== undefined) cursor.limit(limit);
    return (await cursor.toArray()).map(plain);
  }

  async insert(target: CollectionRef, rows: Row[]): Promise<Row[]> {
    const documents = rows.map((row) => ({ ...row }) as Document);
    if (documents.length > 0) await this.#collection(target).insertMany(documents);
    return documents.map(plain);
  }

  async close(): Promise<void> {
    await this.#client.close();
  }

  #collection({ database, collection }: CollectionRef) {
    return this.#client.db(database).collection(collection);
  }
}

/** ObjectIds leave as their hex string, so rows look alike whichever source they came from. */
function plain(document: Document): Row {
  const { _id, ...rest } = document;
  return { _id: typeof _id === 'object' && _id !== null ? String(_id) : _id, ...rest };
}
