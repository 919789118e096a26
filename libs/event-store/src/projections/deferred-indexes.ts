import type { Pool, PoolClient } from 'pg';
import { inTransaction } from '#platform/database';

/**
 * Inside the transaction that empties `tables`: switches autovacuum off for them and
 * records it, so whoever makes the projection's deferred indexes again switches it
 * back on and analyzes the filled tables (restoreDeferredIndexes). A table being
 * filled from empty by a rebuild is otherwise vacuumed and analyzed again and again as
 * it grows (inserts alone trigger autovacuum), each time reading all it holds so far.
 * A table whose autovacuum_enabled an operator has set is left as it is.
 */
export async function deferAutovacuum(tx: PoolClient, projection: string, tables: readonly string[]): Promise<number> {
  if (tables.length === 0) return 0;
  const found = await tx.query<{ table_name: string }>(
    `SELECT c.oid::regclass::text AS table_name FROM pg_class c
     WHERE c.oid = ANY($1::text[]::regclass[])
       AND NOT EXISTS (SELECT 1 FROM unnest(coalesce(c.reloptions, '{}')) o WHERE starts_with(o, 'autovacuum_enabled='))
     ORDER BY 1`,
    [tables],
  );
  for (const r of found.rows) await tx.query(`ALTER TABLE ${r.table_name} SET (autovacuum_enabled = false)`);
  if (found.rows.length > 0) {
    await tx.query(
      `INSERT INTO projection_deferred_autovacuum (projection, table_name) SELECT $1, t FROM unnest($2::text[]) AS t
       ON CONFLICT (projection, table_name) DO NOTHING`,
      [projection, found.rows.map((r) => r.table_name)],
    );
  }
  return found.rows.length;
}

/**
 * Inside the transaction that empties `tables`: drops their secondary indexes (every
 * index but the primary key, which the projections' upserts and row locks go through,
 * an index a foreign key refers to, and the replica identity; the primary keys of
 * `primaryKeyTables` go too) and records how to make each again. Filling an emptied table and then building its indexes at once by
 * sorting costs PostgreSQL far less than maintaining them row by row, entry by entry.
 * A unique index dropped here checks its rows when it is made again: a log whose read
 * model breaks it fails there, as the live projector fails at the batch that breaks it.
 */
export async function deferSecondaryIndexes(
  tx: PoolClient,
  projection: string,
  tables: readonly string[],
  /** Tables whose primary key goes too (Projection.primaryKeyBuiltAfterRebuild). */
  primaryKeyTables: readonly string[] = [],
): Promise<number> {
  if (tables.length === 0) return 0;
  const found = await tx.query<{ index_name: string; table_name: string; constraint_name: string | null; create_statement: string }>(
    `SELECT i.indexrelid::regclass::text AS index_name, i.indrelid::regclass::text AS table_name, c.conname AS constraint_name,
            CASE WHEN c.oid IS NULL THEN pg_get_indexdef(i.indexrelid)
                 ELSE format('ALTER TABLE %s ADD CONSTRAINT %I %s', i.indrelid::regclass, c.conname, pg_get_constraintdef(c.oid)) END AS create_statement
     FROM pg_index i
     LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x')
     WHERE i.indrelid = ANY($1::text[]::regclass[]) AND NOT i.indisreplident
       AND (NOT i.indisprimary OR i.indrelid = ANY($2::text[]::regclass[]))
       AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = i.indexrelid)
     ORDER BY 1`,
    [tables, primaryKeyTables.filter((t) => tables.includes(t))],
  );
  if (found.rows.length === 0) return 0;
  await tx.query(
    `INSERT INTO projection_deferred_indexes (projection, index_name, create_statement)
     SELECT $1, n, s FROM unnest($2::text[], $3::text[]) AS d(n, s)
     ON CONFLICT (projection, index_name) DO NOTHING`,
    [projection, found.rows.map((r) => r.index_name), found.rows.map((r) => r.create_statement)],
  );
  for (const r of found.rows) {
    await tx.query(
      r.constraint_name === null ? `DROP INDEX ${r.index_name}` : `ALTER TABLE ${r.table_name} DROP CONSTRAINT ${tx.escapeIdentifier(r.constraint_name)}`,
    );
  }
  return found.rows.length;
}

/**
 * Makes again every index a rebuild of the projection dropped and has not made yet,
 * switches autovacuum back on for the tables it took out of it (deferAutovacuum) and
 * analyzes them, in one transaction that also deletes their records (so an interrupted
 * call leaves them all to the next one). Without a statement timeout: building an
 * index over a large read model takes as long as it takes. Returns how many indexes
 * were made; costs one query when nothing is pending.
 */
export async function restoreDeferredIndexes(pool: Pool, projection: string): Promise<number> {
  const pending = await pool.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM projection_deferred_indexes WHERE projection = $1)
          + (SELECT count(*) FROM projection_deferred_autovacuum WHERE projection = $1) AS n`,
    [projection],
  );
  if (Number(pending.rows[0]!.n) === 0) return 0;
  return inTransaction(pool, async (tx) => {
    await tx.query('SET LOCAL statement_timeout = 0');
    const rows = await tx.query<{ index_name: string; create_statement: string; present: boolean }>(
      `SELECT index_name, create_statement, to_regclass(index_name) IS NOT NULL AS present
       FROM projection_deferred_indexes WHERE projection = $1 ORDER BY index_name FOR UPDATE`,
      [projection],
    );
    for (const r of rows.rows) if (!r.present) await tx.query(r.create_statement);
    await tx.query('DELETE FROM projection_deferred_indexes WHERE projection = $1', [projection]);
    const paused = await tx.query<{ table_name: string }>(
      `DELETE FROM projection_deferred_autovacuum WHERE projection = $1 AND to_regclass(table_name) IS NOT NULL RETURNING table_name`,
      [projection],
    );
    await tx.query('DELETE FROM projection_deferred_autovacuum WHERE projection = $1', [projection]);
    for (const r of [...paused.rows].sort((a, b) => a.table_name.localeCompare(b.table_name))) {
      await tx.query(`ALTER TABLE ${r.table_name} RESET (autovacuum_enabled)`);
      // The planner's statistics of a table filled from empty: what autovacuum would have gathered.
      await tx.query(`ANALYZE ${r.table_name}`);
    }
    return rows.rows.length;
  });
}
