/**
 * The node's code runners, built once from config `code`: an isolate pool for lean code and a sandbox
 * (worker processes, or containers when `code.docker` is set) for the rest. Each is created on first use,
 * so a node whose events carry no code, or only lean code, starts no process and writes no file.
 */
import type { ApiUser, Person } from '../auth/authenticator.ts';
import type { CanConnectRequest, CanConnectVerdict, CodeRunner, PreparedCode, RunnerLimits, SystemCalls } from './code-runner.ts';
import { IsolateRunner } from './isolate.ts';
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
    this.#isolate ??= new IsolateRunner(this.#limits(this.#options.isolates));
    return this.#isolate;
  }

  get sandbox(): CodeRunner {
    const { docker, sandboxes } = this.#options;
    this.#sandbox ??= docker ? dockerSandboxLater(this.#limits(sandboxes), docker) : processSandbox(this.#limits(sandboxes));
    return this.#sandbox;
  }

  /** Runs `code` where its placement says. Never rejects: failures are verdicts with `failure` set. */
  canConnect(code: PreparedCode, request: CanConnectRequest, sys: SystemCalls): Promise<CanConnectVerdict> {
    return (code.lean ? this.isolate : this.sandbox).canConnect(code, request, sys);
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
 * The Docker sandbox, with dockerode loaded on first use: ~75 ms of every start for a node that never uses it.
 * Like every runner, it answers with a verdict, never a rejection (a failed load is `unavailable`).
 */
function dockerSandboxLater(limits: RunnerLimits, endpoint: DockerEndpoint): CodeRunner {
  const runner = import('./sandbox-docker.ts').then(({ dockerSandbox }) => dockerSandbox(limits, endpoint));
  runner.catch(() => {}); // reported by each call below
  return {
    canConnect: (code, request, sys) =>
      runner.then((loaded) => loaded.canConnect(code, request, sys), (error: Error) => unavailable(`docker: ${error.message}`)),
    close: () => runner.then((loaded) => loaded.close(), () => undefined),
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
