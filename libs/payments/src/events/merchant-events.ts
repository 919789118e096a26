import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';

/**
 * The merchant's events (GET /v1/events): one row per webhook event and project it is
 * meant for, subscribed or not, with the exact body its webhook has (or would have).
 * Written by the webhook outbox in the transaction that enqueues the deliveries, so an
 * event is listable exactly when its delivery exists; kept WEBHOOK_RETENTION_DAYS after
 * it was recorded (`recorded_at`, its delivery's `created_at`: swept no later than the
 * delivery, and an old event the outbox reached late is kept as long as its webhook).
 */
export const merchantEventsMigration: Migration = {
  id: 'payments:0015_merchant_events',
  sql: `
CREATE TABLE merchant_events (
  seq bigint GENERATED ALWAYS AS IDENTITY,
  id uuid NOT NULL,
  project_id uuid NOT NULL,
  type text NOT NULL,
  is_test boolean NOT NULL,
  created_at timestamptz NOT NULL,
  body text NOT NULL,
  -- its webhook delivery; null: the project was not subscribed to it
  delivery_id uuid,
  PRIMARY KEY (project_id, id)
);
CREATE INDEX merchant_events_page ON merchant_events (project_id, is_test, seq);
CREATE INDEX merchant_events_by_age ON merchant_events (created_at);
`,
};

/** `merchant_events.recorded_at`: when the outbox recorded it, what the retention sweep goes by. */
export const merchantEventsRecordedAtMigration: Migration = {
  id: 'payments:0019_merchant_events_recorded_at',
  sql: `
ALTER TABLE merchant_events ADD COLUMN recorded_at timestamptz;
UPDATE merchant_events SET recorded_at = created_at;
ALTER TABLE merchant_events ALTER COLUMN recorded_at SET NOT NULL;
DROP INDEX merchant_events_by_age;
CREATE INDEX merchant_events_by_record ON merchant_events (recorded_at);
`,
};

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failing', 'endpoint_disabled', 'not_subscribed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One event to record: the outbox's rendered webhook for one project. */
export interface MerchantEventRow {
  readonly eventId: string;
  readonly projectId: string;
  readonly kind: string;
  readonly isTest: boolean;
  readonly createdAt: string;
  readonly body: string;
  readonly deliveryId: string | null;
}

/** Inside the outbox's transaction, in log order, recorded at `now`; an event already recorded for the project stays as it is. */
export async function recordMerchantEvents(tx: PoolClient, rows: readonly MerchantEventRow[], now: Date): Promise<void> {
  if (rows.length === 0) return;
  await tx.query(
    `INSERT INTO merchant_events (id, project_id, type, is_test, created_at, body, delivery_id, recorded_at)
     SELECT e.id, e.project_id, e.type, e.is_test, e.created_at, e.body, e.delivery_id, $8
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::boolean[], $5::timestamptz[], $6::text[], $7::uuid[]) WITH ORDINALITY
       AS e(id, project_id, type, is_test, created_at, body, delivery_id, ord)
     ORDER BY e.ord ON CONFLICT DO NOTHING`,
    [
      rows.map((r) => r.eventId),
      rows.map((r) => r.projectId),
      rows.map((r) => r.kind),
      rows.map((r) => r.isTest),
      rows.map((r) => r.createdAt),
      rows.map((r) => r.body),
      rows.map((r) => r.deliveryId),
      now,
    ],
  );
}

/** Deletes up to `batch` events recorded before `horizon`; answers how many. */
export async function sweepMerchantEvents(pool: Pick<Pool, 'query'>, horizon: Date, batch = 1000): Promise<number> {
  const r = await pool.query(
    `DELETE FROM merchant_events e USING (SELECT project_id, id FROM merchant_events WHERE recorded_at < $1 ORDER BY recorded_at LIMIT $2) old
     WHERE e.project_id = old.project_id AND e.id = old.id`,
    [horizon, batch],
  );
  return r.rowCount ?? 0;
}
