/**
 * Sandbox workers in Docker containers (dockerode), when the config names a Docker endpoint: one
 * long-lived container per pool slot running the same worker script with the same permission flags,
 * talking JSON lines over its attached stdin/stdout. On top of the process sandbox, the container has no
 * network, a read-only root filesystem, no capabilities, a memory limit covering memory outside the JS
 * heap, and a process limit. The worker script, the code directory and the package directories are
 * mounted read-only at the same paths as on the host, so the worker's paths and flags are unchanged.
 * The image must be on the engine already (`docker pull node:24-slim`): the runner does not pull.
 */
import { PassThrough } from 'node:stream';
import { dirname } from 'node:path';
import Docker from 'dockerode';
import type { RunnerLimits } from './code-runner.ts';
import { encodeLine, lineSplitter, WORKER_OPTIONS } from './sandbox-protocol.ts';
import { codeDirName, SandboxRunner, type WorkerEvents, type WorkerHandle, type WorkerLauncher } from './sandbox.ts';
import { packageDirs, WORKER_SCRIPT, workerArgs, workerNodeFlags } from './sandbox-process.ts';

/** Config `code.docker`: a socket path, or host and port; neither means /var/run/docker.sock. */
export interface DockerEndpoint {
  socketPath?: string | undefined;
  host?: string | undefined;
  port?: number | undefined;
  /** Default node:24-slim. */
  image?: string | undefined;
}

export const DEFAULT_IMAGE = 'node:24-slim';
const DEFAULT_SOCKET = '/var/run/docker.sock';
/** Node's own footprint beside the capped JS heap: code, stacks, buffers. */
const CONTAINER_OVERHEAD_MB = 128;
const STDERR_TAIL = 4096;
const MB = 1024 * 1024;

export function dockerClient(endpoint: DockerEndpoint): { docker: Docker; where: string } {
  if (endpoint.host !== undefined) {
    const port = endpoint.port ?? 2375;
    return { docker: new Docker({ host: endpoint.host, port }), where: `docker at ${endpoint.host}:${port}` };
  }
  const socketPath = endpoint.socketPath ?? DEFAULT_SOCKET;
  return { docker: new Docker({ socketPath }), where: `docker at unix://${socketPath}` };
}

export class DockerLauncher implements WorkerLauncher {
  readonly where: string;
  readonly #docker: Docker;
  readonly #options: Docker.ContainerCreateOptions;

  constructor(endpoint: DockerEndpoint, codeDir: string, memoryMb: number) {
    ({ docker: this.#docker, where: this.where } = dockerClient(endpoint));
    this.#options = containerOptions(endpoint.image ?? DEFAULT_IMAGE, codeDir, memoryMb);
  }

  async start(events: WorkerEvents): Promise<WorkerHandle> {
    const container = await this.#docker.createContainer(this.#options);
    try {
      // Attach before start, so that nothing the worker writes is missed; hijack gives a plain duplex socket.
      const stream = await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
      stream.on('error', () => {}); // followed by close, handled below
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      this.#docker.modem.demuxStream(stream, stdout, stderr);
      stdout.on('data', lineSplitter((line) => deliver(line, events)));
      let stderrTail = '';
      stderr.on('data', (chunk: Buffer) => {
        stderrTail = (stderrTail + chunk.toString()).slice(-STDERR_TAIL);
      });
      const kill = (): void => {
        container.kill().catch(() => {}); // already gone (AutoRemove) or the engine is unreachable
      };
      // Asked before start, as `docker run --rm` does: with AutoRemove, a wait asked after the exit finds no container.
      container.wait({ condition: 'removed' }).then(
        // 137: SIGKILL, here the cgroup's OOM killer (a container the node killed is no longer listened to).
        ({ StatusCode }: { StatusCode: number }) =>
          events.exit(`container exit status ${StatusCode}`, StatusCode === 137 || /heap out of memory/i.test(stderrTail)),
        (error: Error) => events.exit(`container wait failed: ${error.message}`, false),
      );
      await container.start();
      stream.on('close', () => {
        events.exit('the attach stream closed', false);
        kill();
      });
      return { send: (message) => void stream.write(encodeLine(message)), kill };
    } catch (error) {
      await container.remove({ force: true }).catch(() => {});
      throw error;
    }
  }
}

/** A protocol line from the container's stdout; anything else is the code printing, and is dropped. */
function deliver(line: string, events: WorkerEvents): void {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  events.message(message);
}

function containerOptions(image: string, codeDir: string, memoryMb: number): Docker.ContainerCreateOptions {
  const mounts = [dirname(WORKER_SCRIPT), codeDir, ...packageDirs()];
  return {
    Image: image,
    Cmd: ['node', ...workerNodeFlags(codeDir, memoryMb), WORKER_SCRIPT, ...workerArgs(codeDir), WORKER_OPTIONS.lines],
    // The node's own user, so the worker can read the code files it wrote (their directory is private).
    User: process.getuid && process.getgid ? `${process.getuid()}:${process.getgid()}` : 'node',
    Env: process.env.TZ === undefined ? [] : [`TZ=${process.env.TZ}`],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    StdinOnce: false,
    Tty: false,
    NetworkDisabled: true,
    Labels: { 'herald.role': 'can-connect-sandbox' },
    HostConfig: {
      AutoRemove: true,
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Binds: mounts.map((dir) => `${dir}:${dir}:ro`),
      Memory: (memoryMb + CONTAINER_OVERHEAD_MB) * MB,
      MemorySwap: (memoryMb + CONTAINER_OVERHEAD_MB) * MB,
      PidsLimit: 64,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
    },
  };
}

/** The Docker sandbox: `size` containers on `endpoint`, started on first use. */
export function dockerSandbox(limits: RunnerLimits, endpoint: DockerEndpoint): SandboxRunner {
  const codeDir = codeDirName();
  return new SandboxRunner(new DockerLauncher(endpoint, codeDir, limits.memoryMb), limits, codeDir);
}
