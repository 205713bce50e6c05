import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WriteQueue } from '../../src/broker/redis/write-queue.ts';

/** Writes that record when they are sent and settle only when told. */
function recorder() {
  const sent: string[] = [];
  const answers = new Map<string, () => void>();
  const sending = new Map<string, () => void>();
  const write = (name: string) => () => {
    sent.push(name);
    sending.get(name)?.();
    return new Promise<void>((resolve) => answers.set(name, resolve));
  };
  const answer = (...names: string[]) => {
    for (const name of names) answers.get(name)!();
  };
  /** Resolves once the write of that name is sent. */
  const sentOf = (name: string) => (sent.includes(name) ? Promise.resolve() : new Promise<void>((resolve) => sending.set(name, resolve)));
  return { sent, write, answer, sentOf };
}

const unexpected = (error: Error): void => assert.fail(`no write should fail: ${error.message}`);

describe('WriteQueue', () => {
  it('sends a write at once when none left within the gap, and settles when it is answered', async () => {
    const queue = new WriteQueue(unexpected);
    const { sent, write, answer } = recorder();
    let settled = false;
    const first = queue.push(write('a')).then(() => (settled = true));
    assert.deepEqual(sent, ['a'], 'sent within push');
    await Promise.resolve();
    assert.equal(settled, false, 'not before its answer');
    answer('a');
    await first;
  });

  it('sends the writes made within the gap together, in call order, after the first', async () => {
    const queue = new WriteQueue(unexpected);
    const { sent, write, answer, sentOf } = recorder();
    const first = queue.push(write('a'));
    const batch = ['b', 'c', 'd'].map((name) => queue.push(write(name)));
    assert.deepEqual(sent, ['a']);
    assert.equal(new Set(batch).size, 1, 'one promise for the batch');
    answer('a');
    await first;
    // The batch leaves at the gap's end, whether or not the first was answered; it settles with its last answer.
    await sentOf('d');
    assert.deepEqual(sent, ['a', 'b', 'c', 'd']);
    let settled = false;
    void batch[0]!.then(() => (settled = true));
    answer('b', 'c');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, false);
    answer('d');
    await batch[0];
  });

  it('once dropped, sends nothing more and settles the waiting writes', async () => {
    const queue = new WriteQueue(unexpected);
    const { sent, write, answer } = recorder();
    void queue.push(write('a'));
    const waiting = queue.push(write('b'));
    queue.drop();
    await waiting;
    await queue.push(write('c'));
    answer('a');
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.deepEqual(sent, ['a']);
  });

  it('reports a failed write and still settles its promise and its batch', async () => {
    const failures: string[] = [];
    const queue = new WriteQueue((error) => failures.push(error.message));
    await queue.push(() => Promise.reject(new Error('first')));
    await queue.push(
      () => Promise.reject(new Error('second')),
      () => {
        throw new Error('third');
      },
    );
    assert.deepEqual(failures.sort(), ['first', 'second', 'third']);
  });
});
