import type { Migration } from '#platform/database';

/**
 * The durable webhook queue and its history (decision 0094).
 *
 * - `webhook_deliveries`: one row per (event, project), its exact body fixed when it is
 *   enqueued, so every attempt sends the same bytes with the same delivery id.
 *   `attempts_recorded` counts the attempts in its history, superseded ones included:
 *   the dispatcher records a batch of attempts in one statement that locks the delivery
 *   rows, and a count of the history read in it would come from a snapshot taken before
 *   the locks (another dispatcher's attempts missed, their numbers taken twice); the
 *   counter on the locked row is read as it is after the lock. `acknowledged`: whether
 *   any attempt was answered 2xx, so GET /v1/events shows a delivery the operator resent
 *   after it was delivered as delivered, and a status filter reads no history. An
 *   outcome changes only columns no index covers: with room on the page (fillfactor
 *   50) it is a heap-only update. The retention sweep finds old deliveries by
 *   `created_at` alone; the operator's `?eventId=` by `event_id`.
 * - `webhook_queue`: one row per pending delivery, what the claims read and write (URL,
 *   due time, the lease and its token, the attempts and the schedule's base: attempts
 *   made before the last resend, from where the retry schedule starts again).
 *   Dispatchers claim due rows with FOR UPDATE SKIP LOCKED and a lease in real time, so
 *   several share the work and one that dies mid-attempt delays that delivery only until
 *   its lease runs out. Each claim takes a fresh `lease_token`; an outcome moves the
 *   delivery only while the row still carries it (else the attempt is kept in the
 *   history, `superseded`). A claim that finds the earliest due rows taken by URLs it
 *   leaves out looks behind them URL by URL (`webhook_queue_url_due`). Fillfactor 40: a
 *   row grows by its lease when claimed, and every row of a page can still take its new
 *   version there. A finished delivery leaves the queue (a delete adds no index entry).
 * - No foreign keys between the three (each check was a trigger and a row lock per row):
 *   a queue row exists exactly while its record is `pending`, and every writer keeps it
 *   so in one statement (the outbox inserts both, an outcome deletes the queue row as it
 *   finishes the record, the resend puts it back); attempts are inserted only by the
 *   record statement for deliveries it holds locked, and deleted with their delivery
 *   only by the retention sweep, which checks them again under the delivery's lock.
 */
export const webhookQueueMigration: Migration = {
  id: 'payments:0011_webhook_deliveries',
  sql: `
CREATE TABLE webhook_deliveries (
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id uuid PRIMARY KEY,
  event_id uuid NOT NULL,
  event_type text NOT NULL,
  project_id uuid NOT NULL,
  url text NOT NULL,
  body text NOT NULL,
  is_test boolean NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts_made integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  created_at timestamptz NOT NULL,
  attempts_recorded integer NOT NULL DEFAULT 0,
  acknowledged boolean NOT NULL DEFAULT false
) WITH (fillfactor = 50);
CREATE INDEX webhook_deliveries_project ON webhook_deliveries (project_id, seq);
CREATE INDEX webhook_deliveries_by_age ON webhook_deliveries (created_at);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
  delivery_id uuid NOT NULL,
  attempt integer NOT NULL,
  at timestamptz NOT NULL,
  status_code integer,
  body text,
  duration_ms integer NOT NULL,
  error text,
  superseded boolean NOT NULL DEFAULT false,
  PRIMARY KEY (delivery_id, attempt)
);

CREATE TABLE webhook_queue (
  id uuid PRIMARY KEY,
  seq bigint NOT NULL,
  url text NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  attempts_made integer NOT NULL,
  schedule_base integer NOT NULL,
  leased_until timestamptz,
  lease_token uuid
) WITH (fillfactor = 40);
CREATE INDEX webhook_queue_due ON webhook_queue (next_attempt_at);
CREATE INDEX webhook_queue_url_due ON webhook_queue (url, next_attempt_at);
`,
};

/**
 * `webhook_outbox_reach`: the furthest position in the log the webhook outbox has
 * reached (one row), which a checkpoint moved back by hand does not move. The outbox
 * does not enqueue an event at or below it that is older than WEBHOOK_RETENTION_DAYS
 * (its delivery may have been swept, and must not be sent twice); an event above it,
 * however old, is enqueued (after a long stop, a webhook is late, not lost).
 */
export const webhookOutboxReachMigration: Migration = {
  id: 'payments:0017_webhook_outbox_reach',
  sql: `
CREATE TABLE webhook_outbox_reach (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  commit_position numeric(20) NOT NULL,
  prepare_position numeric(20) NOT NULL
);
`,
};

/**
 * On a database the outbox already followed, its reach starts at least at its checkpoint (0017 made the table empty:
 * a checkpoint moved back before the outbox's first batch would have set it low). Forward only.
 */
export const webhookOutboxReachFromCheckpointMigration: Migration = {
  id: 'payments:0020_webhook_outbox_reach_from_checkpoint',
  sql: `
INSERT INTO webhook_outbox_reach (commit_position, prepare_position)
SELECT commit_position, prepare_position FROM projection_checkpoints WHERE projection = 'webhook_outbox'
ON CONFLICT (singleton) DO UPDATE SET commit_position = excluded.commit_position, prepare_position = excluded.prepare_position
WHERE (webhook_outbox_reach.commit_position, webhook_outbox_reach.prepare_position) < (excluded.commit_position, excluded.prepare_position);
-- A gateway process of the code before recorded_at (a rolling deploy) still records events.
ALTER TABLE merchant_events ALTER COLUMN recorded_at SET DEFAULT now();
`,
};

/**
 * `webhook_deliveries.addressed_at`: when a resend last sent the delivery to another URL than
 * its attempts so far went to (null: none did). Its earlier attempts were made at the old URL.
 */
export const webhookDeliveryAddressedAtMigration: Migration = {
  id: 'payments:0018_webhook_delivery_addressed_at',
  sql: `ALTER TABLE webhook_deliveries ADD COLUMN addressed_at timestamptz;`,
};
