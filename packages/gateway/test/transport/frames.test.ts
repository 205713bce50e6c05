import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import type { EventEmitter } from 'node:events';
import type { Writable } from 'node:stream';
import * as ws from 'ws';
import { textFrame } from '../../src/transport/frames.ts';

/** ws's own frame parser (exported, but not in its type declarations): what a client runs on our bytes. */
const { Receiver } = ws as unknown as { Receiver: new (options: { isServer: boolean }) => Writable & EventEmitter };

describe('textFrame', () => {
  it('builds frames a WebSocket client reads back, at every length encoding (7-bit, 16-bit, 64-bit)', async () => {
    for (const length of [0, 1, 125, 126, 65535, 65536, 200_000]) {
      const payload = Buffer.alloc(length, 'a');
      const receiver = new Receiver({ isServer: false });
      const message = once(receiver, 'message');
      receiver.write(textFrame(payload));
      const [data, isBinary] = (await message) as [Buffer, boolean];
      assert.equal(isBinary, false, `length ${length}`);
      assert.ok(payload.equals(data), `length ${length}`);
    }
  });
});
