import { createHash } from 'node:crypto';

/**
 * The invoice id of an orderId: a UUID v5 in the project's secret namespace. The
 * same orderId always names the same invoice stream, so concurrent creates race on
 * one stream (expected: no stream) and exactly one wins; without the namespace the
 * id cannot be guessed from the orderId.
 */
export function invoiceIdFor(projectNamespace: string, mode: string, orderId: string): string {
  const namespace = Buffer.from(projectNamespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(namespace).update(`${mode}\u0000${orderId}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
