/** Build one DataSource per configured instance: in memory (seeded) unless the instance has a MongoDB url. */
import { readFileSync } from 'node:fs';
import type { Config } from '../config/schema.ts';
import { ConfigError } from '../errors.ts';
import type { DataSource, Row } from './data-source.ts';
import { MemoryDataSource } from './memory.ts';

export async function openDataSources(instances: Config['instances']): Promise<Map<string, DataSource>> {
  const sources = new Map<string, DataSource>();
  for (const [name, instance] of Object.entries(instances)) {
    sources.set(name, instance.url ? await connectMongo(instance.url) : memoryInstance(name, instance));
  }
  return sources;
}

/** The MongoDB driver is loaded only by a node that has a MongoDB instance: it would slow every start otherwise. */
async function connectMongo(url: string): Promise<DataSource> {
  const { MongoDataSource } = await import('./mongodb.ts');
  return MongoDataSource.connect(url);
}

function memoryInstance(name: string, instance: Config['instances'][string]): MemoryDataSource {
  const seed: Record<string, Row[]> = {};
  for (const [database, { collections }] of Object.entries(instance.databases)) {
    for (const [collection, { seed: file }] of Object.entries(collections)) {
      if (file !== undefined) seed[`${database}/${collection}`] = readSeed(`instances.${name}`, file);
    }
  }
  return new MemoryDataSource(seed);
}

function readSeed(field: string, file: string): Row[] {
  let rows: unknown;
  try {
    rows = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ConfigError(`${field}: cannot read seed ${file}: ${(error as Error).message}`);
  }
  if (!Array.isArray(rows)) throw new ConfigError(`${field}: seed ${file} must hold a JSON array of rows`);
  return rows as Row[];
}
