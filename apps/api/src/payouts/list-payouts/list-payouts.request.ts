import { IsIn, IsString } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { PAYOUT_STATUSES } from '#domain';
import type { PayoutStatus } from '#domain';
import { MaxLength, MinLength, Optional, StorableText } from '../../http/request-rules';
import { PageQuery } from '../../http/period-page.request';

/** The query of GET /v1/payouts. */
export class ListPayoutsQuery extends PageQuery {
  @Optional()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(128)
  @JSONSchema({
    description: 'Идентификатор заявки: ответ тогда одна выплата (объект Payout); 404 not_found, если её нет или она не в статусе status, когда он указан',
  })
  orderId?: string;

  @Optional()
  @IsIn(PAYOUT_STATUSES)
  @JSONSchema({ description: 'Статус выплаты' })
  status?: PayoutStatus;
}
