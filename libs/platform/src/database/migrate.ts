import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { inTransactionOn } from './pool';

export interface Migration {
  /**
   * `<library>:<NNNN>_<what>`, e.g. `payments:0005_read_model_invoices`: numbered within
   * the library that owns the table, unique, never renamed once applied.
   */
  readonly id: string;
  readonly sql: string;
  /**
   * An index added to a table that may already be large: its name, and `sql` is its
   * `CREATE INDEX CONCURRENTLY IF NOT EXISTS <name> ...`, run outside a transaction. In the
   * migration's transaction a plain CREATE INDEX holds a transaction id for the whole
   * build, which hides every event appended meanwhile from every log reader of the
   * cluster (the log shows only what is older than the oldest open transaction), and it
   * blocks the table's writes. A build cut short leaves the index invalid: it is dropped
   * and built again; one that ended before its row was recorded is kept.
   */
  readonly concurrentIndex?: string;
}

/** A session whose transaction a concurrent index build waits for (it began before the build). */
export interface WaitedForSession {
  readonly pid: number;
  readonly applicationName: string;
  readonly state: string | null;
  readonly transactionSeconds: number | null;
}

export interface MigrateOptions {
  /**
   * Told as a concurrent index build starts, and then every `waitReportMs` (default 30 s)
   * while it runs, with the sessions of its database whose transactions began before it:
   * the build waits for each of them to end (a long report, a `ledger:verify`, a dump),
   * and the process starts only after it.
   */
  readonly onIndexBuild?: (index: string, waitingFor: readonly WaitedForSession[]) => void;
  readonly waitReportMs?: number;
}

const MIGRATION_ID = /^[a-z][a-z-]*:\d{4}_[a-z0-9_]+$/;
const INDEX_NAME = /^[a-z_][a-z0-9_]*$/;

/** Arbitrary constant: the advisory lock that serialises migrations across processes. */
const MIGRATION_LOCK = 7_261_903_184;

export class MigrationError extends Error {}
/** A migration's own SQL failed (those before it stay applied): the schema changed, so not a refusal before any work. */
export class MigrationFailedError extends MigrationError {}

const checksum = (sql: string): string => createHash('sha256').update(sql).digest('hex');
/** The checksum of a migration's text. */
const textChecksum = (m: Migration): string => checksum(m.sql);

/**
 * Applies, in the order of the list (the composition root's), every migration not
 * applied yet, each in its own transaction together with its row in
 * migrations_applied. Safe to run twice and from several processes at once: a session
 * advisory lock lets one run at a time, and the others then find nothing left to do.
 * An applied migration whose text has changed since is refused: history is never
 * rewritten under a running database.
 */
