/**
 * A collection that holds its one member inline and becomes a Set only for a second: most routes have one
 * subscription and most subscriptions one session, and an empty Set or Map costs ~200 B of hash table per
 * client. Members are objects (never Sets), so the two shapes cannot be confused.
 */
export type Few<T extends object> = T | Set<T> | undefined;

export function addTo<T extends object>(few: Few<T>, item: T): Few<T> {
  if (few === undefined || few === item) return item;
  if (few instanceof Set) return few.add(item);
  return new Set([few, item]);
}

export function removeFrom<T extends object>(few: Few<T>, item: T): Few<T> {
  if (few === item) return undefined;
  if (!(few instanceof Set) || !few.delete(item)) return few;
  return few.size === 1 ? (few.values().next().value as T) : few;
}

export function sizeOf<T extends object>(few: Few<T>): number {
  if (few === undefined) return 0;
  return few instanceof Set ? few.size : 1;
}

export function findIn<T extends object>(few: Few<T>, matches: (item: T) => boolean): T | undefined {
  if (few === undefined) return undefined;
  if (!(few instanceof Set)) return matches(few) ? few : undefined;
  for (const item of few) if (matches(item)) return item;
  return undefined;
}

/** The members, to iterate (a Set as it is, one member in an array). */
export function membersOf<T extends object>(few: Few<T>): Iterable<T> {
  if (few === undefined) return [];
  return few instanceof Set ? few : [few];
}
