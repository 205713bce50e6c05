/** The fast path's buffer of bytes read and not answered (src/http/unread-bytes.ts), against a plain reference. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { UnreadBytes } from '../../src/http/unread-bytes.ts';

const FUZZ_RUNS = Number(process.env.HERALD_FUZZ_RUNS ?? 200);

type Step = { append: Uint8Array; expected: number | undefined } | { consume: number } | { take: true };

const steps = fc.array(
  fc.oneof(
    fc.record({ append: fc.uint8Array({ minLength: 1, maxLength: 300 }), expected: fc.option(fc.nat(5000), { nil: undefined }) }),
    fc.record({ consume: fc.nat(400) }),
    fc.constant({ take: true as const }),
  ),
  { maxLength: 60 },
);

describe('UnreadBytes', () => {
  test('holds exactly the bytes appended and not consumed or taken, whatever the order', () => {
    fc.assert(
      fc.property(steps, (plan: Step[]) => {
        const unread = new UnreadBytes();
        let reference = Buffer.alloc(0);
        for (const step of plan) {
          if ('append' in step) {
            unread.append(Buffer.from(step.append), step.expected);
            reference = Buffer.concat([reference, step.append]);
          } else if ('consume' in step) {
            unread.consume(step.consume);
            reference = reference.subarray(Math.min(step.consume, reference.length));
          } else {
            assert.deepEqual(unread.take() ?? Buffer.alloc(0), reference);
            reference = Buffer.alloc(0);
          }
          assert.equal(unread.length, reference.length);
          assert.deepEqual(unread.view(), reference);
        }
      }),
      { numRuns: FUZZ_RUNS },
    );
  });

  test('keeps a read that finds nothing waiting as it is, and never writes into it', () => {
    const unread = new UnreadBytes();
    const first = Buffer.from('POST / HTTP/1.1\r\n');
    const copy = Buffer.from(first);
    unread.append(first);
    assert.equal(unread.view().buffer, first.buffer);
    unread.append(Buffer.from('Host: x\r\n\r\n'));
    assert.deepEqual(first, copy);
    assert.equal(unread.view().toString(), 'POST / HTTP/1.1\r\nHost: x\r\n\r\n');
  });
});
