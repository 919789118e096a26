import { Client } from 'pg';
import { checkMigrated, createPool, EMBEDDED_DATABASE_NAME, migrate, MigrationError } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { rmSync } from 'node:fs';
import { startGateway, startProcess, temporaryDataDir } from '../support/gateway-process';
import { startPrivatePostgres } from '../support/private-postgres';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/** Two migrations of the history before the squash (decision 0009), standing in for a pre-release database. */
const PRE_RELEASE = [
  { id: 'event-store:0001_event_store', sql: 'CREATE TABLE events_of_a_pre_release (x int)' },
  { id: 'payments:0056_read_model_resets_counted', sql: 'SELECT 1' },
];

describe('schema migrations', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
  });
  afterAll(async () => {
    await db.drop();
  });

  it('apply once even when five processes start at the same moment, and again is a no-op', async () => {
    const pools = Array.from({ length: 5 }, () => createPool(db.url, { max: 2 }));
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pool, allMigrations)));
      const ids = allMigrations.map((m) => m.id);
      // One process applied them all, in the list's order; the others found nothing to do.
      expect(results.filter((r) => r.length > 0)).toEqual([ids]);
      expect(await migrate(db.pool, allMigrations)).toEqual([]);
      const rows = await db.pool.query('SELECT id FROM migrations_applied ORDER BY id');
      expect(rows.rows.map((r) => r.id)).toEqual([...ids].sort());
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('refuse an applied migration whose text changed', async () => {
    const edited = allMigrations.map((m, i) => (i === 0 ? { ...m, sql: `${m.sql}\n-- edited` } : m));
    await expect(migrate(db.pool, edited)).rejects.toThrow(MigrationError);
    await expect(migrate(db.pool, edited)).rejects.toThrow('was changed after it was applied');
  });

  it('refuse a database migrated by a newer version (an applied migration this code does not know): a downgrade, also for a read-only command', async () => {
    const newer = [...allMigrations, { id: 'payments:9999_from_a_newer_version', sql: 'SELECT 1' }];
    expect(await migrate(db.pool, newer)).toEqual(['payments:9999_from_a_newer_version']);
    try {
      for (const check of [() => migrate(db.pool, allMigrations), () => checkMigrated(db.pool, allMigrations)]) {
        await expect(check()).rejects.toThrow(MigrationError);
        await expect(check()).rejects.toThrow(
          'the database was migrated by a newer version of the gateway: 1 applied migration(s) this version does not know (payments:9999_from_a_newer_version)',
        );
      }
    } finally {
      await db.pool.query(`DELETE FROM migrations_applied WHERE id = 'payments:9999_from_a_newer_version'`);
    }
    expect(await migrate(db.pool, allMigrations)).toEqual([]);
  });

  it('refuse a database made by a pre-release build (migrations this code does not know, and not its first), naming it so', async () => {
    const fresh = await createTestDatabase({ migrate: false });
    try {
      // Two ids of the history before the squash.
      await migrate(fresh.pool, PRE_RELEASE);
      for (const check of [() => migrate(fresh.pool, allMigrations), () => checkMigrated(fresh.pool, allMigrations)]) {
        await expect(check()).rejects.toThrow(
          'the database was made by a build of the gateway from before its first release: 2 applied migration(s) this version does not know, ' +
            'and not its first (event-store:0001_event_log); make the database again (the embedded one: stop the gateway, remove DATA_DIR)',
        );
      }
    } finally {
      await fresh.drop();
    }
  });

  // docs/operations.md, "Migrations": the procedure as an operator meets it, on a database of its own (DATABASE_URL).
  it('a gateway on a pre-release database refuses to start (exit 1) naming it; on the database made again it starts', async () => {
    const old = await createTestDatabase({ migrate: false });
    try {
      await migrate(old.pool, PRE_RELEASE);
      const refused = startProcess('gateway', { DATABASE_URL: old.url, PORT: '0' });
      expect(await refused.exited).toBe(1);
      expect(refused.output()).toContain('The gateway could not start: the database was made by a build of the gateway from before its first release');
    } finally {
      await old.drop();
    }
    // Made again: a new database.
    const fresh = await createTestDatabase({ migrate: false });
    try {
      const started = await startGateway('gateway', { DATABASE_URL: fresh.url });
      try {
        expect((await fetch(`${started.baseUrl}/health/ready`)).status).toBe(200);
      } finally {
        await started.kill('SIGTERM');
      }
    } finally {
      await fresh.drop();
    }
  }, 120_000);

  // The same with the embedded server, as the refusal tells it: stop the gateway, remove DATA_DIR, start again.
  it('on the embedded server under DATA_DIR: refused at start, naming what to do; done as said, it starts', async () => {
    const data = temporaryDataDir();
    try {
      const first = await startGateway('gateway', { DATA_DIR: data.dir });
      expect(await first.kill('SIGTERM')).toBe(0);
      // Its history made a pre-release one.
      const server = await startPrivatePostgres(data.dir, { databaseName: EMBEDDED_DATABASE_NAME });
      try {
        const client = new Client({ connectionString: server.url });
        await client.connect();
        await client.query('DELETE FROM migrations_applied');
        await client.end();
        const pool = createPool(server.url, { max: 1 });
        await migrate(pool, PRE_RELEASE);
        await pool.end();
      } finally {
        await server.stop();
      }
      const refused = startProcess('gateway', { DATA_DIR: data.dir, PORT: '0' });
      expect(await refused.exited).toBe(1);
      expect(refused.output()).toContain('make the database again (the embedded one: stop the gateway, remove DATA_DIR)');
      rmSync(data.dir, { recursive: true, force: true });
      const again = await startGateway('gateway', { DATA_DIR: data.dir });
      try {
        expect((await fetch(`${again.baseUrl}/health/ready`)).status).toBe(200);
      } finally {
        await again.kill('SIGTERM');
      }
    } finally {
      data.remove();
    }
  }, 120_000);

  it('roll back a failing migration completely', async () => {
    const broken = [...allMigrations, { id: 'test:0001_broken', sql: 'CREATE TABLE half_done (x int); SELECT 1/0;' }];
    await expect(migrate(db.pool, broken)).rejects.toThrow('migration test:0001_broken failed');
    const table = await db.pool.query(`SELECT to_regclass('half_done') AS t`);
    expect(table.rows[0].t).toBeNull();
    const row = await db.pool.query(`SELECT 1 FROM migrations_applied WHERE id = 'test:0001_broken'`);
    expect(row.rowCount).toBe(0);
  });

  it('are named <library>:<NNNN>_<name>, each once', async () => {
    for (const m of allMigrations) expect(m.id).toMatch(/^(platform|event-store|payments):\d{4}_[a-z0-9_]+$/);
    expect(new Set(allMigrations.map((m) => m.id)).size).toBe(allMigrations.length);
    await expect(migrate(db.pool, [{ id: '7', sql: 'SELECT 1' }])).rejects.toThrow('migration id "7" is not <library>:<NNNN>_<name>');
    await expect(migrate(db.pool, [allMigrations[0]!, allMigrations[0]!])).rejects.toThrow('duplicate migration ids');
  });
});

