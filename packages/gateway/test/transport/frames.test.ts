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
  it('builds frames a WebSocket client reads back, at every length encoding (7-bit, 16-bit, 64-bit), in UTF-8 bytes', async () => {
    // Lengths in bytes, around each encoding's bounds; 'é' is two bytes, so the length is not the string's.
    for (const length of [0, 1, 125, 126, 65535, 65536, 200_000]) {
      const text = 'é'.repeat(Math.floor(length / 2)) + 'a'.repeat(length % 2);
      const receiver = new Receiver({ isServer: false });
      const message = once(receiver, 'message');
      receiver.write(textFrame(text));
      const [data, isBinary] = (await message) as [Buffer, boolean];
      assert.equal(isBinary, false, `length ${length}`);
      assert.equal(data.length, length);
      assert.equal(data.toString('utf8'), text, `length ${length}`);
    }
  });
});
