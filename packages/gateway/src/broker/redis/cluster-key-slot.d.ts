/** The hash slot of a key in a Redis Cluster (CRC16 of its hash tag, or of the whole key, modulo 16384): ioredis's own. */
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string | Buffer): number;
}
