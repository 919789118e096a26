import { PAYOUT_METHODS } from '#domain';
import type { PayoutMethod } from '#domain';
import { Integer, Money, OneOf, Text } from '../http/request-fields';
import { RequestRule, RequestSchema, RuleViolation } from '../http/request-validation';

/** addressId, or method and account together (checked after the fields, as listed after them). */
function destination(r: CreatePayoutRequest): RuleViolation[] {
  const has = (name: 'addressId' | 'method' | 'account') => r[name] !== undefined;
  const required = (param: string, message: string): RuleViolation => ({ param, code: 'required', message });
  if (!has('addressId')) {
    if (!has('method') && !has('account')) return [required('addressId', 'укажите addressId или пару method и account')];
    return [
      ...(has('method') ? [] : [required('method', 'обязательно вместе с account')]),
      ...(has('account') ? [] : [required('account', 'обязательно вместе с method')]),
    ];
  }
  if (has('method') !== has('account')) return [required(has('method') ? 'account' : 'method', 'method и account указываются вместе')];
  return [];
}

/** The body of POST /v1/payouts. */
@RequestRule(destination)
@RequestSchema({
  description: 'Заявка на выплату: addressId или пара method + account уже подтверждённых реквизитов',
  anyOf: [{ required: ['addressId'] }, { required: ['method', 'account'] }],
  dependentRequired: { method: ['account'], account: ['method'] },
})
export class CreatePayoutRequest {
  @Money({
    required: true,
    description: 'Сумма в рублях, списывается с available; комиссия вычитается из неё. Не меньше минимума способа (100.00 по умолчанию)',
  })
  amount!: string | number;

  @Integer({ min: 1, max: Number.MAX_SAFE_INTEGER, description: 'Подтверждённые реквизиты; обязателен, если не заданы method + account' })
  addressId?: number;

  @OneOf(PAYOUT_METHODS, { description: 'Способ выплаты, вместе с account' })
  method?: PayoutMethod;

  @Text({ min: 1, max: 128, description: 'Полный телефон или адрес уже подтверждённых реквизитов, вместе с method' })
  account?: string;

  @Text({ min: 1, max: 128, description: 'Идентификатор заявки у мерчанта, уникален в аккаунте; ключ идемпотентности' })
  orderId?: string;

  @Text({ nullable: true, max: 500, description: 'Комментарий' })
  comment?: string | null;
}
