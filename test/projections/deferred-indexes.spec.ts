/**
 * The secondary indexes a rebuild drops from emptied tables (deferSecondaryIndexes) and
 * makes again (restoreDeferredIndexes), on tables of every kind of index: which are
 * dropped, which are kept, and that each comes back as it was.
 */
import { deferAutovacuum, deferSecondaryIndexes, restoreDeferredIndexes } from '#event-store/projections';
import { inTransaction } from '#platform/database';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(`
    CREATE TABLE deferred_parent (
      id bigint PRIMARY KEY,
      code text NOT NULL,
      name text NOT NULL,
      at timestamptz NOT NULL,
      CONSTRAINT deferred_parent_code UNIQUE (code),
      CONSTRAINT deferred_parent_name_key UNIQUE (name)
    );
    CREATE INDEX deferred_parent_at ON deferred_parent (at DESC) WHERE id > 10;
    CREATE UNIQUE INDEX deferred_parent_lower_name ON deferred_parent (lower(name));
    CREATE TABLE deferred_child (parent_code text NOT NULL REFERENCES deferred_parent (code), n int NOT NULL);
    CREATE INDEX deferred_child_n ON deferred_child (n);
    CREATE TABLE deferred_grandchild (parent_id bigint REFERENCES deferred_parent (id));
    CREATE TABLE deferred_replica (a int NOT NULL, b int NOT NULL, PRIMARY KEY (a, b));
    CREATE UNIQUE INDEX deferred_replica_b ON deferred_replica (b);
    ALTER TABLE deferred_replica REPLICA IDENTITY USING INDEX deferred_replica_b;
    CREATE INDEX deferred_replica_a ON deferred_replica (a);
    INSERT INTO deferred_parent SELECT i, 'c' || i, 'n' || i, now() FROM generate_series(1, 50) i;
  `);
});
afterAll(async () => {
  await db.drop();
});

const TABLES = ['deferred_parent', 'deferred_child', 'deferred_replica'];
const definitions = async () =>
  (
    await db.pool.query<{ indexname: string; indexdef: string }>(
      `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY($1::text[]) ORDER BY indexname`,
      [TABLES],
    )
  ).rows;
const constraints = async () =>
  (
    await db.pool.query<{ conname: string; def: string }>(
      `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = ANY($1::text[]::regclass[]) ORDER BY conname`,
      [TABLES],
    )
  ).rows;

