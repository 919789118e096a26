import type { Pool } from 'pg';

/** Counting stops here: a trail shown as this many events means at least as many. */
export const TRAIL_COUNT_LIMIT = 10_000;

/** The transaction of the cluster that holds the visible log back (the oldest one holding a transaction id). */
export interface OldestTransaction {
  /** Its session's application_name (for a prepared transaction: `prepared <gid>`). */
  readonly applicationName: string;
  /** Its database (another database of the cluster holds the log back just the same). */
  readonly database: string | null;
  /** Its backend's process id (null for a prepared transaction, which has none). */
  readonly pid: number | null;
  /** pg_stat_activity's state: active, idle in transaction, ...; `prepared` for a prepared transaction. */
  readonly state: string | null;
  /**
   * Seconds since it began (for a prepared transaction: since it was prepared); null for
   * another role's session when the gateway's role is not in pg_read_all_stats, which
   * shows it only by its transaction id, application, database and pid.
   */
  readonly ageSeconds: number | null;
}

/**
 * How far the log subscribers can see trails the log as appended. An event becomes
 * visible to subscribers once every transaction of the cluster older than its own
 * has ended (that is what keeps a subscriber from skipping an event committed out of
 * order), so one transaction left open anywhere on the cluster hides every newer
 * event while each projection's lag, counted in the visible log, says zero.
 */
export interface LogVisibility {
  /** Events appended and committed but not yet visible to subscribers (up to TRAIL_COUNT_LIMIT). */
  readonly invisibleEvents: number;
  /** Seconds since the oldest of those was appended: how long subscribers have been held back (0 when none). */
  readonly oldestInvisibleSeconds: number;
  /**
   * The oldest transaction of the cluster holding a transaction id, whoever runs it;
   * null when there is none.
   */
  readonly oldestTransaction: OldestTransaction | null;
}

/** One round trip: the trail in the events table and the oldest transaction of the cluster. */
export async function readLogVisibility(pool: Pick<Pool, 'query'>): Promise<LogVisibility> {
  const result = await pool.query<{
    invisible_events: number;
    oldest_invisible_seconds: number;
    application_name: string | null;
    database: string | null;
    pid: number | null;
    state: string | null;
    age_seconds: number | null;
    found: boolean;
  }>(
    `WITH trail AS (
       SELECT count(*)::int AS invisible_events,
              coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0)::float8 AS oldest_invisible_seconds
       FROM (SELECT created_at FROM events
             WHERE transaction_id >= pg_snapshot_xmin(pg_current_snapshot())
             ORDER BY events.transaction_id, events.global_position LIMIT $1) invisible),
     oldest AS (
       SELECT * FROM (
         SELECT application_name, datname::text AS database, pid, state,
                -- NULL where xact_start is hidden (another role's session, without pg_read_all_stats); greatest() would make it 0.
                CASE WHEN xact_start IS NOT NULL THEN greatest(extract(epoch FROM clock_timestamp() - xact_start), 0)::float8 END AS age_seconds,
                age(backend_xid) AS xid_age
         FROM pg_stat_activity WHERE backend_xid IS NOT NULL
         UNION ALL
         SELECT 'prepared ' || gid, database::text, NULL, 'prepared',
                greatest(extract(epoch FROM clock_timestamp() - prepared), 0)::float8, age(transaction)
         FROM pg_prepared_xacts) running
       ORDER BY xid_age DESC LIMIT 1)
     SELECT trail.*, oldest.application_name, oldest.database, oldest.pid, oldest.state, oldest.age_seconds, oldest.xid_age IS NOT NULL AS found
     FROM trail LEFT JOIN oldest ON true`,
    [TRAIL_COUNT_LIMIT],
  );
  const row = result.rows[0]!;
  return {
    invisibleEvents: row.invisible_events,
    oldestInvisibleSeconds: row.oldest_invisible_seconds,
    oldestTransaction: !row.found
      ? null
      : { applicationName: row.application_name ?? '', database: row.database, pid: row.pid, state: row.state, ageSeconds: row.age_seconds },
  };
}
