/** Checking a webhook's signature (docs/protocol.md 12.4): HMAC-SHA256 of the raw body with the shared secret. */
import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Whether `signature` (the `x-herald-signature` header, `sha256=<hex>`) signs `body` (the request's raw bytes, as
 * received: not JSON parsed and written again) with `secret`. Compared in constant time.
 */
export function verifyWebhook(body: string | Uint8Array, signature: string | null | undefined, secret: string): boolean {
  if (typeof signature !== 'string' || !signature.startsWith('sha256=')) return false;
  const given = Buffer.from(signature.slice('sha256='.length), 'hex');
  const expected = createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}
