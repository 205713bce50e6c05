/** What a call to the gateway ended with when it did not succeed: its HTTP status and the gateway's errors. */
import type { WireError } from '@herald/protocol';

export class HeraldServerError extends Error {
  /** The HTTP status; 0 when no answer came (the connection failed or timed out). */
  readonly status: number;
  readonly errors: readonly WireError[];

  constructor(status: number, errors: readonly WireError[], message = errors.map((error) => `${error.code}: ${error.message}`).join('; ')) {
    super(message || `HTTP ${status}`);
    this.name = 'HeraldServerError';
    this.status = status;
    this.errors = errors;
  }

  /** The first error's code (e.g. `EVENT_FORBIDDEN`), if the gateway named one. */
  get code(): string | undefined {
    return this.errors[0]?.code;
  }
}
