import { IsIn, IsOptional } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { METHOD_CODES, PAYMENT_OUTCOMES } from '#domain';
import type { MethodCode, PaymentOutcome } from '#domain';
import { Required } from '../../http/request-rules';

/** The body of POST /admin/v1/invoices/{id}/payment: the acquirer's answer. */
export class PaymentResultRequest {
  @Required()
  @IsIn(PAYMENT_OUTCOMES)
  @JSONSchema({ description: 'Ответ эквайера' })
  outcome!: PaymentOutcome;

  @IsOptional()
  @IsIn(METHOD_CODES)
  @JSONSchema({ description: 'Каким способом оплачено; без него: выбранный в счёте' })
  method?: MethodCode | null;
}
