import { WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookEventKind } from '#payments/merchants';
import { pageSeq } from '../http/cursor';
import { Cursor, OneOf, QueryInteger, Uuid } from '../http/request-fields';

/** The query of GET /admin/v1/webhook-deliveries. */
export class ListWebhookDeliveriesQuery {
  @Uuid({ description: 'Проект' })
  projectId?: string;

  @OneOf(WEBHOOK_EVENTS, { description: 'Тип события' })
  eventType?: WebhookEventKind;

  @Uuid({ description: 'Событие' })
  eventId?: string;

  @QueryInteger({ min: 1, max: 100, default: 50, description: 'Размер страницы' })
  limit?: string;

  @Cursor(pageSeq, { description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}
