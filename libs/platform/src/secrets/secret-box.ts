import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Secrets at rest (webhook secrets): AES-256-GCM with a random 96-bit IV per value
 * and the value's owner as associated data (a sealed secret copied to another row
 * does not open there). A sealed value names the key it was sealed with:
 *
 *   sealed:v1:<key id>:<iv, base64url>:<ciphertext and 128-bit tag, base64url>
 *
 * so a rotation can find what is still under an old key, and a process missing the
 * key says which one. The key id is the first 8 hex digits of SHA-256 over a label and
 * the key: it names a key without revealing it.
 */
export const SEALED_PREFIX = 'sealed:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export const keyIdOf = (key: Buffer): string => createHash('sha256').update('gateway-secrets-key-id:').update(key).digest('hex').slice(0, 8);

/** The key id a sealed value names; null when the text is not sealed. */
export function sealedKeyId(text: string): string | null {
  if (!text.startsWith(SEALED_PREFIX)) return null;
  const id = text.slice(SEALED_PREFIX.length).split(':')[0];
  return id && /^[0-9a-f]{8}$/.test(id) ? id : null;
}

export class SecretKeyMissingError extends Error {
  constructor(readonly keyId: string) {
    super(`a secret is sealed with key ${keyId}, which this process does not hold (SECRETS_KEY, or DATA_DIR/secrets.key)`);
    this.name = 'SecretKeyMissingError';
  }
}

/** Where the keys come from: the first seals, every one opens. `refresh` re-reads a key file (null when it cannot change). */
export interface SecretKeySource {
  keys(): readonly Buffer[];
  refresh?(): void;
}

export const fixedKeys = (keys: readonly Buffer[]): SecretKeySource => ({ keys: () => keys });

export class SecretBox {
  constructor(private readonly source: SecretKeySource) {
    if (source.keys().length === 0) throw new Error('SecretBox needs at least one key');
  }

  /** The id of the key that seals now (a key file is read again if it changed). */
  get currentKeyId(): string {
    this.source.refresh?.();
    return keyIdOf(this.current());
  }

  /** Every key id this box can open (a key file is read again if it changed). */
  keyIds(): string[] {
    this.source.refresh?.();
    return this.source.keys().map(keyIdOf);
  }

  /** Seals `plain` for `owner` (the associated data) with the current key. */
  seal(plain: string, owner: string): string {
    this.source.refresh?.();
    const key = this.current();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(owner, 'utf8'));
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${SEALED_PREFIX}${keyIdOf(key)}:${iv.toString('base64url')}:${sealed.toString('base64url')}`;
  }

  /** Opens a sealed value of `owner`; throws when its key is missing or the value was altered. */
  open(text: string, owner: string): string {
    const parts = text.slice(SEALED_PREFIX.length).split(':');
    if (!text.startsWith(SEALED_PREFIX) || parts.length !== 3) throw new Error('not a sealed secret');
    const [keyId, ivText, sealedText] = parts as [string, string, string];
    const key = this.keyById(keyId);
    const iv = Buffer.from(ivText, 'base64url');
    const sealed = Buffer.from(sealedText, 'base64url');
    if (iv.length !== IV_BYTES || sealed.length < TAG_BYTES) throw new Error('not a sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(Buffer.from(owner, 'utf8'));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  }

  /**
   * A key for another purpose (`label`), derived from each key with HKDF-SHA256, the
   * current one first: e.g. the payment page's form tokens, which every process of
   * one gateway must agree on.
   */
  derivedKeys(label: string): Buffer[] {
    this.source.refresh?.();
    return this.source.keys().map((key) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `gateway:${label}`, 32)));
  }

  private current(): Buffer {
    return this.source.keys()[0]!;
  }

  private keyById(keyId: string): Buffer {
    const find = () => this.source.keys().find((k) => keyIdOf(k) === keyId);
    let key = find();
    if (!key && this.source.refresh) {
      // Another process may have rotated the key file.
      this.source.refresh();
      key = find();
    }
    if (!key) throw new SecretKeyMissingError(keyId);
    return key;
  }
}
