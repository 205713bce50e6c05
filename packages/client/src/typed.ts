/**
 * Typed events: the application names its events and the eventData each carries, and the client's notifications
 * and per-subscription callbacks are typed by event name. The types promise only what the application declared:
 * the gateway sends whatever the back end emitted (narrowed by `select`).
 */
import type { Criteria, EventType, OnEvent, Position } from '@herald/protocol';
import type { Listener } from './emitter.ts';

/** apiName -> the eventData of its notifications, e.g. `{ 'order-updates': { orderId: number } }` (an interface will do: type parameters take any object type). */
export type EventMap = Record<string, unknown>;

/** A NOTIFICATION as the client delivers it: `eventId` is the subscription's handle, `apiName` its event. */
export type Notification<E extends object = EventMap> = {
  [K in keyof E & string]: {
    eventId: string;
    apiName: K;
    eventType: EventType;
    offset?: number;
    epoch?: string;
    /** Absent when the entry was registered with getEventData: false. */
    eventData: E[K];
  };
}[keyof E & string];

/** What subscribe() may add to the entry besides its event and criteria. */
export interface SubscribeOptions {
  eventType?: EventType;
  getEventData?: boolean;
  select?: string[];
  since?: Position;
  /** INSTANCES events: the collection whose saves they follow. */
  instance?: string;
  database?: string;
  collection?: string;
}

/** An accepted subscription, as subscribe() answers it. */
export interface Subscription {
  /** The handle: the eventId of notifications, stable across reconnects. */
  readonly eventId: string;
  readonly apiName: string;
  /** Its position, for an event with history. */
  readonly offset?: number | undefined;
  readonly epoch?: string | undefined;
  readonly recovered?: boolean | undefined;
  /** UNREGISTER this subscription; its callback is called no more. */
  unsubscribe(): Promise<void>;
}

/** The REGISTER entry of subscribe(). */
export function entryOf(apiName: string, criteria: Criteria | undefined, options: SubscribeOptions): Omit<OnEvent, 'eventType' | 'getEventData'> & Partial<OnEvent> {
  const condition = criteria === undefined ? {} : { condition: { conditionType: 'RESPONSE' as const, criteria } };
  return { ...options, apiName, ...condition };
}

/** The callbacks of each subscription, by handle. */
export class Callbacks<N> {
  readonly #byHandle = new Map<string, Listener<N>>();

  set(handle: string, listener: Listener<N>): void {
    this.#byHandle.set(handle, listener);
  }

  delete(handle: string): void {
    this.#byHandle.delete(handle);
  }

  call(handle: string, notification: N): void {
    const listener = this.#byHandle.get(handle);
    if (!listener) return;
    try {
      listener(notification);
    } catch (error) {
      // As the emitter's listeners: the application's bug surfaces as uncaught, the client carries on.
      queueMicrotask(() => {
        throw error;
      });
    }
  }
}
