/** g.sys over the node's data sources: what can-connect code may ask of the node. */
import type { DataSource, Filter, Row } from '../data/data-source.ts';
import { GatewayError } from '../errors.ts';
import type { GetAllQuery, SystemCalls } from './code-runner.ts';

/**
 * `getAll` reads rows from any configured instance. Its query comes from code, through a copy: every
 * field is checked here, and a bad one is an error the code sees (and may catch), never the node's.
 */
export function dataSourceCalls(sources: ReadonlyMap<string, DataSource>): SystemCalls {
  return {
    db: {
      async getAll(query: GetAllQuery): Promise<Row[]> {
        const { instance, database, collection, queryParams } = (query ?? {}) as Partial<Record<keyof GetAllQuery, unknown>>;
        const source = typeof instance === 'string' ? sources.get(instance) : undefined;
        if (!source) throw new GatewayError('NOT_FOUND', `g.sys.db.getAll: no instance named ${JSON.stringify(instance)}`);
        if (typeof database !== 'string' || typeof collection !== 'string') {
          throw new GatewayError('BAD_REQUEST', 'g.sys.db.getAll needs { instance, database, collection } as strings');
        }
        const { find, limit } = (queryParams ?? {}) as { find?: unknown; limit?: unknown };
        if (find !== undefined && (typeof find !== 'object' || find === null || Array.isArray(find))) {
          throw new GatewayError('BAD_REQUEST', 'g.sys.db.getAll: queryParams.find must be an object');
        }
        if (limit !== undefined && (!Number.isInteger(limit) || (limit as number) < 0)) {
          throw new GatewayError('BAD_REQUEST', 'g.sys.db.getAll: queryParams.limit must be a whole number');
        }
        return source.getAll({ database, collection, find: find as Filter | undefined, limit: limit as number | undefined });
      },
    },
  };
}
