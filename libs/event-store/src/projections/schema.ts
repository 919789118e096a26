import type { Migration } from '#platform/database';

/**
 * The projections' bookkeeping.
 *
 * - `projection_checkpoints`: where each projection stands in the log, and whether it is
 *   being rebuilt (`rebuild_started_at`). `resets` grows each time its read model is
 *   emptied with TRUNCATE (by one per table emptied) and is never cleared: a reader
 *   that reads a model across several statements (a statement, an export) compares it
 *   with the count its first statement read, and so finds a rebuild that began and ended
 *   between two of them. Counted by count_projection_reset, a trigger AFTER TRUNCATE on
 *   each read-model table, in the emptying transaction, whoever empties it (a rebuild, a
 *   migration, psql; a DELETE is not counted).
 * - `projection_leases`: the active instance of each projection renews its lease every
 *   few seconds from the session that holds the projection's advisory lock
 *   (`backend_pid`). A standby that finds the lease stale while that session still holds
 *   the lock ends the session (pg_terminate_backend) and takes the lock: a host that
 *   stopped answering without closing TCP would otherwise keep its projections until the
 *   kernel gives up. Times are the database's clock (real time, as for webhook leases).
 * - `projection_handovers`: a rebuild asks the active instance of each projection it
 *   needs to hand it over, with the asking session's pid. The runner sees it at its next
 *   renewal and stands down; a standby does not take a projection someone asked for. A
 *   request counts only while its session lives.
 * - `projection_deferred_indexes` and `projection_deferred_autovacuum` (decision 0095):
 *   the secondary indexes a rebuild has dropped from a projection's emptied tables, with
 *   the statement that makes each again, and the tables it took out of autovacuum while
 *   it fills them. Written in the transaction that empties the tables, deleted in the one
 *   that makes the indexes again (restoreDeferredIndexes): whenever a rebuild stops, they
 *   say what is missing, and whoever goes on with the projection makes it.
 */
export const projectionsMigration: Migration = {
  id: 'event-store:0002_projections',
  sql: `
CREATE TABLE projection_checkpoints (
  projection text PRIMARY KEY,
  commit_position numeric(20) NOT NULL DEFAULT 0,
  prepare_position numeric(20) NOT NULL DEFAULT 0,
  events_applied bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  rebuild_started_at timestamptz,
  resets bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION count_projection_reset() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  INSERT INTO projection_checkpoints (projection, resets) VALUES (TG_ARGV[0], 1)
  ON CONFLICT (projection) DO UPDATE SET resets = projection_checkpoints.resets + 1;
  RETURN NULL;
END
$fn$;

CREATE TABLE projection_leases (
  projection text PRIMARY KEY,
  holder text NOT NULL,
  backend_pid integer NOT NULL,
  acquired_at timestamptz NOT NULL,
  renewed_at timestamptz NOT NULL
);

CREATE TABLE projection_handovers (
  projection text PRIMARY KEY,
  requester text NOT NULL,
  requester_pid integer NOT NULL,
  requested_at timestamptz NOT NULL
);

CREATE TABLE projection_deferred_indexes (
  projection text NOT NULL,
  index_name text NOT NULL,
  create_statement text NOT NULL,
  deferred_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, index_name)
);

CREATE TABLE projection_deferred_autovacuum (
  projection text NOT NULL,
  table_name text NOT NULL,
  deferred_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (projection, table_name)
);
`,
};