describe('secondary indexes deferred by a rebuild', () => {
  it('drops every index but the primary keys, an index a foreign key refers to and the replica identity; makes them again as they were', async () => {
    const before = { indexes: await definitions(), constraints: await constraints() };
    const dropped = await inTransaction(db.pool, (tx) => deferSecondaryIndexes(tx, 'deferred', TABLES));
    expect(dropped).toBe(5);
    expect((await definitions()).map((d) => d.indexname)).toEqual([
      'deferred_parent_code', // a foreign key refers to it
      'deferred_parent_pkey',
      'deferred_replica_b', // the replica identity
      'deferred_replica_pkey',
    ]);
    expect(
      (await db.pool.query<{ index_name: string }>(`SELECT index_name FROM projection_deferred_indexes WHERE projection = 'deferred' ORDER BY 1`)).rows.map(
        (r) => r.index_name,
      ),
    ).toEqual(['deferred_child_n', 'deferred_parent_at', 'deferred_parent_lower_name', 'deferred_parent_name_key', 'deferred_replica_a']);

    expect(await restoreDeferredIndexes(db.pool, 'deferred')).toBe(5);
    expect({ indexes: await definitions(), constraints: await constraints() }).toEqual(before);
    expect((await db.pool.query(`SELECT * FROM projection_deferred_indexes WHERE projection = 'deferred'`)).rows).toEqual([]);
    // Nothing left to make: one query, nothing made.
    expect(await restoreDeferredIndexes(db.pool, 'deferred')).toBe(0);
  });

  it('drops the primary key of a table named for it (unless a foreign key refers to it), and makes it again as the primary key', async () => {
    const before = { indexes: await definitions(), constraints: await constraints() };
    expect(await inTransaction(db.pool, (tx) => deferSecondaryIndexes(tx, 'deferred', TABLES, ['deferred_replica', 'deferred_parent']))).toBe(6);
    // deferred_replica's primary key goes; deferred_parent's stays, a foreign key of deferred_grandchild refers to it.
    expect((await definitions()).map((d) => d.indexname)).toEqual(['deferred_parent_code', 'deferred_parent_pkey', 'deferred_replica_b']);
    expect(await restoreDeferredIndexes(db.pool, 'deferred')).toBe(6);
    expect({ indexes: await definitions(), constraints: await constraints() }).toEqual(before);
  });

  it('dropped twice (a second reset before the indexes were made again) still makes each once', async () => {
    const before = await definitions();
    await inTransaction(db.pool, (tx) => deferSecondaryIndexes(tx, 'deferred', TABLES));
    expect(await inTransaction(db.pool, (tx) => deferSecondaryIndexes(tx, 'deferred', TABLES))).toBe(0);
    expect(await restoreDeferredIndexes(db.pool, 'deferred')).toBe(5);
    expect(await definitions()).toEqual(before);
  });

  it('a unique index that the rows written meanwhile break is not made, and stays recorded for the next attempt', async () => {
    const before = await definitions();
    await inTransaction(db.pool, (tx) => deferSecondaryIndexes(tx, 'deferred', TABLES));
    await db.pool.query(`UPDATE deferred_parent SET name = 'same' WHERE id IN (1, 2)`);
    await expect(restoreDeferredIndexes(db.pool, 'deferred')).rejects.toThrow(/could not create unique index/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM projection_deferred_indexes WHERE projection = 'deferred'`)).rows[0].n).toBe(5);
    await db.pool.query(`UPDATE deferred_parent SET name = 'n' || id WHERE id IN (1, 2)`);
    expect(await restoreDeferredIndexes(db.pool, 'deferred')).toBe(5);
    expect(await definitions()).toEqual(before);
  });
});

describe('autovacuum paused by a rebuild', () => {
  const options = async () =>
    (
      await db.pool.query<{ relname: string; reloptions: string[] | null }>(
        `SELECT relname, reloptions FROM pg_class WHERE relname = ANY($1::text[]) ORDER BY relname`,
        [['deferred_child', 'deferred_replica', 'deferred_operator']],
      )
    ).rows;
  const recorded = async () =>
    (await db.pool.query<{ table_name: string }>(`SELECT table_name FROM projection_deferred_autovacuum WHERE projection = 'paused' ORDER BY 1`)).rows.map(
      (r) => r.table_name,
    );
  const analyzed = async (table: string) =>
    Number((await db.pool.query<{ n: string }>(`SELECT analyze_count AS n FROM pg_stat_user_tables WHERE relname = $1`, [table])).rows[0]!.n);

  it('is switched off and recorded with the reset, on again and the tables analyzed when the indexes are made; an operator’s own setting is left alone', async () => {
    await db.pool.query(`CREATE TABLE deferred_operator (n int) WITH (autovacuum_enabled = true, fillfactor = 90)`);
    const tables = ['deferred_child', 'deferred_replica', 'deferred_operator'];
    const before = await options();
    const analyzedBefore = await analyzed('deferred_replica');
    expect(await inTransaction(db.pool, (tx) => deferAutovacuum(tx, 'paused', tables))).toBe(2);
    expect(await options()).toEqual([
      { relname: 'deferred_child', reloptions: ['autovacuum_enabled=false'] },
      { relname: 'deferred_operator', reloptions: ['autovacuum_enabled=true', 'fillfactor=90'] },
      { relname: 'deferred_replica', reloptions: ['autovacuum_enabled=false'] },
    ]);
    expect(await recorded()).toEqual(['deferred_child', 'deferred_replica']);
    // A second reset (a rebuild started again before the first one ended) finds them off already: nothing more.
    expect(await inTransaction(db.pool, (tx) => deferAutovacuum(tx, 'paused', tables))).toBe(0);
    expect(await recorded()).toEqual(['deferred_child', 'deferred_replica']);
    // No index was dropped: restoring makes none, and still switches autovacuum on again.
    expect(await restoreDeferredIndexes(db.pool, 'paused')).toBe(0);
    expect(await options()).toEqual(before);
    expect(await recorded()).toEqual([]);
    expect(await analyzed('deferred_replica')).toBeGreaterThan(analyzedBefore);
  });

  it('rolls back with the reset: a failed transaction leaves neither the setting nor its record', async () => {
    const before = await options();
    await expect(
      inTransaction(db.pool, async (tx) => {
        await deferAutovacuum(tx, 'paused', ['deferred_child']);
        throw new Error('the reset failed');
      }),
    ).rejects.toThrow('the reset failed');
    expect(await options()).toEqual(before);
    expect(await recorded()).toEqual([]);
  });

  it('a record of a table dropped since is deleted without error', async () => {
    await db.pool.query('CREATE TABLE deferred_gone (n int)');
    await inTransaction(db.pool, (tx) => deferAutovacuum(tx, 'paused', ['deferred_gone']));
    await db.pool.query('DROP TABLE deferred_gone');
    expect(await restoreDeferredIndexes(db.pool, 'paused')).toBe(0);
    expect(await recorded()).toEqual([]);
  });
});
