/**
 * What both brokers share about route histories: epochs, and the rule by which a range is answered (the Redis
 * broker's read script applies the same rule in Lua, next to the data: redis/history.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Position } from '@herald/protocol';
import type { HistoryEntry, HistoryRange, HistoryRead } from './broker.ts';

/** A new epoch: 8 random bytes, base64url (11 characters), as the protocol's `since` accepts them. */
export function newEpoch(): string {
  return randomBytes(8).toString('base64url');
}

/** An entry as a broker keeps it: with the time it was appended, ms. */
export interface StoredEntry extends HistoryEntry {
  at: number;
}

/**
 * A range of one history, whose entries are in order and contiguous (trimmed from the front only): the entries
 * after `since` up to `upTo` (no further than the last offset), whole, or why not. `from(first)` answers the stored
 * entries from offset `first` on, in order; `oldestAt` is the time before which an entry is too old to replay.
 */
export function readRange(now: Position, range: HistoryRange, from: (first: number) => StoredEntry[], oldestAt: number): HistoryRead {
  const read: HistoryRead = { epoch: now.epoch, offset: now.offset, entries: [], unrecovered: undefined };
  if (range.since.epoch !== now.epoch) return { ...read, unrecovered: 'epoch_changed' };
  const upTo = Math.min(range.upTo, now.offset);
  const missed = upTo - range.since.offset;
  if (missed <= 0) return read;
  if (missed > range.limit) return { ...read, unrecovered: 'capped' };
  const first = range.since.offset + 1;
  const entries = from(first).slice(0, missed);
  if (entries.length < missed || entries[0]!.offset !== first || entries[0]!.at < oldestAt) return { ...read, unrecovered: 'too_old' };
  return { ...read, entries: entries.map(({ offset, json }) => ({ offset, json })) };
}
