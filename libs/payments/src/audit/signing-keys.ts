import { createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import type { Migration } from '#platform/database';
import type { Clock } from '#platform/clock';
import { kidOf, SecretBox, writeSecretFile, writeSecretFileOnce } from '#platform/secrets';

/**
 * The gateway's Ed25519 keys that sign the log's checkpoints and the merchants'
 * statements (docs/audit-log.md). The public halves are listed in audit_signing_keys
 * (GET /v1/audit/keys; log:verify reads them with a read-only role), one current
 * (valid_until NULL), the retired ones with the end of their validity. The private key
 * of the current one is AUDIT_SIGNING_KEY when set; else, on the embedded database,
 * DATA_DIR/audit-signing.key (mode 0600, generated once); else (DATABASE_URL) its row,
 * sealed with the secrets key (the webhook secrets' SecretBox). A retired key's
 * private half is dropped (its sealed column, or the file once it holds a retired key),
 * and a retired key never becomes current again (RetiredSigningKeyError).
 */
export const auditSigningKeysMigration: Migration = {
  id: 'payments:0014_audit_signing_keys',
  sql: `
CREATE TABLE audit_signing_keys (
  kid text PRIMARY KEY,
  public_key text NOT NULL,
  valid_from timestamptz NOT NULL,
  valid_until timestamptz,
  sealed_private_key text CHECK (sealed_private_key LIKE 'sealed:v1:%')
);
CREATE UNIQUE INDEX audit_signing_keys_one_current ON audit_signing_keys ((true)) WHERE valid_until IS NULL;
`,
};

export const SIGNING_KEY_FILE = 'audit-signing.key';

/** A published key, as GET /v1/audit/keys lists it. */
export interface PublishedKey {
  readonly kid: string;
  readonly alg: 'Ed25519';
  readonly publicKey: string;
  readonly validFrom: string;
  readonly validUntil: string | null;
}

/** A signature as the proofs carry it. */
export interface Ed25519Signature {
  readonly kid: string;
  readonly alg: 'Ed25519';
  readonly value: string;
}

/**
 * Canonical JSON as RFC 8785 (JCS) gives it for the values a signed document holds
 * (strings, integers, booleans, null, arrays, objects without integer-like keys): no
 * whitespace, object keys sorted by their UTF-16 code units, strings and numbers as
 * JSON.stringify writes them.
 */
export const canonicalJcs = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );

/** AUDIT_SIGNING_KEY's text (a PKCS#8 PEM, or its DER in base64) as an Ed25519 private key; null when it is none. */
export function parseSigningKey(text: string): KeyObject | null {
  try {
    const key = text.includes('-----BEGIN')
      ? createPrivateKey(text.replace(/\\n/g, '\n'))
      : createPrivateKey({ key: Buffer.from(text, 'base64'), format: 'der', type: 'pkcs8' });
    return key.asymmetricKeyType === 'ed25519' ? key : null;
  } catch {
    return null;
  }
}

const newPrivateKeyPem = (): string => generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
const publicPem = (key: KeyObject): string => createPublicKey(key).export({ format: 'pem', type: 'spki' }).toString();

type KeyRow = { kid: string; public_key: string; valid_from: Date; valid_until: Date | null };
const published = (r: KeyRow): PublishedKey => ({
  kid: r.kid,
  alg: 'Ed25519',
  publicKey: r.public_key,
  validFrom: r.valid_from.toISOString(),
  validUntil: r.valid_until?.toISOString() ?? null,
});

/** Every published key, oldest first (reads only). */
export async function publishedKeys(pool: Pick<Pool, 'query'>): Promise<PublishedKey[]> {
  return (await pool.query<KeyRow>('SELECT kid, public_key, valid_from, valid_until FROM audit_signing_keys ORDER BY valid_from, kid')).rows.map(published);
}

