import { INVOICE_STATUSES } from '#domain';
import type { InvoiceStatus } from '#domain';
import { pageSeq } from '../http/cursor';
import { Cursor, DateTime, OneOf, QueryInteger, Text } from '../http/request-fields';

/** The query of GET /v1/invoices. */
export class ListInvoicesQuery {
  @Text({ max: 128, description: 'Номер заказа; тогда в ответе 0 или 1 счёт' })
  orderId?: string;

  @OneOf(INVOICE_STATUSES, { description: 'Статус счёта' })
  status?: InvoiceStatus;

  @DateTime({ description: 'Созданы в этот момент или позже (включительно)' })
  from?: string;

  @DateTime({ description: 'Созданы раньше этого момента (не включительно)' })
  to?: string;

  @QueryInteger({ min: 1, max: 100, default: 20, description: 'Размер страницы' })
  limit?: string;

  @Cursor(pageSeq, { description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}
