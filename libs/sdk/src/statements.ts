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

/** What the statement must be of: the signature alone does not say it is the one asked for. */
export interface ExpectedStatement {
  readonly accountId?: string | undefined;
  readonly mode?: 'live' | 'test' | undefined;
  /** The period (from, to]: compared as instants. */
  readonly from?: string | Date | undefined;
  readonly to?: string | Date | undefined;
}

/**
 * Whether a statement (GET /v1/statements; the text received or its parsed JSON) carries
 * the gateway's Ed25519 signature, made by the key of its `signature.kid` among `keys`
 * (GET /v1/audit/keys, retired keys included), over the statement without `signature`
 * in canonical JSON; a key whose kid is not the digest of its public key never verifies.
 * With `expected`, also that it is a statement of that account, mode and period: a signed
 * test-mode statement, or another period's, is as well signed as the one asked for.
 * Uses node:crypto only; nothing is fetched.
 */
export function verifyStatement(
  doc: string | object,
  keys: readonly AuditPublicKey[] | { readonly keys: readonly AuditPublicKey[] },
  expected?: ExpectedStatement,
): boolean {
  // Given with nothing in it (each field from an unset variable), it would check the signature alone, silently.
  if (expected !== undefined && Object.values(expected).every((v) => v === undefined))
    throw new TypeError('verifyStatement: expected has no accountId, mode, from or to (unset variables?); leave it out to check the signature alone');
  const { signature, ...signed } = (typeof doc === 'string' ? JSON.parse(doc) : doc) as {
    signature?: { kid?: string; alg?: string; value?: string };
    object?: unknown;
    accountId?: unknown;
    mode?: unknown;
    from?: unknown;
    to?: unknown;
  };
  if (expected !== undefined && !isOf(signed, expected)) return false;
  const key = (Array.isArray(keys) ? (keys as readonly AuditPublicKey[]) : (keys as { readonly keys: readonly AuditPublicKey[] }).keys).find(
    (k) => k.kid === signature?.kid && k.alg === 'Ed25519',
  );
  if (!key || signature?.alg !== 'Ed25519' || typeof signature.value !== 'string') return false;
  const publicKey = createPublicKey(key.publicKey);
  // A listed key whose kid is not its own (a key put in another's place) never verifies.
  if (!kidNamesKey(key.kid, publicKey)) return false;
  return verify(null, Buffer.from(canonicalJson(signed), 'utf8'), publicKey, Buffer.from(signature.value, 'base64'));
}

/** Both the same instant (NaN, a text that is none, equals nothing). */
const sameInstant = (given: unknown, wanted: string | Date): boolean => typeof given === 'string' && Date.parse(given) === new Date(wanted).getTime();

/** Whether the statement's own fields are the ones expected (each one given). */
function isOf(doc: { object?: unknown; accountId?: unknown; mode?: unknown; from?: unknown; to?: unknown }, expected: ExpectedStatement): boolean {
  if (doc.object !== 'statement') return false;
  if (expected.accountId !== undefined && doc.accountId !== expected.accountId) return false;
  if (expected.mode !== undefined && doc.mode !== expected.mode) return false;
  if (expected.from !== undefined && !sameInstant(doc.from, expected.from)) return false;
  if (expected.to !== undefined && !sameInstant(doc.to, expected.to)) return false;
  return true;
}
