import { METHOD_CODES } from '#domain';
import type { MethodCode } from '#domain';
import { OneOf } from '../http/request-fields';

/** The body of POST /admin/v1/invoices/{id}/payment: the acquirer's answer. */
export class PaymentResultRequest {
  @OneOf(['paid', 'failed'], { required: true, description: 'Ответ эквайера' })
  outcome!: 'paid' | 'failed';

  @OneOf(METHOD_CODES, { nullable: true, description: 'Каким способом оплачено; без него: выбранный в счёте' })
  method?: MethodCode | null;
}
