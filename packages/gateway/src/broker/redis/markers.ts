/**
 * What a node's channel (`gw:node:{<nodeId>}`) carries besides emits: a message whose first byte is a marker. An emit
 * starts with its event name (never a control character: `[A-Za-z0-9_.-]`, or a table's `SCHEMA_POST_BULK_INSERT:…`)
 * and a history emit with "[", so a control byte marks the rest. Canaries go through Redis even to the sending node
 * itself, since the node's channel is what they check.
 */

/** The marker bytes: control messages (control.ts) and delivery canaries. */
export const Marker = { control: 0x00, canary: 0x01 } as const;
export type Marker = (typeof Marker)[keyof typeof Marker];

/** The message's marker, or undefined for an emit. */
export function markerOf(message: Buffer): number | undefined {
  const first = message[0];
  return first === Marker.control || first === Marker.canary ? first : undefined;
}

/** The text after a marked message's marker. */
export function markedText(message: Buffer): string {
  return message.toString('utf8', 1);
}

export function markedFrame(marker: Marker, text: string): Buffer {
  const framed = Buffer.allocUnsafe(1 + Buffer.byteLength(text));
  framed[0] = marker;
  framed.write(text, 1);
  return framed;
}