// payments:0016 built its index in the migration's transaction: on a large ledger, every event appended during the
// build was hidden from every log reader of the cluster (the transaction id it held), and the ledger's writes waited.
describe('an index added to a large table (Migration.concurrentIndex)', () => {
  const INDEX = allMigrations.find((m) => m.concurrentIndex === 'ledger_entries_time')!;
  const before = allMigrations.filter((m) => m !== INDEX);
  let db: TestDatabase;
  beforeAll(async () => {
    // A server of its own: the test reads the cluster's oldest open transaction, which any other file's would move.
    db = await createTestDatabase({ migrate: false, serverOfItsOwn: true });
    await migrate(db.pool, before);
    await db.pool.query(
      `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
       SELECT gen_random_uuid(), 'acc-' || (n % 1000), 'live', n, 'payment_recorded', 'payment:inv-' || n, now() - n * interval '1 second', '0/' || n
       FROM generate_series(1, 1000000) AS n`,
    );
  }, 120_000);
  afterAll(async () => {
    await db?.drop();
  });

  const indexState = async () =>
    (await db.pool.query<{ valid: boolean }>(`SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass('ledger_entries_time')`)).rows[0]?.valid;
  /** The index's oid: another after a build, the same where it was kept. */
  const indexOid = async () => (await db.pool.query<{ oid: string | null }>(`SELECT to_regclass('ledger_entries_time')::oid::text AS oid`)).rows[0]!.oid;

  it('is built outside a transaction: what commits during the build is visible at once, and the table takes writes', async () => {
    await db.pool.query('CREATE TABLE marks (n int)');
    // The ledger's writer: a write that waits for the table's lock more than 100 ms fails (55P03) and is counted.
    const writer = new Client({ connectionString: db.url });
    await writer.connect();
    await writer.query(`SET lock_timeout = '100ms'`);
    const migrating = migrate(db.pool, allMigrations);
    let done = false;
    void migrating.finally(() => (done = true)).catch(() => undefined);
    let checks = 0;
    let hidden = 0;
    let blocked = 0;
    try {
      for (let seq = 1_000_000; !done; seq += 1) {
        // Past its first, catalog transaction (phase 'initializing'), which holds a transaction id until it commits.
        if ((await db.pool.query(`SELECT 1 FROM pg_stat_progress_create_index WHERE phase <> 'initializing'`)).rowCount === 0) continue;
        // A transaction committed now: older than the cluster's oldest open one, so a reader of the log sees what it wrote?
        const { x } = (await db.pool.query<{ x: string }>('INSERT INTO marks VALUES (1) RETURNING pg_current_xact_id()::text AS x')).rows[0]!;
        const seen = await db.pool.query<{ hidden: boolean }>(`SELECT pg_snapshot_xmin(pg_current_snapshot()) <= $1::xid8 AS hidden`, [x]);
        if (seen.rows[0]!.hidden) hidden += 1;
        await writer
          .query(
            `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
             VALUES (gen_random_uuid(), 'acc-new', 'live', $1, 'payment_recorded', $2, now(), '0/0')`,
            [seq, `payment:new-${seq}`],
          )
          .catch((error: { code?: string }) => {
            if (error.code !== '55P03') throw error;
            blocked += 1;
          });
        checks += 1;
      }
    } finally {
      await writer.end();
    }
    expect(await migrating).toEqual([INDEX.id]);
    expect(checks).toBeGreaterThan(0);
    expect({ hidden, blocked }).toEqual({ hidden: 0, blocked: 0 });
    expect(await indexState()).toBe(true);
  }, 120_000);

  it('a build cut short (the index left invalid) is dropped and made again; one that ended before its row was recorded is kept', async () => {
    await db.pool.query(`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'ledger_entries_time'::regclass`);
    await db.pool.query(`DELETE FROM migrations_applied WHERE id = $1`, [INDEX.id]);
    expect(await indexState()).toBe(false);
    const cut = await indexOid();
    expect(await migrate(db.pool, allMigrations)).toEqual([INDEX.id]);
    expect(await indexState()).toBe(true);
    const built = await indexOid();
    expect(built).not.toBe(cut);
    await db.pool.query(`DELETE FROM migrations_applied WHERE id = $1`, [INDEX.id]);
    expect(await migrate(db.pool, allMigrations)).toEqual([INDEX.id]);
    expect(await indexState()).toBe(true);
    expect(await indexOid()).toBe(built);
    await expect(checkMigrated(db.pool, allMigrations)).resolves.toBeUndefined();
  });

  // The build waits for every transaction of its database older than it, readers too (a ledger:verify, a dump): the
  // start said nothing while it waited.
  it('tells, as it starts and while it waits, the sessions whose transactions the build waits for', async () => {
    await db.pool.query(`DROP INDEX ledger_entries_time`);
    await db.pool.query(`DELETE FROM migrations_applied WHERE id = $1`, [INDEX.id]);
    const report = new Client({ connectionString: db.url, application_name: 'a-long-report' });
    await report.connect();
    try {
      await report.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await report.query('SELECT count(*) FROM ledger_entries');
      const told: string[][] = [];
      const migrating = migrate(db.pool, allMigrations, {
        onIndexBuild: (index, waitingFor) => told.push([index, ...waitingFor.map((s) => s.applicationName)]),
        waitReportMs: 100,
      });
      await poll(
        async () => told,
        (t) => t.length >= 2,
        'two reports of the build',
      );
      expect(told.slice(0, 2)).toEqual([
        ['ledger_entries_time', 'a-long-report'],
        ['ledger_entries_time', 'a-long-report'],
      ]);
      expect(await indexState()).not.toBe(true);
      await report.query('COMMIT');
      expect(await migrating).toEqual([INDEX.id]);
      expect(await indexState()).toBe(true);
    } finally {
      await report.end();
    }
  });

  it('is one CREATE INDEX CONCURRENTLY IF NOT EXISTS of the named index', async () => {
    await expect(
      migrate(db.pool, [...allMigrations, { id: 'test:0001_index', concurrentIndex: 'x', sql: 'CREATE INDEX x ON ledger_entries (kind)' }]),
    ).rejects.toThrow('an index built concurrently is one CREATE INDEX CONCURRENTLY IF NOT EXISTS x statement');
  });
});
