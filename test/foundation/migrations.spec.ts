import { checkMigrated, createPool, migrate, MigrationError } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { startGateway, startProcess } from '../support/gateway-process';
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
      const refused = startProcess('gateway', { DATABASE_URL: old.url, PORT: '0', ADMIN_TOKEN: 'operator-token-for-migration-tests-0001' });
      expect(await refused.exited).toBe(1);
      expect(refused.output()).toContain('The gateway could not start: the database was made by a build of the gateway from before its first release');
    } finally {
      await old.drop();
    }
    // Made again: a new database.
    const fresh = await createTestDatabase({ migrate: false });
    try {
      const started = await startGateway('gateway', { DATABASE_URL: fresh.url, ADMIN_TOKEN: 'operator-token-for-migration-tests-0001' });
      try {
        expect((await fetch(`${started.baseUrl}/health/ready`)).status).toBe(200);
      } finally {
        await started.kill('SIGTERM');
      }
    } finally {
      await fresh.drop();
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