/** The key this process was given (AUDIT_SIGNING_KEY or DATA_DIR/audit-signing.key) was retired: it never signs again. */
export class RetiredSigningKeyError extends Error {
  constructor(
    readonly kid: string,
    validUntil: Date,
    source: string,
    currentKid: string | null,
  ) {
    const remedy =
      source === 'AUDIT_SIGNING_KEY'
        ? 'Set a new key there (openssl genpkey -algorithm ed25519), or the current one'
        : 'Run npm run audit:rotate-signing-key to put a new key in it, or set AUDIT_SIGNING_KEY';
    super(
      `${source} holds signing key ${kid}, retired at ${validUntil.toISOString()}: a retired key never signs again. ${remedy}.` +
        (currentKid === null ? '' : ` The current key is ${currentKid}.`),
    );
    this.name = 'RetiredSigningKeyError';
  }
}

export interface SigningKeySettings {
  readonly config: { readonly auditSigningKey: KeyObject | null; readonly databaseUrl: string | null; readonly dataDir: string };
  /** Needed only where the key is sealed in the database (DATABASE_URL without AUDIT_SIGNING_KEY). */
  readonly secrets?: SecretBox;
}

/** Signs with the current key, publishing it first when it is new (a key set or rotated by configuration retires the one before). */
export class AuditSigningKeys {
  private readonly listed = new Set<string>();

  constructor(
    private readonly pool: Pool,
    private readonly settings: SigningKeySettings,
    private readonly clock: Clock,
  ) {}

  get where(): 'AUDIT_SIGNING_KEY' | 'file' | 'database' {
    const { config } = this.settings;
    return config.auditSigningKey ? 'AUDIT_SIGNING_KEY' : config.databaseUrl === null ? 'file' : 'database';
  }

  get file(): string {
    return path.join(path.resolve(this.settings.config.dataDir), SIGNING_KEY_FILE);
  }

  async sign(data: string): Promise<Ed25519Signature> {
    return this.signBytes(Buffer.from(data, 'utf8'));
  }

  /** The signature of `data`, computed off the event loop (libuv's pool): a long document does not stall other requests. */
  async signBytes(data: Uint8Array): Promise<Ed25519Signature> {
    const { kid, key } = await this.current();
    const value = await new Promise<Buffer>((resolve, reject) => sign(null, data, key, (error, signature) => (error ? reject(error) : resolve(signature))));
    return { kid, alg: 'Ed25519', value: value.toString('base64') };
  }

  /** The current key, published. */
  async current(): Promise<{ kid: string; key: KeyObject }> {
    if (this.where === 'database') return this.sealedCurrent();
    const key = this.settings.config.auditSigningKey ?? this.fileKey();
    const kid = kidOf(createPublicKey(key));
    if (!this.listed.has(kid)) {
      const before = await this.publish(kid, publicPem(key), null);
      this.listed.add(kid);
      // AUDIT_SIGNING_KEY retired the key of the file (the embedded default's): its private half goes with it.
      if (before !== null && before !== kid && this.fileKid() === before) rmSync(this.file, { force: true });
    }
    return { kid, key };
  }

  /**
   * Refuses (RetiredSigningKeyError) when the key this process would sign with,
   * AUDIT_SIGNING_KEY or the file's, is a retired one: at start, before a request asks
   * for a signature. Makes and publishes nothing. A sealed key is the current row's.
   */
  async refuseRetired(): Promise<void> {
    if (this.where === 'database') return;
    const key = this.settings.config.auditSigningKey;
    const kid = key ? kidOf(createPublicKey(key)) : this.fileKid();
    if (kid !== null) await refuseIfRetired(this.pool, kid, this.source);
  }

  /**
   * A new key becomes current, the current one retired (valid until now). Not with
   * AUDIT_SIGNING_KEY: a new key is set there, and the gateway publishes it at its
   * first signature.
   */
  async rotate(first = false): Promise<{ retired: string | null; current: string }> {
    if (this.where === 'AUDIT_SIGNING_KEY') throw new Error('AUDIT_SIGNING_KEY is set: put a new key there on every process instead');
    const pem = newPrivateKeyPem();
    const key = createPrivateKey(pem);
    const kid = kidOf(createPublicKey(key));
    if (this.where === 'file') writeSecretFile(this.file, pem);
    const sealed = this.where === 'database' ? this.box.seal(pem, `audit-signing-key:${kid}`) : null;
    return { retired: await this.publish(kid, publicPem(key), sealed, first), current: kid };
  }

