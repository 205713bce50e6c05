/**
 * Canaries on a node's channel (`gw:node:{<nodeId>}`), beside its emits and control messages, marked by a first byte
 * 0x01: an emit starts with its event name (never a control character), a control message with 0x00, a history
 * emit with "[". They go through Redis even to the sending node itself, since the node's channel is what they check.
 */

export const CANARY_MARKER = 0x01;

export function isCanary(message: Buffer): boolean {
  return message.length > 0 && message[0] === CANARY_MARKER;
}

/** The text of a canary read from the channel. */
export function canaryText(message: Buffer): string {
  return message.toString('utf8', 1);
}

export function canaryFrame(canary: string): Buffer {
  const framed = Buffer.allocUnsafe(1 + Buffer.byteLength(canary));
  framed[0] = CANARY_MARKER;
  framed.write(canary, 1);
  return framed;
}
