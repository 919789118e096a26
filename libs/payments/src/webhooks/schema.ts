import type { Migration } from '#platform/database';

/**
 * The durable webhook queue. One row per (event, project): its exact body is fixed
 * when it is enqueued, so every attempt sends the same bytes with the same delivery
 * id. Dispatchers claim due rows with FOR UPDATE SKIP LOCKED and a lease in real
 * time (`leased_until`), so several share the work and a dispatcher that dies mid-
 * attempt only delays that delivery until its lease runs out.
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
  -- attempts made before the last resend: the retry schedule starts again from there
  schedule_base integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  leased_until timestamptz,
  created_at timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_project ON webhook_deliveries (project_id, seq);

CREATE TABLE webhook_attempts (
  delivery_id uuid NOT NULL REFERENCES webhook_deliveries (id),
  attempt integer NOT NULL,
  at timestamptz NOT NULL,
  status_code integer,
  body text,
  duration_ms integer NOT NULL,
  error text,
  PRIMARY KEY (delivery_id, attempt)
);
`,
};

/**
 * Each claim of a delivery takes a fresh `lease_token`; an attempt's outcome moves
 * the delivery only while the row still carries that token (a later claim after the
 * lease ran out, or the operator's resend, replaces it). An attempt that comes back
 * after that is still kept in the history, marked `superseded`.
 */
export const webhookLeaseTokenMigration: Migration = {
  id: 'payments:0015_webhook_lease_token',
  sql: `
ALTER TABLE webhook_deliveries ADD COLUMN lease_token uuid;
ALTER TABLE webhook_attempts ADD COLUMN superseded boolean NOT NULL DEFAULT false;
`,
};

/**
 * `attempts_recorded`: how many attempts of the delivery are in its history, superseded
 * ones included (the number of its last attempt). The dispatcher records a batch of
 * attempts in one statement: the delivery rows are locked in that statement, and a
 * count of the history read in it would come from the statement's snapshot, taken
 * before the locks were granted (another dispatcher's attempts committed meanwhile
 * would be missed and their numbers taken twice). The counter is on the locked row,
 * read as it is after the lock.
 */
export const webhookAttemptsRecordedMigration: Migration = {
  id: 'payments:0027_webhook_attempts_recorded',
  sql: `
ALTER TABLE webhook_deliveries ADD COLUMN attempts_recorded integer NOT NULL DEFAULT 0;
UPDATE webhook_deliveries d SET attempts_recorded = h.last
FROM (SELECT delivery_id, max(attempt) AS last FROM webhook_attempts GROUP BY delivery_id) AS h
WHERE h.delivery_id = d.id;
`,
};

/**
 * The pending deliveries by URL and due time. A claim that finds the earliest due rows
 * taken by URLs it leaves out (a stuck or busy receiver's backlog) looks behind them
 * URL by URL through this index, one descent per URL, instead of reading that backlog
 * row by row in the due-time index (decision 0094).
 */
export const webhookDeliveriesByUrlMigration: Migration = {
  id: 'payments:0029_webhook_deliveries_by_url',
  sql: `
CREATE INDEX webhook_deliveries_url_due ON webhook_deliveries (url, next_attempt_at) WHERE status = 'pending';
`,
};

/**
 * Free space on the queue's pages (decision 0094): a claim writes only the lease
 * (`leased_until`, `lease_token`, in no index), so with room on the row's page its new
 * version is a heap-only tuple (HOT) and no index gets a new entry; on full pages
 * (the default fillfactor 100) every claim added an entry to each of the queue's six
 * indexes. Applies to pages filled from now on.
 */
export const webhookDeliveriesFillfactorMigration: Migration = {
  id: 'payments:0030_webhook_deliveries_fillfactor',
  sql: `
ALTER TABLE webhook_deliveries SET (fillfactor = 50);
`,
};