  /** Seals the current key's private half again with the secrets key's current key (secrets:rotate-key); how many. */
  async reseal(): Promise<number> {
    const row = await currentRow(this.pool);
    if (!row?.sealed) return 0;
    const owner = `audit-signing-key:${row.kid}`;
    const sealed = this.box.seal(this.box.open(row.sealed, owner), owner);
    await this.pool.query('UPDATE audit_signing_keys SET sealed_private_key = $2 WHERE kid = $1', [row.kid, sealed]);
    return 1;
  }

  private get box(): SecretBox {
    if (!this.settings.secrets) throw new Error('the audit signing key is sealed in the database: this process needs the secrets key');
    return this.settings.secrets;
  }

  private get source(): string {
    return this.where === 'file' ? this.file : this.where;
  }

  /** The kid of the key in the file, null without one. */
  private fileKid(): string | null {
    try {
      return existsSync(this.file) ? kidOf(createPublicKey(readFileSync(this.file, 'utf8'))) : null;
    } catch {
      return null; // not a key: fileKey() says so when it is used
    }
  }

  private fileKey(): KeyObject {
    mkdirSync(path.dirname(this.file), { recursive: true });
    writeSecretFileOnce(this.file, newPrivateKeyPem());
    return createPrivateKey(readFileSync(this.file, 'utf8'));
  }

  private async sealedCurrent(): Promise<{ kid: string; key: KeyObject }> {
    let row = await currentRow(this.pool);
    // None yet (or one published while AUDIT_SIGNING_KEY was set): a key of its own, sealed.
    if (!row?.sealed) {
      await this.rotate(true);
      row = (await currentRow(this.pool))!;
    }
    return { kid: row.kid, key: createPrivateKey(this.box.open(row.sealed!, `audit-signing-key:${row.kid}`)) };
  }

  /**
   * Makes `kid` the current key (its row added), retiring the one before (answered), in
   * one transaction; `first`: only when no sealed key is current (two processes making
   * the first one agree). A retired key is refused: it never becomes current again, and
   * validity periods follow each other without overlapping.
   */
  private publish(kid: string, publicKey: string, sealed: string | null, first = false): Promise<string | null> {
    return inTransaction(this.pool, async (client) => {
      await client.query('LOCK TABLE audit_signing_keys IN SHARE ROW EXCLUSIVE MODE');
      await refuseIfRetired(client, kid, this.source);
      const current = await currentRow(client);
      if (current?.kid !== kid && !(first && current?.sealed)) {
        // Not before the retired key's own start, should this process's clock be behind.
        const retired = await client.query<{ until: Date }>(
          `UPDATE audit_signing_keys SET valid_until = greatest($1::timestamptz, valid_from), sealed_private_key = NULL
           WHERE valid_until IS NULL RETURNING valid_until AS until`,
          [this.clock.now()],
        );
        await client.query('INSERT INTO audit_signing_keys (kid, public_key, valid_from, sealed_private_key) VALUES ($1, $2, $3, $4)', [
          kid,
          publicKey,
          retired.rows[0]?.until ?? this.clock.now(),
          sealed,
        ]);
      }
      return current?.kid ?? null;
    });
  }
}

/** Throws RetiredSigningKeyError when `kid` is a retired key's. */
async function refuseIfRetired(db: Pick<Pool, 'query'>, kid: string, source: string): Promise<void> {
  const rows = (
    await db.query<{ kid: string; valid_until: Date | null }>('SELECT kid, valid_until FROM audit_signing_keys WHERE kid = $1 OR valid_until IS NULL', [kid])
  ).rows;
  const retired = rows.find((r) => r.kid === kid && r.valid_until !== null);
  if (retired) throw new RetiredSigningKeyError(kid, retired.valid_until!, source, rows.find((r) => r.valid_until === null)?.kid ?? null);
}

/** The current key's row (none before the first signature). */
const currentRow = async (db: Pick<Pool, 'query'>) =>
  (await db.query<{ kid: string; sealed: string | null }>('SELECT kid, sealed_private_key AS sealed FROM audit_signing_keys WHERE valid_until IS NULL'))
    .rows[0];
