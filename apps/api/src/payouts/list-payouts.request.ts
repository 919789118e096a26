import { PAYOUT_STATUSES } from '#domain';
import type { PayoutStatus } from '#domain';
import { pageSeq } from '../http/cursor';
import { Cursor, OneOf, QueryInteger, Text } from '../http/request-fields';

/** The query of GET /v1/payouts. */
export class ListPayoutsQuery {
  @Text({ max: 128, description: 'Идентификатор заявки: ответ тогда одна выплата (объект Payout), 404 not_found, если её нет' })
  orderId?: string;

  @OneOf(PAYOUT_STATUSES, { description: 'Статус выплаты' })
  status?: PayoutStatus;

  @QueryInteger({ min: 1, max: 100, default: 20, description: 'Размер страницы' })
  limit?: string;

  @Cursor(pageSeq, { description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}
