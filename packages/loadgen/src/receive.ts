/**
 * One receive buffer for every connection of a load process. Each read is handed to its connection's reader at
 * once and read whole before the next (one thread), so no connection needs a buffer of its own: without one given,
 * Node allocates a buffer per read (what that costs: README.md, "The client side of WebSocket").
 */
import type { OnReadOpts } from 'node:net';

/** Reads a connection's bytes during the call, and keeps none of them (a copy of what it must keep). */
export interface ChunkReader {
  push(chunk: Buffer): void;
}

const RECEIVE_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** `onread` for net.connect: the connection's bytes go to `reader` straight from the shared receive buffer. */
export function readInto(reader: ChunkReader): OnReadOpts {
  return {
    buffer: RECEIVE_BUFFER,
    // Node reads into RECEIVE_BUFFER and hands it back as a Uint8Array; true: keep reading.
    callback: (length) => {
      reader.push(RECEIVE_BUFFER.subarray(0, length));
      return true;
    },
  };
}
