import { createPublicKey, verify } from 'node:crypto';

/** A public key of the gateway, as GET /v1/audit/keys lists it. */
export interface AuditPublicKey {
  readonly kid: string;
  readonly alg: string;
  readonly publicKey: string;
  readonly validFrom?: string;
  readonly validUntil?: string | null;
}

/** Canonical JSON (RFC 8785, JCS) for the values a statement holds: no whitespace, object keys sorted by UTF-16 code units. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );

/**
 * Whether a statement (GET /v1/statements; the text received or its parsed JSON) carries
 * the gateway's Ed25519 signature, made by the key of its `signature.kid` among `keys`
 * (GET /v1/audit/keys, retired keys included), over the statement without `signature`
 * in canonical JSON. Uses node:crypto only; nothing is fetched.
 */
export function verifyStatement(doc: string | object, keys: readonly AuditPublicKey[] | { readonly keys: readonly AuditPublicKey[] }): boolean {
  const { signature, ...signed } = (typeof doc === 'string' ? JSON.parse(doc) : doc) as { signature?: { kid?: string; alg?: string; value?: string } };
  const key = (Array.isArray(keys) ? (keys as readonly AuditPublicKey[]) : (keys as { readonly keys: readonly AuditPublicKey[] }).keys).find(
    (k) => k.kid === signature?.kid && k.alg === 'Ed25519',
  );
  if (!key || signature?.alg !== 'Ed25519' || typeof signature.value !== 'string') return false;
  return verify(null, Buffer.from(canonicalJson(signed), 'utf8'), createPublicKey(key.publicKey), Buffer.from(signature.value, 'base64'));
}
