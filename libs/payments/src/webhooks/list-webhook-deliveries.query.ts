import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { listWebhookDeliveries, WebhookDeliveryFilter, WebhookDeliveryRow } from './webhook-outbox';
import { READ_MODELS } from '../payments.tokens';

/** The webhook delivery history with every attempt, newest first, a page at a time. */
export class ListWebhookDeliveries extends Query<{ readonly items: readonly WebhookDeliveryRow[]; readonly hasMore: boolean }> {
  constructor(readonly filter: WebhookDeliveryFilter) {
    super();
  }
}

@QueryHandler(ListWebhookDeliveries)
export class ListWebhookDeliveriesHandler implements IQueryHandler<ListWebhookDeliveries> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(query: ListWebhookDeliveries): Promise<{ readonly items: readonly WebhookDeliveryRow[]; readonly hasMore: boolean }> {
    return listWebhookDeliveries(this.pool, query.filter);
  }
}
