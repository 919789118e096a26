import { createHash, createPublicKey, KeyObject } from 'node:crypto';

/** A signing key's id: the first 16 hex digits of SHA-256 over its raw 32-byte (Ed25519) public key. */
export const kidOf = (publicKey: KeyObject): string =>
  createHash('sha256')
    .update(publicKey.export({ format: 'der', type: 'spki' }).subarray(-32))
    .digest('hex')
    .slice(0, 16);

/**
 * Whether a listed key's kid is the one its public key (PEM) gives: an Ed25519 key
 * whose kidOf is the kid. A row whose public key was replaced keeping the kid is not
 * that key: nothing verifies under it, and it is not published. The SDK keeps its own
 * copy (verifyStatement): it uses no gateway code.
 */
export function kidNamesKey(key: { readonly kid: string; readonly publicKey: string }): boolean {
  try {
    const publicKey = createPublicKey(key.publicKey);
    return publicKey.asymmetricKeyType === 'ed25519' && kidOf(publicKey) === key.kid;
  } catch {
    return false;
  }
}
