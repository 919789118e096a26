import { IsIn, IsString } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookEventKind } from '#payments/merchants';
import { DELIVERY_STATUSES } from '#payments/events';
import type { DeliveryStatus } from '#payments/events';
import { IsCursor, IsIsoDateTime, IsQueryInteger, MaxLength, Optional, StorableText } from '../http/request-rules';

/** The query of GET /v1/events. */
export class ListEventsQuery {
  @Optional()
  @IsIn(WEBHOOK_EVENTS)
  @JSONSchema({ description: 'Тип события' })
  type?: WebhookEventKind;

  @Optional()
  @IsIn(DELIVERY_STATUSES)
  @JSONSchema({ description: 'Состояние доставки вебхука: pending, delivered, failing (попытки не удались), not_subscribed (проект не подписан)' })
  deliveryStatus?: DeliveryStatus;

  @Optional()
  @IsString()
  @StorableText()
  @MaxLength(40)
  @IsIsoDateTime()
  @JSONSchema({ description: 'Произошли в этот момент или позже (включительно)' })
  from?: string;

  @Optional()
  @IsString()
  @StorableText()
  @MaxLength(40)
  @IsIsoDateTime()
  @JSONSchema({ description: 'Произошли раньше этого момента (не включительно)' })
  to?: string;

  @Optional()
  @IsQueryInteger(1, 100)
  @JSONSchema({ description: 'Размер страницы', default: 20 })
  limit?: string;

  @Optional()
  @IsCursor()
  @JSONSchema({ description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}
