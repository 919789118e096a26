import { JSONSchema } from 'class-validator-jsonschema';
import { IsMoney, Optional } from '../../http/request-rules';

/** The body of POST /v1/invoices/{id}/refund (optional: none at all is a full refund). */
@JSONSchema({ description: 'Тело возврата (необязательно): без amount возвращается весь невозвращённый остаток' })
export class RefundInvoiceRequest {
  @Optional()
  @IsMoney({ positive: 'сумма возврата должна быть больше нуля', anySize: true })
  @JSONSchema({ description: 'Сумма частичного возврата; больше невозвращённого остатка: 422 refund_exceeds_amount' })
  amount?: string | number;
}
