/**
 * Route histories of the in-process broker: per route key, its epoch, its last offset and its last entries, trimmed
 * by size and age as the Redis broker's are (redis/history.ts): entries go once the route has had no emit for its
 * event's ttlSeconds, and the position (epoch and offset) once it has had no emit or read for positionTtlSeconds;
 * the next append or read then starts a new epoch.
 */
import type { Position } from '@herald/protocol';
import type { HistoryConfig } from '../config/schema.ts';
import type { HistoryRange, HistoryRead, Once } from './broker.ts';
import { newEpoch, readRange, type StoredEntry } from './history.ts';

interface Log {
  epoch: string;
  offset: number;
  /** In order and contiguous, at least the last `size` of them. */
  entries: StoredEntry[];
  /** The last append, and the last append or read, ms. */
  appendedAt: number;
  touchedAt: number;
  readonly config: HistoryConfig;
  /** Idempotency keys appended in this epoch, with their offset, until their window runs out. */
  readonly once: Map<string, { offset: number; until: number }>;
}

/** Entries beyond `size` a log keeps before it is trimmed: trimming one at a time would copy the array at every append. */
const TRIM_SLACK = 64;

export class MemoryHistories {
  readonly #logs = new Map<string, Log>();
  #sweptAt = 0;

  /** `once`: an emit's idempotency key; appended under it already (within its window), the first append's position. */
  append(routeKey: string, json: string, config: HistoryConfig, once?: Once): Position {
    const now = Date.now();
    const log = this.#live(routeKey, config, now);
    const seen = once === undefined ? undefined : log.once.get(once.id);
    if (seen !== undefined && seen.until > now) return { offset: seen.offset, epoch: log.epoch };
    log.offset++;
    if (once !== undefined) log.once.set(once.id, { offset: log.offset, until: now + once.windowMs });
    log.appendedAt = now;
    log.entries.push({ offset: log.offset, json, at: now });
    if (log.entries.length > config.size + TRIM_SLACK) log.entries.splice(0, log.entries.length - config.size);
    this.#sweep(now);
    return { offset: log.offset, epoch: log.epoch };
  }

  read(routeKey: string, config: HistoryConfig, range: HistoryRange | undefined): HistoryRead {
    const now = Date.now();
    const log = this.#live(routeKey, config, now);
    if (range === undefined) return { epoch: log.epoch, offset: log.offset, entries: [], unrecovered: undefined };
    const from = (first: number): StoredEntry[] => log.entries.slice(Math.max(0, first - (log.entries[0]?.offset ?? first)));
    return readRange(log, range, from, now - config.ttlSeconds * 1000);
  }

  /** The route's log, touched now; a new one (a new epoch) when it had none or its position expired. */
  #live(routeKey: string, config: HistoryConfig, now: number): Log {
    let log = this.#logs.get(routeKey);
    if (log === undefined || now - log.touchedAt > config.positionTtlSeconds * 1000) {
      log = { epoch: newEpoch(), offset: 0, entries: [], appendedAt: now, touchedAt: now, config, once: new Map() };
      this.#logs.set(routeKey, log);
    }
    log.touchedAt = now;
    return log;
  }

  /** At most once a second: the entries of routes idle past ttlSeconds, and the logs idle past positionTtlSeconds. */
  #sweep(now: number): void {
    if (now - this.#sweptAt < 1000) return;
    this.#sweptAt = now;
    for (const [routeKey, log] of this.#logs) {
      if (now - log.touchedAt > log.config.positionTtlSeconds * 1000) this.#logs.delete(routeKey);
      else if (now - log.appendedAt > log.config.ttlSeconds * 1000) log.entries = [];
      for (const [id, { until }] of log.once) if (until <= now) log.once.delete(id);
    }
  }
}
