import { IsIn, IsOptional, IsString, isIn, isString, ValidateBy, ValidationArguments } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { canonicalPayoutAccount, PAYOUT_METHODS } from '#domain';
import type { PayoutMethod } from '#domain';
import { ACROSS_FIELDS } from '../../http/request-pipe';
import { MaxLength, MinLength, Required, StorableText } from '../../http/request-rules';

const ACCOUNT_FORMATS: Readonly<Record<PayoutMethod, string>> = {
  sbp: 'мобильный номер России: +7, 9 и ещё 9 цифр (СБП переводит только по мобильному номеру)',
  usdt_trc20: 'адрес TRON: T и 33 символа base58 с верной контрольной суммой (проверьте, нет ли опечатки)',
  usdt_bep20: 'адрес BEP-20: 0x и 40 шестнадцатеричных цифр; в смешанном регистре — с верной контрольной суммой EIP-55 (проверьте, нет ли опечатки)',
};

/** The account has the format of the method (a rule over two fields, once both are valid). */
const IsAccountOfMethod = () =>
  ValidateBy(
    {
      name: 'accountOfMethod',
      validator: {
        validate: (account: unknown, args?: ValidationArguments) => {
          const { method } = args!.object as AddPayoutAddressRequest;
          return !isString(account) || !isIn(method, [...PAYOUT_METHODS]) || canonicalPayoutAccount(method, account) !== null;
        },
      },
    },
    { message: (args) => ACCOUNT_FORMATS[(args.object as AddPayoutAddressRequest).method], context: { code: 'invalid_format', ...ACROSS_FIELDS } },
  );

/** The body of POST /admin/v1/accounts/{id}/payout-addresses. */
@JSONSchema({ description: 'Реквизиты для выплат аккаунта; не подтверждены до подтверждения' })
export class AddPayoutAddressRequest {
  @Required()
  @IsIn(PAYOUT_METHODS)
  @JSONSchema({ description: 'Способ выплаты' })
  method!: PayoutMethod;

  @Required()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(128)
  @IsAccountOfMethod()
  @JSONSchema({
    description:
      'sbp: мобильный номер России (+79 и 9 цифр); usdt_trc20: адрес TRON (T и 33 символа base58, контрольная сумма проверяется); usdt_bep20: 0x и 40 шестнадцатеричных цифр (смешанный регистр проверяется по EIP-55)',
  })
  account!: string;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(255)
  @JSONSchema({ description: 'Банк получателя (sbp)' })
  bank?: string | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(255)
  @JSONSchema({ description: 'Подпись' })
  label?: string | null;
}
