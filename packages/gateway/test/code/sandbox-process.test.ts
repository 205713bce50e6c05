import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import inspector from 'node:inspector';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { CodeRunner } from '../../src/code/code-runner.ts';
import { ProcessLauncher, processSandbox } from '../../src/code/sandbox-process.ts';
import type { ToWorker } from '../../src/code/sandbox-protocol.ts';
import { codeDirName, SandboxRunner, type WorkerLauncher } from '../../src/code/sandbox.ts';
import { code, customerCalls, outsider, request, SOURCES } from './fixtures.ts';
import { CONTRACT_LIMITS, refusesPastTheQueue, runnerContract } from './runner.contract.ts';

runnerContract('worker processes', (limits) => processSandbox(limits));

/** Runs `source` once on a fresh one-worker sandbox. */
async function once(source: string): Promise<Awaited<ReturnType<CodeRunner['canConnect']>>> {
  const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
  try {
    return await runner.canConnect(code(source), request(), customerCalls());
  } finally {
    await runner.close();
  }
}

const denied = (verdict: { failure?: string; errorText?: string }, use: string): void => {
  assert.equal(verdict.failure, 'threw');
  assert.match(verdict.errorText ?? '', new RegExp(`ERR_ACCESS_DENIED.*${use}`));
};

describe('process sandbox beyond the contract', () => {
  it('refuses at once when every worker is busy and the queue is full', () => refusesPastTheQueue(processSandbox));

  it('sends the calls that arrive together to its worker in one message', async () => {
    const codeDir = codeDirName();
    const launcher = new ProcessLauncher(codeDir, CONTRACT_LIMITS.memoryMb);
    const sent: ToWorker[] = [];
    const counting: WorkerLauncher = {
      where: launcher.where,
      start: async (events) => {
        const handle = await launcher.start(events);
        return { send: (message) => { sent.push(message); handle.send(message); }, kill: () => handle.kill() };
      },
    };
    const runner = new SandboxRunner(counting, { ...CONTRACT_LIMITS, size: 1 }, codeDir);
    try {
      const sys = customerCalls();
      const verdicts = await Promise.all(Array.from({ length: 10 }, (_, i) => runner.canConnect(code(SOURCES.indiaOnly), request(i % 2 ? outsider : undefined), sys)));
      assert.deepEqual(verdicts.map((verdict) => verdict.canConnect), [true, false, true, false, true, false, true, false, true, false]);
      assert.deepEqual(sent.map((message) => (message.type === 'calls' ? message.calls.length : message.type)), [10]);
    } finally {
      await runner.close();
    }
  });

  it('keeps module state between calls: code that needs it is why the sandbox exists', async () => {
    const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
    try {
      const counts = code("let calls = 0; export function main(g) { calls += 1; return { canConnect: calls % 2 === 1, errorText: 'call ' + calls } }");
      assert.equal(counts.inIsolate, false);
      const verdicts = [];
      for (let i = 0; i < 3; i++) verdicts.push(await runner.canConnect(counts, request(), customerCalls()));
      assert.deepEqual(verdicts, [{ canConnect: true }, { canConnect: false, errorText: 'call 2' }, { canConnect: true }]);
    } finally {
      await runner.close();
    }
  });

  it('lets code import Node built-ins and the packages the gateway installed', async () => {
    const verdict = await once(`
      import { createHash } from 'node:crypto';
      import { parse } from 'acorn';
      async function main(g) {
        const digest = createHash('sha256').update(String(g.req.auth.person.customer_id)).digest('hex');
        return { canConnect: digest.length === 64 && parse('1 + 1', { ecmaVersion: 'latest' }).type === 'Program' };
      }`);
    assert.deepEqual(verdict, { canConnect: true });
  });

  it('cannot read /etc/passwd, write files or start processes: ERR_ACCESS_DENIED', async () => {
    denied(await once("import { readFileSync } from 'node:fs'; function main() { readFileSync('/etc/passwd'); return { canConnect: true } }"), 'allow-fs-read');
    const written = `/tmp/herald-sandbox-${process.pid}`;
    denied(await once(`import { writeFileSync } from 'node:fs'; function main() { writeFileSync('${written}', 'x'); return { canConnect: true } }`), 'allow-fs-write');
    assert.equal(existsSync(written), false);
    denied(await once("import { execFileSync } from 'node:child_process'; function main() { execFileSync('/bin/true'); return { canConnect: true } }"), 'allow-child-process');
    denied(await once("import { Worker } from 'node:worker_threads'; function main() { new Worker('1', { eval: true }); return { canConnect: true } }"), 'allow-worker');
  });

  it('cannot signal or reprioritise any process, the node included: ERR_ACCESS_DENIED, and the node hears nothing', async () => {
    const heard: string[] = [];
    const hear = (signal: NodeJS.Signals) => () => heard.push(signal);
    const listeners = (['SIGTERM', 'SIGINT', 'SIGHUP'] as const).map((signal) => [signal, hear(signal)] as const);
    for (const [signal, listener] of listeners) process.on(signal, listener);
    const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
    const attempt = (imports: string, statement: string) =>
      runner.canConnect(code(`${imports} function main() { ${statement}; return { canConnect: true } }`), request(), customerCalls());
    try {
      const kills = [
        "process.kill(process.ppid, 'SIGTERM')",
        'process.kill(process.pid)',
        "process.kill(-process.ppid, 'SIGTERM')",
        "process.kill(0, 'SIGTERM')",
        "process.getBuiltinModule('process').kill(process.ppid, 'SIGHUP')",
        "try { Object.defineProperty(process, 'kill', { value: () => true }) } catch {} try { delete process.kill } catch {} process.kill(process.ppid, 'SIGTERM')",
      ];
      for (const statement of kills) denied(await attempt('', statement), 'process\\.kill');
      for (const method of ['_kill', '_debugProcess', 'abort']) denied(await attempt('', `process.${method}(process.ppid, 15)`), `process\\.${method}`);
      denied(await attempt("import proc from 'node:process';", "proc.kill(process.ppid, 'SIGINT')"), 'process\\.kill');
      denied(await attempt("import { setPriority } from 'node:os';", 'setPriority(process.ppid, 19)'), 'os\\.setPriority');
      denied(await attempt("import os from 'node:os';", 'os.setPriority(process.ppid, 19)'), 'os\\.setPriority');
    } finally {
      await runner.close();
      for (const [signal, listener] of listeners) process.off(signal, listener);
    }
    assert.deepEqual(heard, []);
    assert.equal(inspector.url(), undefined, 'no inspector was opened in the node (SIGUSR1)');
  });

  it('runs each worker in a session and process group of its own', async () => {
    const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
    try {
      const verdict = await runner.canConnect(code('function main() { return { canConnect: false, errorText: String(process.pid) } }'), request(), customerCalls());
      const pid = Number(verdict.errorText);
      // /proc/<pid>/stat: pid (comm) state ppid pgrp session ...
      const [ppid, pgrp, session] = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) \S+ /s, '').split(' ').map(Number);
      assert.deepEqual({ ppid, pgrp, session }, { ppid: process.pid, pgrp: pid, session: pid });
    } finally {
      await runner.close();
    }
  });

  it('sees none of the node’s environment', async () => {
    process.env.HERALD_CANARY = 'secret';
    try {
      const verdict = await once("function main() { return { canConnect: process.env.HERALD_CANARY === undefined, errorText: 'saw it' } }");
      assert.deepEqual(verdict, { canConnect: true });
    } finally {
      delete process.env.HERALD_CANARY;
    }
  });

  it('a worker that dies without a memory problem is unavailable, and the next call gets a new worker', async () => {
    const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
    try {
      const exits = code("function main(g) { process.exit(3) }");
      const verdict = await runner.canConnect(exits, request(), customerCalls());
      assert.equal(verdict.failure, 'unavailable');
      assert.match(verdict.errorText ?? '', /the worker exited during the call \(code 3\)/);
      assert.deepEqual(await runner.canConnect(code('function main() { return { canConnect: true } }'), request(), customerCalls()), { canConnect: true });
    } finally {
      await runner.close();
    }
  });

  it('a module that fails to load is the code throwing', async () => {
    const verdict = await once("import nothing from 'no-such-package-herald'; function main() { return { canConnect: true } }");
    assert.equal(verdict.failure, 'threw');
    assert.match(verdict.errorText ?? '', /no-such-package-herald/);
  });

  it('rows that JSON cannot carry reach the code as an error, not as a wait until the time limit', async () => {
    const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
    try {
      const bigint = { db: { getAll: async () => [{ balance: 10n }] } };
      const verdict = await runner.canConnect(code(SOURCES.fromDatabase), request(), bigint);
      assert.equal(verdict.failure, 'threw');
      assert.match(verdict.errorText ?? '', /the rows cannot be sent: .*BigInt/);
    } finally {
      await runner.close();
    }
  });

  it('writes a code file again when a temp-directory cleaner removed it, for the next new worker', async () => {
    const runner = processSandbox({ ...CONTRACT_LIMITS, size: 1 });
    const mine = (): string[] => readdirSync(tmpdir()).filter((name) => name.startsWith(`herald-code-${process.pid}-`));
    try {
      const allow = code(SOURCES.allow);
      assert.deepEqual(await runner.canConnect(allow, request(), customerCalls()), { canConnect: true });
      for (const dir of mine()) rmSync(join(tmpdir(), dir), { recursive: true });
      const exits = await runner.canConnect(code('function main() { process.exit(3) }'), request(), customerCalls());
      assert.equal(exits.failure, 'unavailable');
      assert.deepEqual(await runner.canConnect(allow, request(), customerCalls()), { canConnect: true });
    } finally {
      await runner.close();
    }
    assert.deepEqual(mine(), [], 'close removes the code directory');
  });
});
