import { IsIn, IsOptional } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { METHOD_CODES } from '#domain';
import type { MethodCode } from '#domain';
import { Required } from '../http/request-rules';

export const PAYMENT_OUTCOMES = ['paid', 'failed'] as const;

/** The body of POST /admin/v1/invoices/{id}/payment: the acquirer's answer. */
export class PaymentResultRequest {
  @Required()
  @IsIn(PAYMENT_OUTCOMES)
  @JSONSchema({ description: 'Ответ эквайера' })
  outcome!: (typeof PAYMENT_OUTCOMES)[number];

  @IsOptional()
  @IsIn(METHOD_CODES)
  @JSONSchema({ description: 'Каким способом оплачено; без него: выбранный в счёте' })
  method?: MethodCode | null;
}
