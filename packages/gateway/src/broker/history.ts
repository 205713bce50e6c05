/**
 * What both brokers share about route histories: epochs, and the rule by which a range is answered (the Redis
 * broker's read script applies the same rule in Lua, next to the data: redis/history.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Position } from '@herald/protocol';
import type { HistoryEntry, HistoryRange, HistoryRead } from './broker.ts';

/** This process's part of every epoch it makes: 6 random bytes, base64url (8 characters). */
const EPOCH_PREFIX = randomBytes(6).toString('base64url');
let epochs = 0;

/**
 * A new epoch, never made before: this process's random part and a count, in base64url's alphabet (as `since`
 * accepts them). The Redis broker passes one with every append, for the script to use if the route has lost its
 * position; 8 random bytes for each (randomFillSync) were a visible share of the node's CPU in unpaced emits.
 */
export function newEpoch(): string {
  return `${EPOCH_PREFIX}${(++epochs).toString(36)}`;
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
