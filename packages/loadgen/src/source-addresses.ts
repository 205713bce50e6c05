/** Where each load client connects from: the loopback addresses of 127/8, spread so that no address runs short of ports. */

/**
 * The source address of client `index`. A connect from a given address first binds it, and the kernel's
 * search for a free port to bind grows costly past ~5,000 sockets on one address (README.md, "Many clients"), so
 * clients are spread 5,000 to an address by default:
 * 127.0.0.2, 127.0.0.3, ... 127.0.0.255, 127.0.1.0, ... (the whole of 127/8 is this machine's on Linux).
 */
export function sourceAddress(index: number, perAddress: number): string | undefined {
  if (perAddress === 0) return undefined;
  const n = 2 + Math.floor(index / perAddress);
  return `127.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** Source addresses there are to spread over: 127.0.0.2 to 127.255.255.254. */
export const SOURCE_ADDRESSES = 2 ** 24 - 3;
