/** A tiny typed event emitter, and an async iterator over one of its events. Works the same in browsers and Node. */

export type Listener<T> = (event: T) => void;

export class Emitter<Events> {
  // One set per event name; `never` accepts a listener of any event type, the public methods keep them apart.
  readonly #listeners = new Map<keyof Events, Set<Listener<never>>>();

  /** Call `listener` for each `type` event; answers a function that stops it. */
  on<K extends keyof Events>(type: K, listener: Listener<Events[K]>): () => void {
    let listeners = this.#listeners.get(type);
    if (!listeners) this.#listeners.set(type, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  }

  emit<K extends keyof Events>(type: K, event: Events[K]): void {
    for (const listener of this.#listeners.get(type) ?? []) {
      try {
        (listener as Listener<Events[K]>)(event);
      } catch (error) {
        // An application listener that throws must not leave the client half-way through a state change;
        // the error is rethrown on its own, where it surfaces as uncaught like any other bug of the application.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

/**
 * The values `listen` pushes, as an async iterator that ends once `ended` settles. It listens from this call,
 * not from the first `next()`, so nothing pushed in between is lost; values wait in memory until read.
 */
export function iterate<T>(listen: (push: Listener<T>) => () => void, ended: Promise<unknown>): AsyncGenerator<T, void, undefined> {
  const queue: T[] = [];
  let wake = (): void => {};
  let done = false;
  const stop = listen((value) => {
    queue.push(value);
    wake();
  });
  void ended.then(() => {
    done = true;
    stop();
    wake();
  });
  async function* drain(): AsyncGenerator<T, void, undefined> {
    try {
      for (;;) {
        if (queue.length > 0) yield queue.shift() as T;
        else if (done) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      stop();
    }
  }
  return drain();
}
