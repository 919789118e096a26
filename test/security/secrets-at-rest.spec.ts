/**
 * Secrets (issue 12, item 4), with real processes and real PostgreSQL:
 * - webhook secrets are stored sealed (AES-256-GCM): the column holds no plain
 *   secret; HMAC requests and webhook signatures work, before and after a key
 *   rotation (SECRETS_KEY, and the key file under DATA_DIR while the gateway runs);
 *   the table refuses a plain one; a process without the
 *   key refuses to start;
 * - the embedded PostgreSQL's password is generated per data directory (0600), and
 * - used HMAC signatures survive a crash of the database: a captured request is
 *   still refused after crash recovery.
 */
import { createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { Client as PgClient, Pool } from 'pg';
import { keyIdOf } from '#platform/secrets';
import { allMigrations } from '#payments/composition';
import { RunningGateway, RunningProcess, startGateway, startProcess, temporaryDataDir } from '../support/gateway-process';
import { expectStatus, Json, Operator, orderId, poll } from '../support/merchant-fixtures';
import { sendSigned } from '../support/signing';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../support/webhook-receiver';

const ADMIN_TOKEN = 'operator-token-for-secrets-tests-000042';

const key = () => randomBytes(32);

/** The command ended with exit code 0 (else its output is the failure's message). */
async function expectSuccess(proc: RunningProcess): Promise<void> {
  const code = await proc.exited;
  if (code !== 0) throw new Error(`exit code ${code}:\n${proc.output()}`);
}
const hex = (k: Buffer) => k.toString('hex');

/** What the projects table holds for one project's webhook secret. */
async function storedSecret(pool: Pool, projectId: string): Promise<string> {
  const r = await pool.query<{ webhook_secret: string }>('SELECT webhook_secret FROM projects WHERE id = $1', [projectId]);
  return r.rows[0]!.webhook_secret;
}

/** The stored value opened by hand (sealed:v1:<key id>:<iv>:<ciphertext+tag>, AES-256-GCM, project as associated data). */
function openByHand(stored: string, k: Buffer, projectId: string): string {
  const [, , , iv, sealed] = stored.split(':') as [string, string, string, string, string];
  const bytes = Buffer.from(sealed, 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', k, Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(`projects.webhook_secret:${projectId}`));
  decipher.setAuthTag(bytes.subarray(bytes.length - 16));
  return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString('utf8');
}

/**
 * Each signed request of this file has a timestamp of its own: the second the file was
 * loaded, less one per request before it (inside the ±300 s window for a file that runs
 * well under a minute). Two requests with one secret, path and timestamp would carry
 * one signature, and a signature is accepted once.
 */
const LOADED_AT_SECOND = Math.floor(Date.now() / 1000);
let signedRequests = 0;
const signedBalance = (baseUrl: string, publicId: string, secret: string) =>
  sendSigned(baseUrl, { method: 'GET', path: '/v1/balance', publicId, secret, timestamp: LOADED_AT_SECOND - signedRequests++ });

async function expectWebhookSignedWith(gateway: RunningGateway, operator: Operator, receiver: WebhookReceiver, project: Json, secret: string): Promise<void> {
  const created = await fetch(`${gateway.baseUrl}/v1/invoices`, {
    method: 'POST',
    headers: { authorization: `Bearer ${project.keys.test.secretKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amount: '100.00', method: 'sbp', orderId: orderId('sealed') }),
  });
  expect(created.status).toBe(201);
  const invoice = (await created.json()) as Json;
  expectStatus(await operator.payment(invoice.id, 'paid'), 200);
  await receiver.waitFor((all) => all.some((w) => w.body?.data?.invoice?.id === invoice.id), `the webhook of ${invoice.id}`);
  const webhook = receiver.received.find((w) => w.body?.data?.invoice?.id === invoice.id)!;
  expect(validSignature(webhook, secret)).toBe(true);
}

describe('webhook secrets sealed at rest with SECRETS_KEY, and its rotation', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let gateway: RunningGateway | null = null;
  const k1 = key();
  const k2 = key();
  // WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver listens on 127.0.0.1.
  const env = (secretsKey: string) => ({ DATABASE_URL: db.url, ADMIN_TOKEN, SECRETS_KEY: secretsKey, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await gateway?.kill();
    await receiver?.close();
    await db?.drop();
  });

  it('stores no plain secret; HMAC and webhook signatures work before and after a rotation; without the key a process refuses to start', async () => {
    gateway = await startGateway('gateway', env(hex(k1)));
    let operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    const account = await operator.createAccount();
    const project = await operator.createProject(account, { webhookUrl: receiver.url } as never);
    const secret = project.webhookSecret as string;
    expect(secret).toMatch(/^whsec_/);

    const stored = await storedSecret(db.pool, project.id);
    expect(stored).not.toContain(secret);
    expect(stored).not.toContain(secret.slice(6));
    expect(stored).toMatch(new RegExp(`^sealed:v1:${keyIdOf(k1)}:`));
    expect(openByHand(stored, k1, project.id)).toBe(secret);
    // Sealed for this project only: the same value under another project id does not open.
    expect(() => openByHand(stored, k1, account)).toThrow();
    // Nothing else in the table holds it either.
    const anywhere = await db.pool.query('SELECT count(*)::int AS n FROM projects p WHERE row_to_json(p)::text LIKE $1', [`%${secret.slice(6)}%`]);
    expect(anywhere.rows[0].n).toBe(0);

    expectStatus(await signedBalance(gateway.baseUrl, project.keys.test.publicKey, secret), 200);
    await expectWebhookSignedWith(gateway, operator, receiver, project, secret);
    await gateway.kill();
    gateway = null;

    // A process with another key refuses to start, naming the key the secrets need, before it migrates anything: a
    // new version's replica started without the key must not change a database the old version serves.
    const last = allMigrations[allMigrations.length - 1]!.id;
    // As if this process's version were newer: its last migration not yet applied (its record put back after).
    const [record] = (await db.pool.query('DELETE FROM migrations_applied WHERE id = $1 RETURNING *', [last])).rows;
    try {
      const stranger = startProcess('api', { ...env(hex(key())), PORT: '0' });
      expect(await stranger.exited).toBe(1);
      expect(stranger.output()).toContain(`sealed with key ${keyIdOf(k1)}`);
      expect((await db.pool.query('SELECT id FROM migrations_applied WHERE id = $1', [last])).rows).toEqual([]);
    } finally {
      await db.pool.query('INSERT INTO migrations_applied (id, checksum, applied_at) VALUES ($1, $2, $3)', [record.id, record.checksum, record.applied_at]);
    }

    // Rotation: every process runs with SECRETS_KEY=new,old; the command re-seals; then SECRETS_KEY=new.
    gateway = await startGateway('gateway', env(`${hex(k2)},${hex(k1)}`));
    const rotate = startProcess('secrets-rotate-key', env(`${hex(k2)},${hex(k1)}`));
    await expectSuccess(rotate);
    // Every project: this one and the sandbox project made on the empty database.
    const projects = (await db.pool.query('SELECT count(*)::int AS n FROM projects')).rows[0].n as number;
    expect(projects).toBe(2);
    expect(rotate.output()).toContain(`${projects} webhook secret(s) sealed again with key ${keyIdOf(k2)}`);
    const underOld = await db.pool.query('SELECT count(*)::int AS n FROM projects WHERE webhook_secret NOT LIKE $1', [`sealed:v1:${keyIdOf(k2)}:%`]);
    expect(underOld.rows[0].n).toBe(0);
    const rotated = await storedSecret(db.pool, project.id);
    expect(rotated).toMatch(new RegExp(`^sealed:v1:${keyIdOf(k2)}:`));
    expect(openByHand(rotated, k2, project.id)).toBe(secret);
    await gateway.kill();

    gateway = await startGateway('gateway', env(hex(k2)));
    operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    expectStatus(await signedBalance(gateway.baseUrl, project.keys.live.publicKey, secret), 200);
    await expectWebhookSignedWith(gateway, operator, receiver, project, secret);
    // The operator still reads the secret in clear.
    expect((await operator.http.get(`/admin/v1/projects/${project.id}`)).body.webhookSecret).toBe(secret);
  });
});

describe('the key file under DATA_DIR, rotated while the gateway runs', () => {
  let db: TestDatabase;
  let data: { dir: string; remove(): void };
  let receiver: WebhookReceiver;
  let gateway: RunningGateway | null = null;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    data = temporaryDataDir();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await gateway?.kill();
    await receiver?.close();
    await db?.drop();
    data?.remove();
  });

  it('is generated once with mode 0600; secrets:rotate-key re-seals everything with a new key and the running gateway follows', async () => {
    // WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver listens on 127.0.0.1.
    const env = { DATABASE_URL: db.url, DATA_DIR: data.dir, ADMIN_TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' };
    gateway = await startGateway('gateway', env);
    const operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    const file = path.join(data.dir, 'secrets.key');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const [first] = readFileSync(file, 'utf8').trim().split('\n');
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    const firstKey = Buffer.from(first!, 'hex');

    const account = await operator.createAccount();
    const project = await operator.createProject(account, { webhookUrl: receiver.url } as never);
    const secret = project.webhookSecret as string;
    expect(await storedSecret(db.pool, project.id)).toMatch(new RegExp(`^sealed:v1:${keyIdOf(firstKey)}:`));

    // A DATA_DIR without the key file (a restore that lost it): refused, naming the key, and no useless new key file left there.
    const lost = temporaryDataDir();
    try {
      const refused = startProcess('api', { ...env, DATA_DIR: lost.dir, PORT: '0' });
      expect(await refused.exited).toBe(1);
      expect(refused.output()).toContain(`sealed with key ${keyIdOf(firstKey)}`);
      expect(existsSync(path.join(lost.dir, 'secrets.key'))).toBe(false);
    } finally {
      lost.remove();
    }

    const rotate = startProcess('secrets-rotate-key', env);
    await expectSuccess(rotate);
    const keys = readFileSync(file, 'utf8').trim().split('\n');
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(first);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const newKey = Buffer.from(keys[0]!, 'hex');
    expect(rotate.output()).toContain(`new key ${keyIdOf(newKey)}`);
    expect(await storedSecret(db.pool, project.id)).toMatch(new RegExp(`^sealed:v1:${keyIdOf(newKey)}:`));

    // The running gateway (which read the file at start) opens the re-sealed secret and seals new ones with the new key.
    expectStatus(await signedBalance(gateway.baseUrl, project.keys.test.publicKey, secret), 200);
    await expectWebhookSignedWith(gateway, operator, receiver, project, secret);
    const later = await operator.createProject(account, { name: 'Второй' });
    expect(await storedSecret(db.pool, later.id)).toMatch(new RegExp(`^sealed:v1:${keyIdOf(newKey)}:`));
    expectStatus(await signedBalance(gateway.baseUrl, later.keys.live.publicKey, later.webhookSecret), 200);

    // A second rotation drops the oldest key, which nothing uses any more.
    const again = startProcess('secrets-rotate-key', env);
    await expectSuccess(again);
    const after = readFileSync(file, 'utf8').trim().split('\n');
    expect(after).toHaveLength(2);
    expect(after[1]).toBe(keys[0]);
    expect(after).not.toContain(first);
    expectStatus(await signedBalance(gateway.baseUrl, later.keys.test.publicKey, later.webhookSecret), 200);
  });
});

describe('the projects table', () => {
  it('refuses a webhook secret that is not sealed', async () => {
    const db = await createTestDatabase({ poolSize: 1 });
    try {
      const accountId = '00000000-0000-4000-8000-000000000001';
      await db.pool.query(`INSERT INTO accounts (id, name, email, created_at) VALUES ($1, 'Магазин', 'shop@example.com', now())`, [accountId]);
      await expect(
        db.pool.query(
          `INSERT INTO projects (id, account_id, name, status, webhook_url, webhook_events, usdt_enabled, hold_hours, methods, customer_fee_share, webhook_secret, id_namespace, created_at, updated_at)
           VALUES (gen_random_uuid(), $1, 'Магазин', 'active', NULL, '{}', false, 24, '{}', 100, 'whsec_plain-secret-0001', gen_random_uuid(), now(), now())`,
          [accountId],
        ),
      ).rejects.toThrow(/projects_webhook_secret_sealed/);
    } finally {
      await db.drop();
    }
  });
});

describe('the embedded PostgreSQL: its own password, and replay protection that survives a crash', () => {
  let data: { dir: string; remove(): void };
  let gateway: RunningGateway | null = null;

  beforeAll(() => {
    data = temporaryDataDir();
  });
  afterAll(async () => {
    await gateway?.kill();
    data?.remove();
  });

  /** The embedded server's postmaster pid and port, from its lock file. */
  const postmaster = () => {
    const lines = readFileSync(path.join(data.dir, 'postgres', 'postmaster.pid'), 'utf8').split('\n');
    return { pid: Number(lines[0]), port: Number(lines[3]) };
  };
  const canLogIn = async (port: number, password: string): Promise<boolean | string> => {
    const client = new PgClient({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
    try {
      await client.connect();
      return true;
    } catch (error) {
      return (error as { code?: string }).code === '28P01' ? false : String(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  it('generates a password per data directory (mode 0600) and refuses a replayed signature after a crash', async () => {
    const env = { DATA_DIR: data.dir, ADMIN_TOKEN };
    gateway = await startGateway('gateway', env);
    const passwordFile = path.join(data.dir, 'postgres-password');
    expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
    const password = readFileSync(passwordFile, 'utf8').trim();
    expect(password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    let { port } = postmaster();
    expect(await canLogIn(port, password)).toBe(true);
    expect(await canLogIn(port, 'postgres')).toBe(false);

    const operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    const project = await operator.createProject(await operator.createAccount());
    // A signed request, captured by someone on the way.
    const captured = {
      method: 'GET',
      path: '/v1/balance',
      publicId: project.keys.test.publicKey,
      secret: project.webhookSecret,
      timestamp: Math.floor(Date.now() / 1000),
    };
    expectStatus(await sendSigned(gateway.baseUrl, captured), 200);
    const replayed = await sendSigned(gateway.baseUrl, captured);
    expect({ status: replayed.status, code: replayed.body?.error?.code }).toEqual({ status: 401, code: 'signature_invalid' });

    // The crash: PostgreSQL's immediate shutdown (no checkpoint: crash recovery at the next start,
    // which empties UNLOGGED tables), and the gateway killed.
    const pid = postmaster().pid;
    process.kill(pid, 'SIGQUIT');
    await poll(
      async () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      (gone) => gone,
      'the postmaster to go',
      30_000,
    );
    await gateway.kill('SIGKILL');

    gateway = await startGateway('gateway', env);
    ({ port } = postmaster());
    expect(await canLogIn(port, password)).toBe(true);

    // The captured request, sent again within its 300 s window: still refused.
    const again = await sendSigned(gateway.baseUrl, captured);
    expect({ status: again.status, code: again.body?.error?.code }).toEqual({ status: 401, code: 'signature_invalid' });
  });
});
