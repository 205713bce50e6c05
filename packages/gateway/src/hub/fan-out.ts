/**
 * Fan-outs: an emit's frames written to its recipients, yielding to the event loop every `chunk` writes, timed
 * (herald_fanout_duration_seconds) and counted, and the bytes still to write counted in the delivery backlog.
 */
import { encodeNotification } from '@herald/protocol';
import type { Contain } from '../errors.ts';
import { project } from '../events/routing.ts';
import type { Metrics } from '../metrics.ts';
import { textFrame } from '../wire/frames.ts';
import type { DeliveryBacklog } from './backlog.ts';
import { membersOf, sizeOf } from './one-or-many.ts';
import type { Session, Subscription } from './session.ts';

export interface FanOutOptions {
  metrics: Metrics;
  contain: Contain;
  backlog: DeliveryBacklog;
  chunk: number;
  /** Writes a NOTIFICATION within the session's send bound; answers whether it was written. */
  send: (session: Session, frame: Buffer) => boolean;
}

export class FanOuts {
  readonly #options: FanOutOptions;

  constructor(options: FanOutOptions) {
    this.#options = options;
  }

  /** Runs `writes` to its end in chunks; `start`: when the emit reached the hub. */
  run(writes: Generator<boolean>, start: number): void {
    const { backlog, metrics } = this.#options;
    // An emit this node could not refuse (it came from another node, or its caller waits): counted, as the
    // fleet's sign that emits were accepted for this node past its bound.
    if (backlog.over) metrics.deliveriesOverBacklog.inc();
    this.#step(writes, start, backlog.began());
  }

  /**
   * One write per recipient, yielding whether the frame went out; each subscription's frame is encoded once,
   * with its select applied once.
   */
  *writes(matched: Subscription[], eventData: Record<string, unknown>): Generator<boolean> {
    let fullJson: string | undefined;
    for (const { eventId, eventType, getEventData, select, sessions } of matched) {
      let json: string | undefined;
      if (getEventData) json = select ? JSON.stringify(project(eventData, select)) : (fullJson ??= JSON.stringify(eventData));
      yield* this.#frameTo(textFrame(encodeNotification(eventId, eventType, json)), membersOf(sessions), sizeOf(sessions));
    }
  }

  /** `frame` to each of `count` sessions, counted in the backlog until written (or until the fan-out ends early). */
  *#frameTo(frame: Buffer, sessions: Iterable<Session>, count: number): Generator<boolean> {
    const { backlog, send } = this.#options;
    const bytes = frame.length;
    let left = count;
    backlog.fanOutBytes += bytes * left;
    try {
      for (const session of sessions) {
        left--;
        backlog.fanOutBytes -= bytes;
        yield send(session, frame);
      }
    } finally {
      backlog.fanOutBytes -= bytes * left;
    }
  }

  /** Counting per chunk, not per frame: a counter update per recipient would cost more than the write's JS. */
  #step(writes: Generator<boolean>, start: number, id: number): void {
    const { metrics, backlog } = this.#options;
    let sent = 0;
    try {
      for (let step = 0; step < this.#options.chunk; step++) {
        const next = writes.next();
        if (next.done) {
          metrics.fanOutSeconds.observe((performance.now() - start) / 1000);
          metrics.notificationsOut.inc(sent);
          return backlog.ended(id);
        }
        if (next.value) sent++;
      }
    } catch (error) {
      metrics.notificationsOut.inc(sent);
      backlog.ended(id);
      return this.#options.contain('fan_out', error);
    }
    metrics.notificationsOut.inc(sent);
    setImmediate(() => this.#step(writes, start, id));
  }
}