export async function migrate(pool: Pool, migrations: readonly Migration[], options: MigrateOptions = {}): Promise<string[]> {
  const ids = migrations.map((m) => m.id);
  const malformed = ids.find((id) => !MIGRATION_ID.test(id));
  if (malformed !== undefined) throw new MigrationError(`migration id ${JSON.stringify(malformed)} is not <library>:<NNNN>_<name>`);
  if (new Set(ids).size !== ids.length) throw new MigrationError('duplicate migration ids');
  for (const { id, sql, concurrentIndex: index } of migrations) {
    if (index !== undefined && !(INDEX_NAME.test(index) && sql.startsWith(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index} `))) {
      throw new MigrationError(`migration ${id}: an index built concurrently is one CREATE INDEX CONCURRENTLY IF NOT EXISTS ${index} statement`);
    }
  }

  const client = await pool.connect();
  try {
    // A migration may rebuild an index of a large table, and a process starting while
    // another migrates waits for the lock meanwhile: no statement bound for this
    // session (the pool's is restored below, before the connection goes back).
    await client.query('SET statement_timeout = 0');
    // Asked again every 100 ms, not waited for in one statement, which would hold a snapshot all the while.
    while (!(await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [MIGRATION_LOCK])).rows[0]!.locked) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    try {
      try {
        await client.query(`CREATE TABLE IF NOT EXISTS migrations_applied (
          id text PRIMARY KEY,
          checksum text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      } catch (error) {
        throw (await privilegeMissing(client, error)) ?? error;
      }
      const applied = new Map(
        (await client.query<{ id: string; checksum: string }>('SELECT id, checksum FROM migrations_applied')).rows.map((r) => [r.id, r.checksum]),
      );
      refuseNewer(applied, migrations);
      const done: string[] = [];
      for (const migration of migrations) {
        const known = applied.get(migration.id);
        if (known !== undefined) {
          if (known !== textChecksum(migration)) {
            throw new MigrationError(`migration ${migration.id} was changed after it was applied; add a new migration instead`);
          }
          continue;
        }
        try {
          if (migration.concurrentIndex !== undefined) {
            await buildIndexConcurrently(client, pool, migration.concurrentIndex, migration.sql, options);
            await client.query('INSERT INTO migrations_applied (id, checksum) VALUES ($1, $2)', [migration.id, textChecksum(migration)]);
          } else {
            await inTransactionOn(client, async () => {
              await client.query(migration.sql);
              await client.query('INSERT INTO migrations_applied (id, checksum) VALUES ($1, $2)', [migration.id, textChecksum(migration)]);
            });
          }
        } catch (error) {
          throw (
            (await privilegeMissing(client, error, migration.id)) ?? new MigrationFailedError(`migration ${migration.id} failed: ${(error as Error).message}`)
          );
        }
        done.push(migration.id);
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

/**
 * Migration.concurrentIndex: an invalid index of that name (a build cut short) dropped, then the build, each outside a
 * transaction; reported to `onIndexBuild` as it starts and while it runs, with the sessions it waits for (read on `pool`).
 */
async function buildIndexConcurrently(client: PoolClient, pool: Pool, index: string, sql: string, options: MigrateOptions): Promise<void> {
  const invalid = await client.query(`SELECT 1 FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid`, [index]);
  if (invalid.rowCount !== 0) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);
  const report = options.onIndexBuild;
  if (report === undefined) {
    await client.query(sql);
    return;
  }
  const own = (await client.query<{ pid: number; at: Date }>('SELECT pg_backend_pid() AS pid, clock_timestamp() AS at')).rows[0]!;
  const waitedFor = async (): Promise<WaitedForSession[]> =>
    (
      await pool.query<WaitedForSession>(
        `SELECT pid, application_name AS "applicationName", state,
                extract(epoch FROM clock_timestamp() - xact_start)::float8 AS "transactionSeconds"
         FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> $1 AND pid <> pg_backend_pid() AND xact_start < $2
         ORDER BY xact_start`,
        [own.pid, own.at],
      )
    ).rows;
  const tell = () =>
    waitedFor().then(
      (sessions) => report(index, sessions),
      () => undefined, // a report that could not be read: the build goes on, the next one tries again
    );
  await tell();
  const timer = setInterval(() => void tell(), options.waitReportMs ?? 30_000);
  try {
    await client.query(sql);
  } finally {
    clearInterval(timer);
  }
}

/**
 * A statement refused for want of a privilege (42501), said with what the role needs:
 * the gateway's role creates and alters its own tables, and PostgreSQL 15 and later give
 * CREATE on schema public only to the database's owner. Null for any other error.
 */
async function privilegeMissing(client: PoolClient, error: unknown, migrationId?: string): Promise<MigrationError | null> {
  if ((error as { code?: unknown }).code !== '42501') return null;
  const named = await client.query<{ role: string; schema: string | null }>('SELECT quote_ident(current_user) AS role, current_schema() AS schema').then(
    (r) => r.rows[0]!,
    () => ({ role: '<role>', schema: null }),
  );
  const schema = named.schema ?? 'public';
  return new MigrationError(
    `${migrationId === undefined ? 'the schema could not be migrated' : `migration ${migrationId} failed`}: ${(error as Error).message}; ` +
      `the database role ${named.role} creates and alters the gateway's tables: GRANT CREATE ON SCHEMA ${schema} TO ${named.role} ` +
      `(PostgreSQL 15 and later give it only to the database's owner), or make ${named.role} the owner of the database`,
  );
}

/**
 * Checks, writing nothing, that the database has every migration of the list applied
 * with the same text: what a process that must not write (a read-only command) does
 * instead of migrate. Throws MigrationError naming each migration missing (or applied
 * with another text: the database was migrated by another version of the code).
 */
export async function checkMigrated(pool: Pool, migrations: readonly Migration[]): Promise<void> {
  const applied = await appliedMigrations(pool);
  refuseNewer(applied, migrations);
  const missing = migrations.filter((m) => !applied.has(m.id)).map((m) => m.id);
  if (missing.length > 0) {
    throw new MigrationError(
      `the database schema is not fully migrated: ${missing.length} of ${migrations.length} migration(s) missing (${missing.join(', ')}); ` +
        'a gateway of this version applies them when it starts',
    );
  }
  const changed = migrations.filter((m) => applied.get(m.id) !== textChecksum(m)).map((m) => m.id);
  if (changed.length > 0) {
    throw new MigrationError(`the database applied another text of migration(s) ${changed.join(', ')}: it was migrated by another version of the gateway`);
  }
}

/**
 * A database that applied migrations this code does not know was migrated by a newer
 * version: older code would read and write tables whose meaning it does not know (a
 * downgrade is not supported: docs/operations.md, "Migrations"). A newer version's
 * history begins with this one's first migration; a database without it was made by a
 * build from before the first release, whose history was squashed (decision 0009).
 */
function refuseNewer(applied: ReadonlyMap<string, string>, migrations: readonly Migration[]): void {
  const known = new Set(migrations.map((m) => m.id));
  const unknown = [...applied.keys()].filter((id) => !known.has(id)).sort();
  if (unknown.length > 0 && migrations.length > 0 && !applied.has(migrations[0]!.id)) {
    throw new MigrationError(
      `the database was made by a build of the gateway from before its first release: ${unknown.length} applied migration(s) this ` +
        `version does not know, and not its first (${migrations[0]!.id}); make the database again (the embedded one: stop the gateway, remove DATA_DIR)`,
    );
  }
  if (unknown.length > 0) {
    throw new MigrationError(
      `the database was migrated by a newer version of the gateway: ${unknown.length} applied migration(s) this version does not know ` +
        `(${unknown.join(', ')}); run that version or a later one (a downgrade is not supported)`,
    );
  }
}

/** What the database records as applied, id → checksum, read only. */
async function appliedMigrations(pool: Pool): Promise<Map<string, string>> {
  const table = await pool.query<{ named: boolean }>(`SELECT to_regclass('migrations_applied') IS NOT NULL AS named`);
  const applied = new Map<string, string>();
  if (table.rows[0]!.named) {
    for (const r of (await pool.query<{ id: string; checksum: string }>('SELECT id, checksum FROM migrations_applied')).rows) applied.set(r.id, r.checksum);
  }
  return applied;
}
