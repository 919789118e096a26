import { createHash } from 'node:crypto';

/**
 * The merchant's `Idempotency-Key` header: 1 to 255 printable ASCII characters
 * (space to tilde). It names one operation of one project in one mode, whichever of
 * the project's key pairs sends it (a retry after a key rotation is the same operation).
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;
const PRINTABLE_ASCII = /^[\x20-\x7e]{1,255}$/;

/** How long a key and its answer are kept, on the gateway clock. */
export const IDEMPOTENCY_RETENTION_HOURS = 24;

export type IdempotencyKeyReading =
  { readonly kind: 'absent' } | { readonly kind: 'key'; readonly key: string } | { readonly kind: 'invalid'; readonly reason: string };

/**
 * The header as the request carried it (`values`: every occurrence, in order). Sent
 * twice it is refused: two keys do not name one operation.
 */
export function readIdempotencyKey(values: readonly string[]): IdempotencyKeyReading {
  if (values.length === 0) return { kind: 'absent' };
  if (values.length > 1) return { kind: 'invalid', reason: 'заголовок указан больше одного раза' };
  const key = values[0]!;
  if (!PRINTABLE_ASCII.test(key)) {
    return { kind: 'invalid', reason: `от 1 до ${IDEMPOTENCY_KEY_MAX_LENGTH} печатных символов ASCII (пробел, латиница, цифры, знаки)` };
  }
  return { kind: 'key', key };
}

/** Who sent a keyed request and what it asked: the project, the key pair, the mode, the key, and the request's fingerprint. */
export interface KeyedRequest {
  /**
   * An api_keys row (shared by the secret and public key of one pair) that names the
   * keyed steps: the request's own pair, or, once its key is claimed, the pair of the
   * key's first claimant (stored with the key), so a retry under a new pair reaches
   * the same refund or payout.
   */
  readonly keyId: string;
  /** The key's scope, with the mode. */
  readonly projectId: string;
  readonly mode: 'test' | 'live';
  readonly key: string;
  /** requestFingerprint of the request. */
  readonly fingerprint: string;
}

/** hex SHA-256 of the method, the path (with its query) and the exact raw body. */
export function requestFingerprint(method: string, path: string, rawBody: Buffer | string | undefined): string {
  return createHash('sha256')
    .update(`${method.toUpperCase()} ${path}\n`)
    .update(rawBody ?? '')
    .digest('hex');
}

/**
 * A digest naming one keyed request for good: the same key pair (`keyId`), mode, key
 * and request always give the same digest, another request under the same key another
 * one. `purpose` separates the uses (a refund id, a payout claim).
 */
export function keyedRequestDigest(purpose: string, r: KeyedRequest): Buffer {
  return createHash('sha256').update(`${purpose}\u0000${r.keyId}\u0000${r.mode}\u0000${r.key}\u0000${r.fingerprint}`).digest();
}
