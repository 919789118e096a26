import { IsIn, IsString, IsUUID } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { WEBHOOK_EVENTS } from '#payments/merchants';
import type { WebhookEventKind } from '#payments/merchants';
import { IsCursor, IsQueryInteger, MaxLength, Optional, StorableText } from '../http/request-rules';

/** The query of GET /admin/v1/webhook-deliveries. */
export class ListWebhookDeliveriesQuery {
  @Optional()
  @IsString()
  @StorableText()
  @MaxLength(36)
  @IsUUID('loose')
  @JSONSchema({ description: 'Проект' })
  projectId?: string;

  @Optional()
  @IsIn(WEBHOOK_EVENTS)
  @JSONSchema({ description: 'Тип события' })
  eventType?: WebhookEventKind;

  @Optional()
  @IsString()
  @StorableText()
  @MaxLength(36)
  @IsUUID('loose')
  @JSONSchema({ description: 'Событие' })
  eventId?: string;

  @Optional()
  @IsQueryInteger(1, 100)
  @JSONSchema({ description: 'Размер страницы', default: 50 })
  limit?: string;

  @Optional()
  @IsCursor()
  @JSONSchema({ description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}
