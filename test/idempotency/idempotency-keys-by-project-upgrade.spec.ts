/**
 * Migrations payments:0050, 0055, 0052 and 0053 scope idempotency keys by project and mode
 * instead of key pair. On a database with rows written by the previous version (no
 * project): each row gets its pair's project (a revoked pair's too); two pairs of one
 * project that used one key keep the newest pair's row; a row of an unknown pair keeps a
 * null project. While they run, the previous version goes on claiming and reading keys
 * (no lock of the whole table held through the backfill), and cannot write a second row
 * of one key in a project; its sweep of old rows does not wait for the backfill (filled in
 * small committed batches, oldest first). After them, a retry under the project's current pair finds a
 * key of its revoked pair, and a row the previous version still writes gets its project.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { IdempotencyKeys, requestFingerprint } from '#payments/idempotency';
import { ManualClock } from '#platform/clock';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** The migrations to project scope. */
const BY_PROJECT = allMigrations.map((m) => m.id).filter((id) => /^payments:005\d_idempotency_keys/.test(id));
const HOLD_LOCK = 7_420_050;

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
  expect(BY_PROJECT).toContain('payments:0050_idempotency_keys_by_project');
  await migrate(
    db.pool,
    allMigrations.filter((m) => !BY_PROJECT.includes(m.id)),
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
  // Past the retention (the previous version's sweep deletes it), then more than one batch of the backfill, then the row it is held on.
  const hour = 3_600_000;
  const fill = (key: string, at: string) =>
    `INSERT INTO idempotency_keys (key_id, mode, idempotency_key, fingerprint, state, claim, lease_until, created_at)
     SELECT $1, 'live', ${key}, $2, 'started', gen_random_uuid(), now(), ${at} FROM generate_series(1, $3) AS i`;
  await db.pool.query(fill(`'expired'`, `now() - interval '48 hours'`), [c, fingerprint, 1]);
  await db.pool.query(fill(`'filler ' || i`, `now() - interval '2 hours' + i * interval '1 ms'`), [other.pairs[0], fingerprint, 1_000]);
  await db.pool.query(fill(`'held'`, `now() + interval '1 hour'`), [other.pairs[0], fingerprint, 1]);

  // The backfill is held on a row past its first batch (a trigger waits on a lock the test holds) while the previous version serves.
  const holder = new Client({ connectionString: db.url });
  const previous = new Client({ connectionString: db.url });
  await holder.connect();
  await previous.connect();
  let migrating: Promise<string[]> | null = null;
  try {
    await holder.query('SELECT pg_advisory_lock($1)', [HOLD_LOCK]);
    await db.pool.query(`CREATE FUNCTION hold_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${HOLD_LOCK}); RETURN COALESCE(NEW, OLD); END $$`);
    await db.pool.query(
      `CREATE TRIGGER hold_for_test BEFORE UPDATE ON idempotency_keys FOR EACH ROW WHEN (OLD.idempotency_key = 'held') EXECUTE FUNCTION hold_for_test()`,
    );
    migrating = migrate(db.pool, allMigrations);
    await poll(
      async () => (await db.pool.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1`, [HOLD_LOCK])).rowCount,
      (n) => n !== 0,
      'the backfill waiting on the test lock',
    );
    // The previous version's statements are not queued behind the migration: they would fail on the lock timeout.
    await previous.query(`SET lock_timeout = '3s'`);
    const read = await previous.query('SELECT state FROM idempotency_keys WHERE key_id = $1 AND mode = $2 AND idempotency_key = $3', [
      a,
      'test',
      'revoked only',
    ]);
    expect(read.rows).toEqual([{ state: 'completed' }]);
    // Its sweep (once a minute, on a keyed POST) deletes the expired row, already backfilled, without waiting on the backfill.
    const swept = await previous.query('DELETE FROM idempotency_keys WHERE created_at < $1', [new Date(Date.now() - 24 * hour)]);
    expect(swept.rowCount).toBe(1);
    await previous.query(
      `INSERT INTO idempotency_keys (key_id, mode, idempotency_key, fingerprint, state, claim, lease_until, created_at)
       VALUES ($1, 'test', 'claimed meanwhile', $2, 'started', $3, clock_timestamp() + interval '5 seconds', now())
       ON CONFLICT (key_id, mode, idempotency_key) DO NOTHING`,
      [c, fingerprint, randomUUID()],
    );
    // A key another pair of the project holds is refused to it, as the unique index will refuse it: no duplicate to build the index on.
    await expect(
      previous.query(
        `INSERT INTO idempotency_keys (key_id, mode, idempotency_key, fingerprint, state, claim, lease_until, created_at)
         VALUES ($1, 'test', 'revoked only', $2, 'started', $3, clock_timestamp() + interval '5 seconds', now())
         ON CONFLICT (key_id, mode, idempotency_key) DO NOTHING`,
        [c, fingerprint, randomUUID()],
      ),
    ).rejects.toMatchObject({ code: '23505' });
    await holder.query('SELECT pg_advisory_unlock($1)', [HOLD_LOCK]);
    expect(await migrating).toEqual(BY_PROJECT);
  } finally {
    await holder.query('SELECT pg_advisory_unlock_all()');
    await migrating?.catch(() => undefined);
    await db.pool.query('DROP TRIGGER IF EXISTS hold_for_test ON idempotency_keys');
    await holder.end();
    await previous.end();
  }
  const index = await db.pool.query(
    `SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE c.relname IN ('idempotency_keys_project_scope', 'api_keys_project') ORDER BY c.relname`,
  );
  // The trigger of 0050 reads api_keys by project: indexed.
  expect(index.rows).toEqual([
    { name: 'api_keys_project', valid: true },
    { name: 'idempotency_keys_project_scope', valid: true },
  ]);
  const filled = await db.pool.query(`SELECT count(*)::int AS n FROM idempotency_keys WHERE key_id = $1 AND mode = 'live' AND project_id = $2`, [
    other.pairs[0],
    other.id,
  ]);
  expect(filled.rows).toEqual([{ n: 1_001 }]);
  await db.pool.query(`DELETE FROM idempotency_keys WHERE idempotency_key = 'claimed meanwhile' OR (key_id = $1 AND mode = 'live')`, [other.pairs[0]]);
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

it('the backfill goes on past a batch whose rows the previous version swept meanwhile, until no row is left without its project', async () => {
  const earlier = db;
  db = await createTestDatabase({ migrate: false });
  const sweeper = new Client({ connectionString: db.url });
  try {
    await migrate(
      db.pool,
      allMigrations.filter((m) => !BY_PROJECT.includes(m.id)),
    );
    const shop = await project('live', [new Date(Date.UTC(2026, 0, 1))]);
    // 1,000 rows past the 24 hours (the first batch's, oldest first) and 5 younger ones, as the previous version wrote them.
    await db.pool.query(
      `INSERT INTO idempotency_keys (key_id, mode, idempotency_key, fingerprint, state, claim, lease_until, status, body, created_at, completed_at)
       SELECT $1, 'live', 'key-' || n, $2, 'completed', gen_random_uuid(), now(), 202, '{}', now() - interval '2 days' + n * interval '1 ms', now()
       FROM generate_series(1, 1005) AS n`,
      [shop.pairs[0], fingerprint],
    );
    await db.pool.query(`UPDATE idempotency_keys SET created_at = now() WHERE idempotency_key IN ('key-1001', 'key-1002', 'key-1003', 'key-1004', 'key-1005')`);
    const backfillAndScope = BY_PROJECT.filter((id) => /_project_(backfill|scope)$/.test(id));
    expect(backfillAndScope).toHaveLength(2);
    await migrate(
      db.pool,
      allMigrations.filter((m) => !backfillAndScope.includes(m.id)),
    );

    // The previous version's sweep deletes the expired rows; its transaction is open while the first batch reaches them.
    await sweeper.connect();
    await sweeper.query('BEGIN');
    expect((await sweeper.query(`DELETE FROM idempotency_keys WHERE created_at < now() - interval '1 day'`)).rowCount).toBe(1000);
    const migrating = migrate(db.pool, allMigrations);
    await poll(
      async () =>
        (
          await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE idempotency_keys%' AND pid <> pg_backend_pid()`,
          )
        ).rows,
      (rows) => rows.length > 0,
      'the first batch waiting on the rows the sweep deletes',
    );
    await sweeper.query('COMMIT');
    expect(await migrating).toEqual(backfillAndScope);

    const left = await db.pool.query<{ project_id: string | null; n: number }>(
      'SELECT project_id::text, count(*)::int AS n FROM idempotency_keys GROUP BY project_id',
    );
    expect(left.rows).toEqual([{ project_id: shop.id, n: 5 }]);
  } finally {
    await sweeper.end().catch(() => undefined);
    await db.drop();
    db = earlier;
  }
});
