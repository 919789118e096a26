import { IsIn } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookEventKind } from '#payments/merchants';
import { DELIVERY_STATUSES } from '#payments/events';
import type { DeliveryStatus } from '#payments/events';
import { Optional } from '../http/request-rules';
import { PeriodPageQuery } from '../http/period-page.request';

/** The query of GET /v1/events. */
export class ListEventsQuery extends PeriodPageQuery {
  @Optional()
  @IsIn(WEBHOOK_EVENTS)
  @JSONSchema({ description: 'Тип события' })
  type?: WebhookEventKind;

  @Optional()
  @IsIn(DELIVERY_STATUSES)
  @JSONSchema({
    description:
      'Состояние доставки вебхука: pending, delivered, failing (попытки не удались), endpoint_disabled (адрес отключён после 3 дней отказов), not_subscribed (проект не подписан)',
  })
  deliveryStatus?: DeliveryStatus;
}
