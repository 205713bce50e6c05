/**
 * The node's code runners, built once from config `code`: an isolate pool for isolate-safe code and a sandbox
 * (worker processes, or containers when `code.docker` is set) for the rest. Each is created on first use,
 * so a node whose events carry no code, or only isolate-safe code, starts no process and writes no file; the isolate
 * runner's module (isolated-vm's addon) and the Docker client are loaded then too, not at start.
 */
import type { ApiUser, Person } from '../auth/authenticator.ts';
import type { CanConnectRequest, CanConnectVerdict, CodeRunner, PreparedCode, RunnerLimits, SystemCalls } from './code-runner.ts';
import type { DockerEndpoint } from './sandbox-docker.ts';
import { processSandbox } from './sandbox-process.ts';
import { unavailable } from './verdict.ts';

/** Config `code` (defaults in DEFAULT_CODE_OPTIONS). */
export interface CodeOptions {
  isolates: number;
  sandboxes: number;
  timeoutMs: number;
  memoryMb: number;
  queue: number;
  docker?: DockerEndpoint | undefined;
}

export const DEFAULT_CODE_OPTIONS: Readonly<CodeOptions> = { isolates: 2, sandboxes: 2, timeoutMs: 1000, memoryMb: 32, queue: 1024 };

export class CodeRunners {
  readonly #options: CodeOptions;
  #isolate: CodeRunner | undefined;
  #sandbox: CodeRunner | undefined;

  constructor(options: CodeOptions = DEFAULT_CODE_OPTIONS) {
    this.#options = options;
  }

  get isolate(): CodeRunner {
    const limits = this.#limits(this.#options.isolates);
    this.#isolate ??= loadedOnFirstUse('isolates', () => import('./isolate.ts').then(({ IsolateRunner }) => new IsolateRunner(limits)));
    return this.#isolate;
  }

  get sandbox(): CodeRunner {
    const { docker, sandboxes } = this.#options;
    const limits = this.#limits(sandboxes);
    this.#sandbox ??= docker
      ? loadedOnFirstUse('docker', () => import('./sandbox-docker.ts').then(({ dockerSandbox }) => dockerSandbox(limits, docker)))
      : processSandbox(limits);
    return this.#sandbox;
  }

  /** Runs `code` where its placement says. Never rejects: failures are verdicts with `failure` set. */
  canConnect(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    return (code.inIsolate ? this.isolate : this.sandbox).canConnect(code, request, sys);
  }

  async close(): Promise<void> {
    await Promise.all([this.#isolate?.close(), this.#sandbox?.close()]);
  }

  #limits(size: number): RunnerLimits {
    const { timeoutMs, memoryMb, queue } = this.#options;
    return { size, timeoutMs, memoryMb, queue };
  }
}

/**
 * A runner whose module is loaded when the runner is first used, not at start: dockerode slowed every start, and
 * isolated-vm's addon took memory, for a node that never uses them (docs/architecture.md, "Measured costs"). Once
 * loaded, calls go straight to it. Like every runner, it answers with a verdict, never a rejection (a failed load is
 * `unavailable`).
 */
function loadedOnFirstUse(what: string, load: () => Promise<CodeRunner>): CodeRunner {
  let loaded: CodeRunner | undefined;
  const runner = load().then((ready) => (loaded = ready));
  runner.catch(() => {}); // reported by each call below
  return {
    canConnect: (code, request, sys) =>
      loaded?.canConnect(code, request, sys) ??
      runner.then((ready) => ready.canConnect(code, request, sys), (error: Error) => unavailable(`${what}: ${error.message}`)),
    close: () => runner.then((ready) => ready.close(), () => undefined),
  };
}

/** `g.req` from what the transport knows of a REGISTER entry: plain values only, copied into the runner. */
export function canConnectRequest(user: ApiUser, person: Person | undefined, entry: object): CanConnectRequest {
  // No copies: every runner serialises the request (JSON into an isolate, IPC or a pipe to a worker), so the
  // code cannot reach the node's own objects. The groups are a Set, which JSON would not carry.
  // API Maker's names too (code-runner.ts): the same values, written twice by whichever serialises the request.
  const apiUser = { name: user.name, groups: [...user.groups] };
  const auth: CanConnectRequest['auth'] = { apiUser, authAMUser: apiUser };
  if (person) {
    auth.person = person.fields;
    auth.authAMDB = person.fields;
  }
  return { auth, eventData: entry };
}
