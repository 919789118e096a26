import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { READ_MODELS } from '../payments.tokens';
import type { DeliveryStatus } from './merchant-events';

/**
 * The delivery status of an event (e: merchant_events, d: its delivery, p: its project), as the OpenAPI defines it.
 * Delivered: an attempt was acknowledged (2xx), kept on the record (`acknowledged`) even after the operator resent it
 * (the record pending or failed again). Otherwise: endpoint_disabled while the project's endpoint is disabled
 * (endpoint-health.ts); pending before any attempt; failing once an attempt failed and none succeeded.
 */
const STATUS_SQL = `CASE WHEN e.delivery_id IS NULL THEN 'not_subscribed' WHEN d.status = 'delivered' OR d.acknowledged THEN 'delivered'
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

/** A project's events in a mode, the last queued first (the order the outbox recorded them). */
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