/**
 * The pending deliveries apart from the history (decision 0094). `webhook_queue` holds
 * one row per pending delivery: what the claims read and write (URL, due time, the
 * lease and its token, the attempts counted and the schedule's base). A delivery
 * delivered or failed for good leaves it (a delete adds no index entry), and its
 * record in `webhook_deliveries` changes only columns no index of that table covers
 * (status, attempts, next attempt), so with room on the page the outcome is a
 * heap-only update. The retention sweep finds old deliveries by `created_at` alone
 * (an index whose predicate named `status` made every outcome a new index entry).
 * Fillfactor 40: a queue
 * row grows by its lease (about 28 bytes) when claimed, and every row of a page can
 * then still take its new version on that page (heap-only, as decision 0094). No
 * foreign key to the record (its check was a trigger and a row lock per delivery
 * enqueued, about 60 µs each): a queue row exists exactly while its record is
 * `pending`, and every writer keeps it so in one statement (the outbox inserts both,
 * an outcome deletes the queue row as it finishes the record, the resend puts it back
 * as it makes the record pending; retention deletes only records that are not).
 */
export const webhookQueueApartMigration: Migration = {
  id: 'payments:0031_webhook_queue_apart_from_history',
  sql: `
CREATE TABLE webhook_queue (
  -- the delivery's id (no foreign key: see above)
  id uuid PRIMARY KEY,
  -- the delivery's seq: the order of deliveries due at the same moment
  seq bigint NOT NULL,
  url text NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  attempts_made integer NOT NULL,
  -- attempts made before the last resend: the retry schedule starts again from there
  schedule_base integer NOT NULL,
  leased_until timestamptz,
  lease_token uuid
) WITH (fillfactor = 40);
INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base, leased_until, lease_token)
SELECT id, seq, url, coalesce(next_attempt_at, created_at), attempts_made, schedule_base, leased_until, lease_token
FROM webhook_deliveries WHERE status = 'pending';
CREATE INDEX webhook_queue_due ON webhook_queue (next_attempt_at);
CREATE INDEX webhook_queue_url_due ON webhook_queue (url, next_attempt_at);
DROP INDEX webhook_deliveries_due;
DROP INDEX webhook_deliveries_url_due;
DROP INDEX webhook_deliveries_finished;
CREATE INDEX webhook_deliveries_by_age ON webhook_deliveries (created_at);
ALTER TABLE webhook_deliveries DROP COLUMN leased_until, DROP COLUMN lease_token, DROP COLUMN schedule_base;
`,
};

/**
 * The attempts' history without a foreign key to its delivery (decision 0094): the
 * check was a trigger and a row lock per attempt recorded. Attempts are inserted only
 * by the dispatcher's record statement, for deliveries it holds locked in that
 * statement, and deleted with their delivery only by the retention sweep, which
 * locks the delivery and checks its attempts again under that lock.
 */
export const webhookAttemptsWithoutForeignKeyMigration: Migration = {
  id: 'payments:0032_webhook_attempts_without_foreign_key',
  sql: `
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
`,
};

/**
 * The deliveries of one event found by its id: the operator's `GET
 * /admin/v1/webhook-deliveries?eventId=` (the runbook of a failing receiver) walked
 * every newer delivery of the gateway, up to the retention's 30 days of them, to find
 * the one or few of that event. The id never changes, so a delivery's outcome stays a
 * heap-only update (decision 0094); the index costs one entry per delivery enqueued.
 */
export const webhookDeliveriesByEventMigration: Migration = {
  id: 'payments:0045_webhook_deliveries_by_event',
  sql: `
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
`,
};

/**
 * Whether any attempt of a delivery was acknowledged (2xx), kept on its record: GET
 * /v1/events shows a delivery the operator resent after it was delivered as delivered
 * (its record is pending or failed again), and a status filter over a project's events
 * reads this column instead of each delivery's history. Set by the dispatcher's record
 * statement, never cleared; in no index, so an outcome stays a heap-only update.
 */
export const webhookDeliveriesAcknowledgedMigration: Migration = {
  id: 'payments:0047_webhook_deliveries_acknowledged',
  sql: `
ALTER TABLE webhook_deliveries ADD COLUMN acknowledged boolean NOT NULL DEFAULT false;
UPDATE webhook_deliveries d SET acknowledged = true
WHERE d.status = 'delivered' OR EXISTS (SELECT 1 FROM webhook_attempts a WHERE a.delivery_id = d.id AND a.status_code BETWEEN 200 AND 299);
`,
};
