import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Pool } from 'pg';
import type { Mode } from '#domain';
import type { Migration } from '#platform/database';

/** Bytes of a key's token that are its tag. */
const TAG_BYTES = 6;
/** Random bytes before the tag: 144 bits in a secret key, 96 in a public id (which is not a secret). */
const SECRET_RANDOM_BYTES = 18;
const PUBLIC_RANDOM_BYTES = 12;

const SECRET_KEY = /^(sk_(?:test|live)_)([A-Za-z0-9_-]{32})$/;
const PUBLIC_ID = /^(pk_(?:test|live)_)([A-Za-z0-9_-]{24})$/;

/**
 * Keys that carry their own proof of issue. The last 6 bytes of a key's token are a
 * tag: HMAC-SHA256, under the gateway's key-tag key, of the key's prefix and the
 * token's other bytes. A string without its tag was never issued by this gateway, so
 * it is refused without looking anything up: a negative check that cannot be wrong
 * (a forgery passes with odds of 2^-48). A key that carries its tag is still looked
 * up: only the database says whether it is live.
 *
 * The tag key is 32 random bytes kept in the database (`key_tag_key`), made by the
 * first process that needs it, the same for every process of one database.
 */
export class KeyTags {
  constructor(private readonly key: Buffer) {}

  /** Loads the database's tag key, making it first when there is none. */
  static async load(pool: Pool): Promise<KeyTags> {
    await pool.query('INSERT INTO key_tag_key (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING', [randomBytes(32)]);
    const r = await pool.query<{ key: Buffer }>('SELECT key FROM key_tag_key WHERE id = 1');
    return new KeyTags(r.rows[0]!.key);
  }

  /** A new key pair's two keys for the mode, each with its tag. */
  newSecretKey(mode: Mode): string {
    return this.issue(`sk_${mode}_`, SECRET_RANDOM_BYTES);
  }

  newPublicId(mode: Mode): string {
    return this.issue(`pk_${mode}_`, PUBLIC_RANDOM_BYTES);
  }

  /** Whether the string is a secret key (sk_test_…, sk_live_…) as this gateway issues them, tag included. */
  isSecretKey(text: string): boolean {
    return this.carriesTag(SECRET_KEY.exec(text));
  }

  /** Whether the string is a public id (pk_test_…, pk_live_…) as this gateway issues them, tag included. */
  isPublicId(text: string): boolean {
    return this.carriesTag(PUBLIC_ID.exec(text));
  }

  private issue(prefix: string, randomLength: number): string {
    const random = randomBytes(randomLength);
    return `${prefix}${Buffer.concat([random, this.tag(prefix, random)]).toString('base64url')}`;
  }

  private tag(prefix: string, random: Buffer): Buffer {
    return createHmac('sha256', this.key).update(prefix).update(random).digest().subarray(0, TAG_BYTES);
  }

  private carriesTag(match: RegExpExecArray | null): boolean {
    if (!match) return false;
    const token = Buffer.from(match[2]!, 'base64url');
    // base64url decoding is lenient: only the canonical spelling of the bytes is a key.
    if (token.toString('base64url') !== match[2]) return false;
    const random = token.subarray(0, token.length - TAG_BYTES);
    return timingSafeEqual(token.subarray(token.length - TAG_BYTES), this.tag(match[1]!, random));
  }
}

/** The key-tag key: one row, written once by the first process that needs it (KeyTags.load). */
export const keyTagKeyMigration: Migration = {
  id: 'payments:0004_key_tag_key',
  sql: `
CREATE TABLE key_tag_key (
  id smallint PRIMARY KEY CHECK (id = 1),
  key bytea NOT NULL CHECK (length(key) = 32)
);
`,
};
