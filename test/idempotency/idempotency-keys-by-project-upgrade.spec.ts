/**
 * Migration payments:0050 scopes idempotency keys by project and mode instead of key
 * pair. On a database with rows written by the previous version (no project): each row
 * gets its pair's project (a revoked pair's too); two pairs of one project that used one
 * key keep the newest pair's row; a row of an unknown pair keeps a null project. After
 * it, a retry under the project's current pair finds a key of its revoked pair, and a
 * row the previous version still writes during the rolling upgrade gets its project.
 */
import { randomUUID } from 'node:crypto';
import { migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { IdempotencyKeys, requestFingerprint } from '#payments/idempotency';
import { ManualClock } from '#platform/clock';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const BY_PROJECT = 'payments:0050_idempotency_keys_by_project';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await db?.drop();
});

/** A project with key pairs issued at `issued` (the last one active), as the registry writes them. */
async function project(mode: 'test' | 'live', issued: readonly Date[]): Promise<{ id: string; pairs: string[] }> {
  const account = randomUUID();
  const id = randomUUID();
  await db.pool.query(`INSERT INTO accounts (id, name, email, created_at) VALUES ($1, 'Магазин', 'shop@example.com', $2)`, [account, issued[0]]);
  await db.pool.query(
    `INSERT INTO projects (id, account_id, name, status, webhook_url, webhook_events, usdt_enabled, hold_hours, methods, customer_fee_share,
                           webhook_secret, id_namespace, created_at, updated_at)
     VALUES ($1, $2, 'Магазин', 'active', NULL, '{}', false, 0, '{}', 0, 'sealed:v1:test', $3, $4, $4)`,
    [id, account, randomUUID(), issued[0]],
  );
  const pairs: string[] = [];
  for (const [i, at] of issued.entries()) {
    const pair = randomUUID();
    await db.pool.query(
      `INSERT INTO api_keys (id, project_id, mode, secret_key_hash, public_key, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [pair, id, mode, randomUUID(), `pk_${mode}_${randomUUID()}`, at, i + 1 < issued.length ? issued[i + 1] : null],
    );
    pairs.push(pair);
  }
  return { id, pairs };
}

const fingerprint = requestFingerprint('POST', '/v1/invoices/x/refund', '{"amount":"100.00"}');

/** A row as the previous version writes it: its CLAIM statement, then its COMPLETE unless `body` is null (then its holder died: the lease is over). */
async function oldRow(pair: string, mode: string, key: string, body: string | null): Promise<void> {
  await db.pool.query(
    `INSERT INTO idempotency_keys (key_id, mode, idempotency_key, fingerprint, state, claim, lease_until, created_at)
     VALUES ($1, $2, $3, $4, 'started', $5, clock_timestamp() + make_interval(secs => $6), now())
     ON CONFLICT (key_id, mode, idempotency_key) DO NOTHING`,
    [pair, mode, key, fingerprint, randomUUID(), body === null ? -1 : 5],
  );
  if (body === null) return;
  await db.pool.query(
    `UPDATE idempotency_keys SET state = 'completed', status = 202, body = $4, completed_at = now()
     WHERE key_id = $1 AND mode = $2 AND idempotency_key = $3 AND state = 'started'`,
    [pair, mode, key, body],
  );
}

it('backfills the project of each row, keeps the newest pair of a collision, and scopes the keys by project from then on', async () => {
  expect(allMigrations.map((m) => m.id)).toContain(BY_PROJECT);
  await migrate(
    db.pool,
    allMigrations.filter((m) => m.id !== BY_PROJECT),
  );

  const day = (n: number) => new Date(Date.UTC(2026, 0, n));
  // Rotated twice: pairs A (revoked), B (revoked), C (active).
  const shop = await project('test', [day(1), day(2), day(3)]);
  const [a, b, c] = shop.pairs as [string, string, string];
  const other = await project('test', [day(1)]);
  const unknownPair = randomUUID();
  await oldRow(a, 'test', 'both', '{"by":"A"}');
  await oldRow(b, 'test', 'both', '{"by":"B"}');
  await oldRow(a, 'test', 'revoked only', '{"by":"A"}');
  await oldRow(a, 'live', 'both', '{"by":"A live"}');
  await oldRow(other.pairs[0]!, 'test', 'both', '{"by":"other"}');
  await oldRow(unknownPair, 'test', 'both', '{"by":"nobody"}');
  await oldRow(b, 'test', 'running', null);

  expect(await migrate(db.pool, allMigrations)).toEqual([BY_PROJECT]);
  const rows = await db.pool.query<{ key_id: string; project_id: string | null; mode: string; idempotency_key: string; body: string | null }>(
    'SELECT key_id::text, project_id::text, mode, idempotency_key, body FROM idempotency_keys ORDER BY idempotency_key, mode, body',
  );
  expect(rows.rows).toEqual(
    expect.arrayContaining([
      { key_id: b, project_id: shop.id, mode: 'test', idempotency_key: 'both', body: '{"by":"B"}' },
      { key_id: a, project_id: shop.id, mode: 'live', idempotency_key: 'both', body: '{"by":"A live"}' },
      { key_id: other.pairs[0], project_id: other.id, mode: 'test', idempotency_key: 'both', body: '{"by":"other"}' },
      { key_id: unknownPair, project_id: null, mode: 'test', idempotency_key: 'both', body: '{"by":"nobody"}' },
      { key_id: a, project_id: shop.id, mode: 'test', idempotency_key: 'revoked only', body: '{"by":"A"}' },
      { key_id: b, project_id: shop.id, mode: 'test', idempotency_key: 'running', body: null },
    ]),
  );
  expect(rows.rows).toHaveLength(6);

  // The new version: a retry under the active pair C finds the keys its project's revoked pairs used.
  const keys = new IdempotencyKeys(db.pool, new ManualClock(), { leaseSeconds: 1, waitMs: 3_000 });
  try {
    const retry = { keyId: c, projectId: shop.id, mode: 'test' as const, fingerprint };
    expect(await keys.admit({ ...retry, key: 'both' })).toEqual({ kind: 'replay', status: 202, body: '{"by":"B"}' });
    expect(await keys.admit({ ...retry, key: 'revoked only' })).toEqual({ kind: 'replay', status: 202, body: '{"by":"A"}' });
    // Its holder's lease ran out: taken over, and named by the pair that claimed it first.
    const takeover = await keys.admit({ ...retry, key: 'running' });
    expect(takeover).toMatchObject({ kind: 'run', takenOver: true, keyId: b });
    if (takeover.kind === 'run') keys.stopRenewing(takeover.claim);
  } finally {
    keys.close();
  }

  // The previous version still running beside it writes rows that get their project.
  await oldRow(c, 'test', 'from the old version', '{"by":"C"}');
  const written = await db.pool.query('SELECT project_id::text FROM idempotency_keys WHERE key_id = $1 AND idempotency_key = $2', [c, 'from the old version']);
  expect(written.rows).toEqual([{ project_id: shop.id }]);
});
