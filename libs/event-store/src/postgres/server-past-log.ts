import type { Pool } from 'pg';

/**
 * The log is ordered by the transaction ids of the appends (decision 0003), so the
 * server must be past every stored event's: a physical copy of the database is, a
 * logical dump restored into a new server is not (its restored events keep their old
 * ids while the server counts from a low one, and every new event would sort before
 * them and be skipped by the projections). A process refuses to start on such a
 * database: one that appends, and one that verifies the log (it reads what lies below
 * the server's horizon, which is then none of it). Reads only; assigns no transaction id.
 */
export async function checkServerPastEventLog(pool: Pick<Pool, 'query'>): Promise<void> {
  const r = await pool.query<{ newest: string | null; next: string }>(
    `SELECT (SELECT max(transaction_id) FROM events)::text AS newest, pg_snapshot_xmax(pg_current_snapshot())::text AS next`,
  );
  const { newest, next } = r.rows[0]!;
  if (newest !== null && BigInt(newest) >= BigInt(next)) {
    throw new Error(
      `the database server is behind its event log: the newest event was written by transaction ${newest}, the server's next is ${next}. ` +
        'A logical dump (pg_dump) restored into a new server looks like this; restore a physical backup instead (docs/operations.md, "Restoring from a backup")',
    );
  }
}
