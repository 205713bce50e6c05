/**
 * A DataSource is one configured instance (a MongoDB deployment, or its in-memory stand-in):
 * databases of collections of rows. The filter language is MongoDB's, restricted to what every
 * implementation supports: field equality, {$eq}, {$in}, and $and.
 */
export type Row = Record<string, unknown>;

export type FieldFilter = unknown | { $eq: unknown } | { $in: unknown[] };
export interface Filter {
  $and?: Filter[];
  [field: string]: FieldFilter | Filter[] | undefined;
}

export interface CollectionRef {
  database: string;
  collection: string;
}

export interface FindQuery extends CollectionRef {
  find?: Filter;
  /** Leave out this many matching rows first (as MongoDB's skip); absent means none. */
  skip?: number;
  /** At most this many rows; 0 or absent means no limit (as in MongoDB). */
  limit?: number;
}

export interface DataSource {
  /** Rows matching `find` (all rows without it), in insertion order, from the `skip`th on, at most `limit`. */
  getAll(query: FindQuery): Promise<Row[]>;
  /** Insert rows; answers them as stored (with `_id`). */
  insert(target: CollectionRef, rows: Row[]): Promise<Row[]>;
  close(): Promise<void>;
}
