import { createHash } from 'node:crypto';
import { Pool } from 'pg';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Arbitrary constant: the advisory lock that serialises migrations across processes. */
const MIGRATION_LOCK = 7_261_903_184;

export class MigrationError extends Error {}

const checksum = (sql: string): string => createHash('sha256').update(sql).digest('hex');

/**
 * Applies, in version order, every migration not applied yet, each in its own
 * transaction together with its row in schema_migrations. Safe to run twice and
 * from several processes at once: a session advisory lock lets one run at a time,
 * and the others then find nothing left to do. An applied migration whose text has
 * changed since is refused: history is never rewritten under a running database.
 */
export async function migrate(pool: Pool, migrations: readonly Migration[]): Promise<number[]> {
  const versions = migrations.map((m) => m.version);
  if (new Set(versions).size !== versions.length) throw new MigrationError('duplicate migration versions');
  const ordered = [...migrations].sort((a, b) => a.version - b.version);

  const client = await pool.connect();
  try {
    // A migration may rebuild an index of a large table, and a process starting while
    // another migrates waits for the lock meanwhile: no statement bound for this
    // session (the pool's is restored below, before the connection goes back).
    await client.query('SET statement_timeout = 0');
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        checksum text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const applied = new Map(
        (await client.query<{ version: number; checksum: string }>('SELECT version, checksum FROM schema_migrations')).rows.map(
          (r) => [r.version, r.checksum],
        ),
      );
      const done: number[] = [];
      for (const migration of ordered) {
        const known = applied.get(migration.version);
        if (known !== undefined) {
          if (known !== checksum(migration.sql)) {
            throw new MigrationError(
              `migration ${migration.version} (${migration.name}) was changed after it was applied; add a new migration instead`,
            );
          }
          continue;
        }
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
            migration.version,
            migration.name,
            checksum(migration.sql),
          ]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw new MigrationError(`migration ${migration.version} (${migration.name}) failed: ${(error as Error).message}`);
        }
        done.push(migration.version);
      }
      return done;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    }
  } finally {
    const reset = await client.query('RESET statement_timeout').then(
      () => undefined,
      (error: Error) => error,
    );
    client.release(reset);
  }
}
