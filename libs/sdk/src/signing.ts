import { createHmac, timingSafeEqual } from 'node:crypto';

/** Mode 2 of the spec: hex HMAC-SHA256 of `<timestamp>.<exact raw body>` keyed with the project's webhook secret. */
export function signRequest(secret: string, timestamp: number | string, rawBody: string | Uint8Array): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/** Constant-time equality of two hex digests; different lengths (or non-hex text) are unequal. */
export function hexDigestsEqual(expectedHex: string, givenHex: string): boolean {
  if (!/^[0-9a-f]+$/i.test(givenHex) || givenHex.length % 2 !== 0) return false;
  const expected = Buffer.from(expectedHex, 'hex');
  const given = Buffer.from(givenHex.toLowerCase(), 'hex');
  return expected.length === given.length && timingSafeEqual(expected, given);
}
