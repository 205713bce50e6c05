/**
 * The subscriptions the application holds, by handle. A handle is the eventId of the REGISTER reply that
 * created the subscription, and it stays the application's name for it: after a reconnect the node may
 * answer another eventId for the same entry (the gateway derives the same one today, but a fleet in the
 * middle of a deploy need not), so each handle keeps its entry and the eventId it has on the current connection.
 *
 * For events with history, also each handle's last position (its REGISTER reply's, then each NOTIFICATION's):
 * what a re-registration resumes from (`since`), and what tells a repeat from a new notification.
 */
import type { OnEvent, Position, ValidOnEvent } from '@herald/protocol';

interface Held {
  onEvent: OnEvent;
  /** The eventId on the current connection. */
  eventId: string;
}

/** What a NOTIFICATION with a position is to its subscription: new, a repeat, or the first of a new epoch (history lost). */
export type Seen = 'new' | 'duplicate' | 'epoch_changed';

export class Subscriptions {
  readonly #byHandle = new Map<string, Held>();
  readonly #handleOf = new Map<string, string>();
  readonly #positions = new Map<string, Position>();

  /** Record an entry the node accepted; answers its handle (the existing one if the node answered a held eventId). */
  add(valid: ValidOnEvent): string {
    const { eventId, offset: _offset, epoch: _epoch, recovered: _recovered, ...onEvent } = valid;
    const held = this.#handleOf.get(eventId);
    if (held !== undefined) return held;
    this.#byHandle.set(eventId, { onEvent, eventId });
    this.#handleOf.set(eventId, eventId);
    return eventId;
  }

  /**
   * A REGISTER reply's entry for `handle`, taken as the reply is read (the replay follows it on the wire): its
   * eventId names the handle from now on, and a subscription that resumed whole keeps its position (the replay
   * moves it on), any other takes the reply's.
   */
  registered(handle: string, valid: ValidOnEvent): void {
    this.#handleOf.set(valid.eventId, handle);
    const { offset, epoch } = valid;
    if (offset !== undefined && epoch !== undefined && valid.recovered !== true) this.#positions.set(handle, { offset, epoch });
  }

  /** A NOTIFICATION with a position, for `handle`; the position is kept unless it is a repeat. */
  seen(handle: string, offset: number, epoch: string): Seen {
    const last = this.#positions.get(handle);
    if (last !== undefined && last.epoch === epoch && offset <= last.offset) return 'duplicate';
    this.#positions.set(handle, { offset, epoch });
    return last !== undefined && last.epoch !== epoch ? 'epoch_changed' : 'new';
  }

  /** Where a handle's subscription resumes from, if it has a history. */
  sinceOf(handle: string): Position | undefined {
    return this.#positions.get(handle);
  }

  /** The handle for an eventId of the current connection; an unknown eventId is answered as is. */
  handleOf(eventId: string): string {
    return this.#handleOf.get(eventId) ?? eventId;
  }

  /** The event a handle subscribes to; undefined for a handle the client does not hold. */
  apiNameOf(handle: string): string | undefined {
    return this.#byHandle.get(handle)?.onEvent.apiName;
  }

  /** The current eventId of a handle; an unknown handle is answered as is, for the node to judge. */
  eventIdOf(handle: string): string {
    return this.#byHandle.get(handle)?.eventId ?? handle;
  }

  /** Forget the subscription the node released under `eventId`; answers its handle. */
  remove(eventId: string): string {
    const handle = this.handleOf(eventId);
    this.#byHandle.delete(handle);
    this.#handleOf.delete(eventId);
    this.#positions.delete(handle);
    return handle;
  }

  /** Every held subscription, as [handle, entry], for registering again on a new connection. */
  held(): [string, OnEvent][] {
    return [...this.#byHandle].map(([handle, { onEvent }]) => [handle, onEvent]);
  }

  /**
   * After registering again: each handle's eventId on the new connection, or undefined when the node refused
   * it (the handle is dropped). The reverse index is rebuilt as a whole because an old eventId of one handle
   * may be the new eventId of another.
   */
  rebind(eventIds: ReadonlyMap<string, string | undefined>): void {
    this.#handleOf.clear();
    for (const [handle, eventId] of eventIds) {
      const held = this.#byHandle.get(handle);
      if (!held) continue;
      if (eventId === undefined) {
        this.#byHandle.delete(handle);
        this.#positions.delete(handle);
        continue;
      }
      held.eventId = eventId;
      this.#handleOf.set(eventId, handle);
    }
  }
}
