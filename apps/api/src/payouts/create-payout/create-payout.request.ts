import { IsIn, IsOptional, IsString, ValidateIf, ValidationArguments } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import type { DecoratorSchema } from 'class-validator-jsonschema/build/decorators';
import type { SchemaObject } from '../../docs/openapi-document';
import { PAYOUT_METHODS } from '#domain';
import type { PayoutMethod } from '#domain';
import { ACROSS_FIELDS } from '../../http/request-pipe';
import { IsInteger, IsMoney, MaxLength, MinLength, Optional, Required, StorableText } from '../../http/request-rules';

/** method and account come together; what is missing is said against addressId when that is absent too. */
const together = (other: string) => (args: ValidationArguments) =>
  (args.object as CreatePayoutRequest).addressId === undefined ? `обязательно вместе с ${other}` : 'method и account указываются вместе';

/** The body of POST /v1/payouts: addressId, or method and account together (rules over several fields, listed after the fields). */
@JSONSchema({
  description: 'Заявка на выплату: addressId или пара method + account уже подтверждённых реквизитов',
  // Inside allOf: the same rule, and generators (openapi-typescript) still type the body as its fields (anyOf at the top made it `unknown`).
  allOf: [{ anyOf: [{ required: ['addressId'] }, { required: ['method', 'account'] }] }],
  dependentRequired: { method: ['account'], account: ['method'] },
} as SchemaObject as DecoratorSchema)
export class CreatePayoutRequest {
  @Required()
  @IsMoney({ anySize: true })
  @JSONSchema({
    description:
      'Сумма в рублях, списывается с available; комиссия вычитается из неё. Не меньше минимума способа (100.00 по умолчанию) и не больше 1000000000.00: иначе 422 amount_out_of_range',
  })
  amount!: string | number;

  @ValidateIf((r: CreatePayoutRequest) => r.addressId !== undefined || (r.method === undefined && r.account === undefined))
  @Required({ message: 'укажите addressId или пару method и account', context: ACROSS_FIELDS })
  @IsInteger(1, Number.MAX_SAFE_INTEGER)
  @JSONSchema({ description: 'Подтверждённые реквизиты; обязателен, если не заданы method + account' })
  addressId?: number;

  @ValidateIf((r: CreatePayoutRequest) => r.method !== undefined || r.account !== undefined)
  @Required({ message: together('account'), context: ACROSS_FIELDS })
  @IsIn(PAYOUT_METHODS)
  @JSONSchema({ description: 'Способ выплаты, вместе с account' })
  method?: PayoutMethod;

  @ValidateIf((r: CreatePayoutRequest) => r.account !== undefined || r.method !== undefined)
  @Required({ message: together('method'), context: ACROSS_FIELDS })
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(128)
  @JSONSchema({ description: 'Полный телефон или адрес уже подтверждённых реквизитов, вместе с method' })
  account?: string;

  @Optional()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(128)
  @JSONSchema({ description: 'Идентификатор заявки у мерчанта, уникален в аккаунте; ключ идемпотентности' })
  orderId?: string;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(500)
  @JSONSchema({ description: 'Комментарий' })
  comment?: string | null;
}
