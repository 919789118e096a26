import { IsIn, IsString } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { INVOICE_STATUSES } from '#domain';
import type { InvoiceStatus } from '#domain';
import { IsoInstant, MaxLength, MinLength, Optional, StorableText } from '../../http/request-rules';
import { PageQuery } from '../../http/period-page.request';

/** The query of GET /v1/invoices. */
export class ListInvoicesQuery extends PageQuery {
  @Optional()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(128)
  @JSONSchema({ description: 'Номер заказа; тогда в ответе 0 или 1 счёт' })
  orderId?: string;

  @Optional()
  @IsIn(INVOICE_STATUSES)
  @JSONSchema({ description: 'Статус счёта' })
  status?: InvoiceStatus;

  @Optional()
  @IsoInstant()
  @JSONSchema({ description: 'Созданы в этот момент или позже (включительно)' })
  from?: string;

  @Optional()
  @IsoInstant()
  @JSONSchema({ description: 'Созданы раньше этого момента (не включительно); не раньше from (иначе 400 invalid_range)' })
  to?: string;
}
