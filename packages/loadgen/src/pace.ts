/**
 * `notify --keep-within MS`: a back end that watches its deliveries and paces itself. The emitter holds its calls while
 * the notifications its 2xx answers promised and the listeners have not yet read would take them more than MS to read
 * at the rate they read over the last second. Without it the emitter sends as fast as the answers come (backing off
 * only on 503), and whatever queues up between the node and the listeners' reading (the node's backlog, the kernel's
 * socket buffers, a saturated client process) shows as late deliveries.
 */
import type { ClientGroup } from './pool.ts';

/** How often the listeners' count is read, ms. */
const READ_EVERY_MS = 50;
/** The window their reading rate is taken over, ms. */
const RATE_WINDOW_MS = 1000;

export class DeliveryPace {
  readonly #group: ClientGroup;
  readonly #withinMs: number;
  /** [performance.now(), notifications received], the last RATE_WINDOW_MS of them. */
  #samples: Array<[number, number]> = [];
  #timer: NodeJS.Timeout | undefined;
  #reading = false;

  constructor(group: ClientGroup, withinMs: number) {
    this.#group = group;
    this.#withinMs = withinMs;
  }

  start(): void {
    this.#samples = [];
    this.#timer ??= setInterval(() => void this.#read(), READ_EVERY_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Whether a call now should wait: `expected`, the notifications the answers so far promised (the listeners' count counts alike). */
  holds(expected: number): boolean {
    const first = this.#samples[0];
    const last = this.#samples.at(-1);
    // Until the listeners' pace is known, the calls go.
    if (first === undefined || last === undefined || last[0] - first[0] < READ_EVERY_MS) return false;
    const perMs = (last[1] - first[1]) / (last[0] - first[0]);
    return expected - last[1] > perMs * this.#withinMs;
  }

  async #read(): Promise<void> {
    if (this.#reading) return;
    this.#reading = true;
    try {
      const { received } = await this.#group.snapshot();
      const now = performance.now();
      // The listeners' count was reset (after a warm-up): their pace is read afresh.
      if (received < (this.#samples.at(-1)?.[1] ?? 0)) this.#samples = [];
      this.#samples.push([now, received]);
      while (this.#samples.length > 2 && now - this.#samples[0]![0] > RATE_WINDOW_MS) this.#samples.shift();
    } finally {
      this.#reading = false;
    }
  }
}
