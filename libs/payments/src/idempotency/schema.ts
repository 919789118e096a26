import type { Migration } from '#platform/database';

/**
 * Idempotency keys of merchant POSTs, per API key pair and mode: the request's
 * fingerprint (method, path, exact raw body), whether it is still running (and who
 * runs it until when) or its answer (status and body). Logged: a key must survive a
 * restart, since retries come exactly then. Swept after the retention (24 h).
 */
export const idempotencyKeysMigration: Migration = {
  id: 'payments:0013_idempotency_keys',
  sql: `
CREATE TABLE idempotency_keys (
  key_id uuid NOT NULL,
  mode text NOT NULL CHECK (mode IN ('test', 'live')),
  idempotency_key text NOT NULL,
  fingerprint text NOT NULL,
  state text NOT NULL CHECK (state IN ('started', 'completed')),
  claim uuid NOT NULL,
  lease_until timestamptz NOT NULL,
  status integer,
  body text,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  PRIMARY KEY (key_id, mode, idempotency_key),
  CHECK ((state = 'completed') = (status IS NOT NULL AND body IS NOT NULL))
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);
`,
};

/**
 * The key pairs of a project, for the trigger of payments:0050, which looks them up on
 * every row the previous version claims, under a lock per key (no index had api_keys by
 * project for revoked pairs). Built concurrently, before that migration: keys are issued
 * meanwhile.
 */
export const apiKeysByProjectMigration: Migration = {
  id: 'payments:0054_api_keys_by_project',
  sql: `CREATE INDEX CONCURRENTLY IF NOT EXISTS api_keys_project ON api_keys (project_id)`,
  concurrentIndex: 'api_keys_project',
};

/**
 * Idempotency keys per project and mode, not per key pair: a retry sent with the new
 * pair after a key rotation is still the same operation. Expand only, in three steps so
 * that the previous version goes on claiming and reading keys during a rolling upgrade
 * (each step holds the table only briefly): this one adds `project_id` (metadata only)
 * and the trigger that gives the previous version's rows (claimed by the primary key,
 * `key_id` stays: the pair that names the keyed steps, see KeyedRequest) their project,
 * and refuses such a row (23505, as the unique index will) when another pair of the
 * project already holds the key, so no duplicate can appear before the index is built
 * (one key at a time: an advisory lock per key). A row of a pair no longer known keeps a
 * null project and is swept after the retention.
 */
export const idempotencyKeysByProjectMigration: Migration = {
  id: 'payments:0050_idempotency_keys_by_project',
  sql: `
ALTER TABLE idempotency_keys ADD COLUMN project_id uuid;
CREATE FUNCTION idempotency_keys_project() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.project_id IS NULL THEN
    NEW.project_id := (SELECT project_id FROM api_keys WHERE id = NEW.key_id);
    IF NEW.project_id IS NOT NULL THEN
      PERFORM pg_advisory_xact_lock(hashtext('idempotency_keys'), hashtext(NEW.project_id::text || ' ' || NEW.mode || ' ' || NEW.idempotency_key));
      IF EXISTS (SELECT 1 FROM api_keys a JOIN idempotency_keys k ON k.key_id = a.id
                 WHERE a.project_id = NEW.project_id AND a.id <> NEW.key_id AND k.mode = NEW.mode AND k.idempotency_key = NEW.idempotency_key) THEN
        RAISE unique_violation USING MESSAGE = 'idempotency key held by another key pair of the project';
      END IF;
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER idempotency_keys_project BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION idempotency_keys_project();
`,
};

/**
 * The project of every row from before payments:0050. Two pairs of one project that used
 * one key (before a rotation) keep the newest pair's row: the retries the merchant sends
 * now come with it, so the answer they already got stays the key's answer (`sql`, its
 * own transaction; the trigger of 0050 lets no new collision in after it). Then the
 * project is filled 1,000 rows per committed batch, oldest first: one statement over
 * the table would hold every old row locked until it ends, and the previous version's
 * sweep, takeovers and answers of those rows would wait for it (past the statement
 * timeout on a large table). Filled here rather than lazily by the new code, which
 * would then have to look a key up under both namings.
 */
export const idempotencyKeysProjectBackfillMigration: Migration = {
  id: 'payments:0052_idempotency_keys_project_backfill',
  sql: `
DELETE FROM idempotency_keys k USING api_keys a, idempotency_keys o, api_keys b
WHERE a.id = k.key_id AND b.id = o.key_id AND b.project_id = a.project_id
  AND o.mode = k.mode AND o.idempotency_key = k.idempotency_key
  AND (b.created_at, b.id) > (a.created_at, a.id);
`,
  // Its rows are those it took up (filled, or deleted meanwhile by the previous version's sweep): the batches end only when
  // no row is left to fill, not at one whose rows the sweep happened to delete first. Rows are updated by their address
  // (ctid, a TID scan), so a batch reads its 1,000 rows, not every row still to fill (a row changed meanwhile waits for the next).
  batch: `
WITH todo AS (
  SELECT o.ctid AS row, b.project_id FROM idempotency_keys o JOIN api_keys b ON b.id = o.key_id
  WHERE o.project_id IS NULL ORDER BY o.created_at LIMIT 1000),
filled AS (
  UPDATE idempotency_keys k SET project_id = t.project_id FROM todo t WHERE k.ctid = t.row AND k.project_id IS NULL RETURNING 1)
SELECT (SELECT count(*) FROM filled) AS filled FROM todo
`,
};

/**
 * The rows still without a project, oldest first, built concurrently before the backfill:
 * each of its batches then reads its 1,000 rows from here instead of walking past every
 * row already filled (quadratic on a large table). Empty once filled: rows written since
 * 0050 have their project.
 */
export const idempotencyKeysUnfilledMigration: Migration = {
  id: 'payments:0055_idempotency_keys_unfilled',
  sql: `CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_unfilled ON idempotency_keys (created_at) WHERE project_id IS NULL`,
  concurrentIndex: 'idempotency_keys_unfilled',
};

/** The key's scope, built concurrently: keys are claimed meanwhile (the trigger of payments:0050 keeps them unique). */
export const idempotencyKeysProjectScopeMigration: Migration = {
  id: 'payments:0053_idempotency_keys_project_scope',
  sql: `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_project_scope ON idempotency_keys (project_id, mode, idempotency_key) WHERE project_id IS NOT NULL`,
  concurrentIndex: 'idempotency_keys_project_scope',
};
