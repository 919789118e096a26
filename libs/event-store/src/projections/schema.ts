import type { Migration } from '#platform/database';

export const projectionsMigration: Migration = {
  id: 'event-store:0002_projection_checkpoints',
  sql: `
CREATE TABLE projection_checkpoints (
  projection text PRIMARY KEY,
  commit_position numeric(20) NOT NULL DEFAULT 0,
  prepare_position numeric(20) NOT NULL DEFAULT 0,
  events_applied bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  rebuild_started_at timestamptz
);
`,
};

/**
 * The active instance of each projection renews its lease row every few seconds from
 * the session that holds the projection's advisory lock (`backend_pid`). A standby
 * that finds the lease stale while that session still holds the lock ends the
 * session (pg_terminate_backend) and takes the lock: a host that stopped answering
 * without closing TCP would otherwise keep its projections until the kernel gives up.
 * Times are the database's clock (real time, as for webhook leases).
 */
export const projectionLeasesMigration: Migration = {
  id: 'event-store:0004_projection_leases',
  sql: `
CREATE TABLE projection_leases (
  projection text PRIMARY KEY,
  holder text NOT NULL,
  backend_pid integer NOT NULL,
  acquired_at timestamptz NOT NULL,
  renewed_at timestamptz NOT NULL
);
`,
};

/**
 * A rebuild asks the active instance of each projection it needs to hand it over: a
 * row here, with the asking session's pid. The active runner sees it at its next
 * lease renewal and stands down; a standby does not take a projection someone asked
 * for. A request counts only while its session lives, so a rebuild that died leaves
 * nothing behind that matters.
 */
export const projectionHandoversMigration: Migration = {
  id: 'event-store:0011_projection_handovers',
  sql: `
CREATE TABLE projection_handovers (
  projection text PRIMARY KEY,
  requester text NOT NULL,
  requester_pid integer NOT NULL,
  requested_at timestamptz NOT NULL
);
`,
};

/**
 * A count that grows each time a projection's read model is emptied with TRUNCATE (by
 * one per table emptied), never cleared: a reader that reads a model across several statements (a statement, an
 * export) compares it with the count its first statement read, and so finds a rebuild
 * that began and ended between two of them. Counted by count_projection_reset, a
 * trigger AFTER TRUNCATE on each read-model table (payments:0056), in the emptying
 * transaction, whoever empties it as a role that may write the checkpoints (a rebuild, a
 * migration, psql; a DELETE is not counted). The lock timeout: the
 * ALTER waits for a running ledger:verify or checksum, and everything that reads the
 * checkpoints would queue behind it; the start fails instead, and the next one retries.
 */
export const projectionResetsMigration: Migration = {
  id: 'event-store:0012_projection_resets',
  sql: `
SET LOCAL lock_timeout = '2s';
ALTER TABLE projection_checkpoints ADD COLUMN IF NOT EXISTS resets bigint NOT NULL DEFAULT 0;
CREATE OR REPLACE FUNCTION count_projection_reset() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO projection_checkpoints (projection, resets) VALUES (TG_ARGV[0], 1)
  ON CONFLICT (projection) DO UPDATE SET resets = projection_checkpoints.resets + 1;
  RETURN NULL;
END
$fn$;
`,
};
