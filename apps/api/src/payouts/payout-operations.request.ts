import { canonicalPayoutAccount, PAYOUT_METHODS } from '#domain';
import type { PayoutMethod } from '#domain';
import { OneOf, Text } from '../http/request-fields';
import { RequestRule, RequestSchema } from '../http/request-validation';

/** The body of POST /admin/v1/accounts/{id}/payout-addresses. */
@RequestRule<AddPayoutAddressRequest>((r, failed) =>
  r.method !== undefined && r.account !== undefined && !failed.has('method') && !failed.has('account') && canonicalPayoutAccount(r.method, r.account) === null
    ? [
        {
          param: 'account',
          code: 'invalid_format',
          message:
            r.method === 'sbp'
              ? 'телефон +7 и 10 цифр'
              : r.method === 'usdt_trc20'
                ? 'адрес TRON: T и 33 символа base58'
                : 'адрес BEP-20: 0x и 40 шестнадцатеричных цифр',
        },
      ]
    : [],
)
@RequestSchema({ description: 'Реквизиты для выплат аккаунта; не подтверждены до подтверждения' })
export class AddPayoutAddressRequest {
  @OneOf(PAYOUT_METHODS, { required: true, description: 'Способ выплаты' })
  method!: PayoutMethod;

  @Text({
    required: true,
    min: 1,
    max: 128,
    description: 'sbp: телефон +7 и 10 цифр; usdt_trc20: адрес TRON (T и 33 символа base58); usdt_bep20: 0x и 40 шестнадцатеричных цифр',
  })
  account!: string;

  @Text({ nullable: true, max: 255, description: 'Банк получателя (sbp)' })
  bank?: string | null;

  @Text({ nullable: true, max: 255, description: 'Подпись' })
  label?: string | null;
}

/** The body of POST /admin/v1/payouts/{id}/approve and /process: nothing (or an empty object). */
@RequestSchema({ description: 'Тела нет (или пустой объект)' })
export class NoFieldsRequest {}

/** The body of POST /admin/v1/payouts/{id}/pay. */
export class PayPayoutRequest {
  @Text({ nullable: true, max: 256, description: 'Хеш транзакции или номер перевода' })
  externalId?: string | null;
}

/** The body of POST /admin/v1/payouts/{id}/reject and /cancel. */
export class PayoutReasonRequest {
  @Text({ required: true, min: 1, max: 500, description: 'Причина' })
  reason!: string;
}

/** The body of POST /admin/v1/refunds/{id}/fail (optional). */
export class FailRefundRequest {
  @Text({ min: 1, max: 500, description: 'Причина отказа банка; по умолчанию refused by the bank' })
  reason?: string;
}
