import { createPool, migrate, MigrationError } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { createTestDatabase, TestDatabase } from '../support/test-database';

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
      const applied = results.flat().sort((a, b) => a - b);
      expect(applied).toEqual(allMigrations.map((m) => m.version));
      expect(await migrate(db.pool, allMigrations)).toEqual([]);
      const rows = await db.pool.query('SELECT version FROM schema_migrations ORDER BY version');
      expect(rows.rows.map((r) => r.version)).toEqual(allMigrations.map((m) => m.version));
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  it('refuse an applied migration whose text changed', async () => {
    const edited = allMigrations.map((m, i) => (i === 0 ? { ...m, sql: `${m.sql}\n-- edited` } : m));
    await expect(migrate(db.pool, edited)).rejects.toThrow(MigrationError);
    await expect(migrate(db.pool, edited)).rejects.toThrow('was changed after it was applied');
  });

  it('roll back a failing migration completely', async () => {
    const broken = [...allMigrations, { version: 999, name: 'broken', sql: 'CREATE TABLE half_done (x int); SELECT 1/0;' }];
    await expect(migrate(db.pool, broken)).rejects.toThrow('migration 999 (broken) failed');
    const table = await db.pool.query(`SELECT to_regclass('half_done') AS t`);
    expect(table.rows[0].t).toBeNull();
    const row = await db.pool.query('SELECT 1 FROM schema_migrations WHERE version = 999');
    expect(row.rowCount).toBe(0);
  });
});
