import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import { READ_MODELS } from '../payments.tokens';

/**
 * The merchant's events (GET /v1/events): one row per webhook event and project it is
 * meant for, subscribed or not, with the exact body its webhook has (or would have).
 * Written by the webhook outbox in the transaction that enqueues the deliveries, so an
 * event is listable exactly when its delivery exists; kept WEBHOOK_RETENTION_DAYS after
 * it happened (swept before its delivery: an event happens before it is enqueued).
 * The seed copies the deliveries already there (events of unsubscribed projects from
 * before this table are not known).
 */
export const merchantEventsMigration: Migration = {
  id: 'payments:0039_merchant_events',
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
INSERT INTO merchant_events (id, project_id, type, is_test, created_at, body, delivery_id)
SELECT event_id, project_id, event_type, is_test, COALESCE((body::json->>'createdAt')::timestamptz, created_at), body, id FROM webhook_deliveries ORDER BY seq;
CREATE INDEX merchant_events_page ON merchant_events (project_id, is_test, seq);
CREATE INDEX merchant_events_by_age ON merchant_events (created_at);
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

/** Inside the outbox's transaction, in log order; an event already recorded for the project stays as it is. */
export async function recordMerchantEvents(tx: PoolClient, rows: readonly MerchantEventRow[]): Promise<void> {
  if (rows.length === 0) return;
  await tx.query(
    `INSERT INTO merchant_events (id, project_id, type, is_test, created_at, body, delivery_id)
     SELECT e.id, e.project_id, e.type, e.is_test, e.created_at, e.body, e.delivery_id
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
    ],
  );
}

/** Deletes up to `batch` events that happened before `horizon`; answers how many. */
export async function sweepMerchantEvents(pool: Pick<Pool, 'query'>, horizon: Date, batch = 1000): Promise<number> {
  const r = await pool.query(
    `DELETE FROM merchant_events e USING (SELECT project_id, id FROM merchant_events WHERE created_at < $1 ORDER BY created_at LIMIT $2) old
     WHERE e.project_id = old.project_id AND e.id = old.id`,
    [horizon, batch],
  );
  return r.rowCount ?? 0;
}

/**
 * The delivery status of an event (e: merchant_events, d: its delivery, p: its project). A failed attempt and no
 * success yet is failing; not delivered while the project's endpoint is disabled (endpoint-health.ts), endpoint_disabled.
 */
const STATUS_SQL = `CASE WHEN e.delivery_id IS NULL THEN 'not_subscribed' WHEN d.status = 'delivered' THEN 'delivered'
  WHEN p.webhook_disabled_at IS NOT NULL THEN 'endpoint_disabled' WHEN d.status = 'pending' AND d.attempts_made = 0 THEN 'pending' ELSE 'failing' END`;

export interface MerchantEvent {
  readonly seq: number;
  /** The webhook's body, byte for byte. */
  readonly body: string;
  readonly deliveryStatus: DeliveryStatus;
}

export interface MerchantEventFilter {
  readonly projectId: string;
  readonly isTest: boolean;
  readonly type?: string;
  readonly from?: Date;
  readonly to?: Date;
  readonly deliveryStatus?: DeliveryStatus;
  /** An event id: that one event (GET /v1/events/{id}). */
  readonly id?: string;
  readonly before: number | null;
  readonly limit: number;
}

/** A project's events in a mode, newest first (in the order the outbox recorded them). */
export class ListMerchantEvents extends Query<{ readonly items: readonly MerchantEvent[]; readonly hasMore: boolean }> {
  constructor(readonly filter: MerchantEventFilter) {
    super();
  }
}

@QueryHandler(ListMerchantEvents)
export class ListMerchantEventsHandler implements IQueryHandler<ListMerchantEvents> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  async execute({ filter }: ListMerchantEvents): Promise<{ readonly items: readonly MerchantEvent[]; readonly hasMore: boolean }> {
    const params: unknown[] = [filter.projectId, filter.isTest];
    const where = ['e.project_id = $1', 'e.is_test = $2'];
    const add = (sql: string, value: unknown) => where.push(sql.replace('?', `$${params.push(value)}`));
    if (filter.id !== undefined) add('e.id = ?', filter.id);
    if (filter.type !== undefined) add('e.type = ?', filter.type);
    if (filter.from !== undefined) add('e.created_at >= ?', filter.from);
    if (filter.to !== undefined) add('e.created_at < ?', filter.to);
    if (filter.deliveryStatus !== undefined) add(`${STATUS_SQL} = ?`, filter.deliveryStatus);
    if (filter.before !== null) add('e.seq < ?', filter.before);
    const rows = await this.pool.query<{ seq: string; body: string; status: DeliveryStatus }>(
      `SELECT e.seq, e.body, ${STATUS_SQL} AS status
       FROM merchant_events e LEFT JOIN webhook_deliveries d ON d.id = e.delivery_id LEFT JOIN projects p ON p.id = e.project_id
       WHERE ${where.join(' AND ')} ORDER BY e.seq DESC LIMIT $${params.push(filter.limit + 1)}`,
      params,
    );
    return {
      items: rows.rows.slice(0, filter.limit).map((r) => ({ seq: Number(r.seq), body: r.body, deliveryStatus: r.status })),
      hasMore: rows.rows.length > filter.limit,
    };
  }
}
