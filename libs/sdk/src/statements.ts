import { createHash, createPublicKey, KeyObject, verify } from 'node:crypto';

/** A public key of the gateway, as GET /v1/audit/keys lists it. */
export interface AuditPublicKey {
  readonly kid: string;
  readonly alg: string;
  readonly publicKey: string;
  readonly validFrom?: string | undefined;
  readonly validUntil?: string | null | undefined;
}

/** Canonical JSON (RFC 8785, JCS) for the values a statement holds: no whitespace, object keys sorted by UTF-16 code units. */
export const canonicalJson = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );

/**
 * Whether `key`'s kid is the first 16 hex digits of SHA-256 of its raw 32-byte Ed25519
 * public key, as the gateway makes it.
 * The SDK's own copy of kidNamesKey (libs/platform/src/secrets): it imports no gateway code.
 */
function kidNamesKey(kid: string, key: KeyObject): boolean {
  if (key.asymmetricKeyType !== 'ed25519') return false;
  return (
    createHash('sha256')
      .update(key.export({ format: 'der', type: 'spki' }).subarray(-32))
      .digest('hex')
      .slice(0, 16) === kid
  );
}

/**
 * Whether a statement (GET /v1/statements; the text received or its parsed JSON) carries
 * the gateway's Ed25519 signature, made by the key of its `signature.kid` among `keys`
 * (GET /v1/audit/keys, retired keys included), over the statement without `signature`
 * in canonical JSON; a key whose kid is not the digest of its public key never verifies.
 * Uses node:crypto only; nothing is fetched.
 */
export function verifyStatement(doc: string | object, keys: readonly AuditPublicKey[] | { readonly keys: readonly AuditPublicKey[] }): boolean {
  const { signature, ...signed } = (typeof doc === 'string' ? JSON.parse(doc) : doc) as { signature?: { kid?: string; alg?: string; value?: string } };
  const key = (Array.isArray(keys) ? (keys as readonly AuditPublicKey[]) : (keys as { readonly keys: readonly AuditPublicKey[] }).keys).find(
    (k) => k.kid === signature?.kid && k.alg === 'Ed25519',
  );
  if (!key || signature?.alg !== 'Ed25519' || typeof signature.value !== 'string') return false;
  const publicKey = createPublicKey(key.publicKey);
  // A listed key whose kid is not its own (a key put in another's place) never verifies.
  if (!kidNamesKey(key.kid, publicKey)) return false;
  return verify(null, Buffer.from(canonicalJson(signed), 'utf8'), publicKey, Buffer.from(signature.value, 'base64'));
}
