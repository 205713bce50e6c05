/**
 * The subscriptions the application holds, by handle. A handle is the eventId of the REGISTER reply that
 * created the subscription, and it stays the application's name for it: after a reconnect the node may
 * answer another eventId for the same entry (the gateway derives the same one today, but a fleet in the
 * middle of a deploy need not), so each handle keeps its entry and the eventId it has on the current connection.
 */
import type { OnEvent, ValidOnEvent } from '@herald/protocol';

interface Held {
  onEvent: OnEvent;
  /** The eventId on the current connection. */
  eventId: string;
}

export class Subscriptions {
  readonly #byHandle = new Map<string, Held>();
  readonly #handleOf = new Map<string, string>();

  /** Record an entry the node accepted; answers its handle (the existing one if the node answered a held eventId). */
  add(valid: ValidOnEvent): string {
    const { eventId, ...onEvent } = valid;
    const held = this.#handleOf.get(eventId);
    if (held !== undefined) return held;
    this.#byHandle.set(eventId, { onEvent, eventId });
    this.#handleOf.set(eventId, eventId);
    return eventId;
  }

  /** The handle for an eventId of the current connection; an unknown eventId is answered as is. */
  handleOf(eventId: string): string {
    return this.#handleOf.get(eventId) ?? eventId;
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
        continue;
      }
      held.eventId = eventId;
      this.#handleOf.set(eventId, handle);
    }
  }
}
