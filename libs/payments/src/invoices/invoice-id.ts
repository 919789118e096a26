import { uuidBytes, uuidV5 } from '#ledger';

/**
 * The invoice id of an orderId: a UUID v5 in the project's secret namespace. The
 * same orderId always names the same invoice stream, so concurrent creates race on
 * one stream (expected: no stream) and exactly one wins; without the namespace the
 * id cannot be guessed from the orderId.
 */
export function invoiceIdFor(projectNamespace: string, mode: string, orderId: string): string {
  return uuidV5(uuidBytes(projectNamespace), `${mode}\u0000${orderId}`);
}
