import { Money } from '../http/request-fields';
import { RequestSchema } from '../http/request-validation';

/** The body of POST /v1/invoices/{id}/refund (optional: none at all is a full refund). */
@RequestSchema({ description: 'Тело возврата (необязательно): без amount возвращается весь невозвращённый остаток' })
export class RefundInvoiceRequest {
  @Money({ positiveMessage: 'сумма возврата должна быть больше нуля', description: 'Сумма частичного возврата' })
  amount?: string | number;
}
