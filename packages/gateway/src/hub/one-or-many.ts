/**
 * A collection of none (undefined), one (held inline) or many (a Set, made for a second member): most routes have one
 * subscription and most subscriptions one session, and an empty Set or Map costs a hash table per client. Members
 * are objects (never Sets), so the two shapes cannot be confused.
 */
export type OneOrMany<T extends object> = T | Set<T> | undefined;

export function addTo<T extends object>(members: OneOrMany<T>, item: T): OneOrMany<T> {
  if (members === undefined || members === item) return item;
  if (members instanceof Set) return members.add(item);
  return new Set([members, item]);
}

export function removeFrom<T extends object>(members: OneOrMany<T>, item: T): OneOrMany<T> {
  if (members === item) return undefined;
  if (!(members instanceof Set) || !members.delete(item)) return members;
  return members.size === 1 ? (members.values().next().value as T) : members;
}

export function sizeOf<T extends object>(members: OneOrMany<T>): number {
  if (members === undefined) return 0;
  return members instanceof Set ? members.size : 1;
}

export function findIn<T extends object>(members: OneOrMany<T>, matches: (item: T) => boolean): T | undefined {
  if (members === undefined) return undefined;
  if (!(members instanceof Set)) return matches(members) ? members : undefined;
  for (const item of members) if (matches(item)) return item;
  return undefined;
}

/** The members, to iterate (a Set as it is, one member in an array). */
export function membersOf<T extends object>(members: OneOrMany<T>): Iterable<T> {
  if (members === undefined) return [];
  return members instanceof Set ? members : [members];
}
