/**
 * Writes a test holds back: a trigger makes the rows it picks wait on an advisory lock
 * that the test's own session holds until `release`, so a request is caught in the
 * middle of its write (killed there, or raced by another) without relying on timing.
 */
import { Client } from 'pg';
import { poll } from './merchant-fixtures';
import type { TestDatabase } from './test-database';

export interface HeldWrites {
  /** Takes the lock and adds a trigger `on` (e.g. `BEFORE INSERT ON events`) for the rows `when` picks. */
  hold(on: string, when: string): Promise<void>;
  /** The sessions waiting on the lock, once there is one (`what` names them in the poll's message). */
  waiting(what: string): Promise<number[]>;
  /** Lets the held writes go on, then drops the triggers (a DROP TRIGGER waits for the writes in progress). */
  release(): Promise<void>;
  end(): Promise<void>;
}

/** Creates the trigger function on `db` (once per database) and the session that holds `lock`. */
export async function heldWrites(db: TestDatabase, lock: number): Promise<HeldWrites> {
  const session = new Client({ connectionString: db.url });
  await session.connect();
  await db.pool.query(`CREATE FUNCTION hold_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock(${lock}); RETURN NEW; END $$`);
  const tables = new Set<string>();
  let locked = false;
  return {
    async hold(on, when) {
      if (!locked) await session.query('SELECT pg_advisory_lock($1)', [lock]);
      locked = true;
      tables.add(/ON (\w+)$/.exec(on.trim())![1]!);
      await db.pool.query(`CREATE TRIGGER hold_for_test ${on} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION hold_for_test()`);
    },
    waiting: (what) =>
      poll(
        async () =>
          (
            await db.pool.query<{ pid: number }>(
              `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1 AND pid <> pg_backend_pid()`,
              [lock],
            )
          ).rows.map((r) => r.pid),
        (pids) => pids.length > 0,
        `${what}, waiting on the test lock`,
        30_000,
      ),
    async release() {
      if (locked) await session.query('SELECT pg_advisory_unlock($1)', [lock]);
      locked = false;
      for (const table of tables) await db.pool.query(`DROP TRIGGER IF EXISTS hold_for_test ON ${table}`);
      tables.clear();
    },
    end: () => session.end(),
  };
}
