/**
 * The line that says what a run is doing while it runs, once a second, on stderr: rewritten in place on a
 * terminal, one line per tick otherwise (logs). Each tick is also where commands take their per-second samples.
 */

export type Tick = (elapsedS: number) => Promise<string> | string;

export class Progress {
  readonly #quiet: boolean;
  readonly #tty = process.stderr.isTTY === true;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;
  #began = 0;

  constructor(quiet: boolean) {
    this.#quiet = quiet;
  }

  start(tick: Tick): void {
    this.#began = performance.now();
    this.#timer = setInterval(() => void this.#tick(tick), 1000);
  }

  async #tick(tick: Tick): Promise<void> {
    // A tick that waits on workers must not pile up behind a slow one.
    if (this.#busy) return;
    this.#busy = true;
    let line: string;
    try {
      line = await tick((performance.now() - this.#began) / 1000);
    } catch (error) {
      line = `progress unavailable: ${(error as Error).message}`;
    }
    this.#busy = false;
    if (!this.#quiet && this.#timer !== undefined) process.stderr.write(this.#tty ? `\r\x1b[K${line}` : `${line}\n`);
  }

  stop(): void {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    if (!this.#quiet && this.#tty) process.stderr.write('\n');
  }
}

export function say(quiet: boolean, line: string): void {
  if (!quiet) process.stderr.write(`${line}\n`);
}
