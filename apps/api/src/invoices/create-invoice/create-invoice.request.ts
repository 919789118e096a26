import { IsIn, IsObject, IsOptional, IsString, Matches, ValidateNested } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import type { FeePayer, InvoiceRequest } from '#domain';
import { FEE_PAYERS, METHOD_CODES } from '#domain';
import {
  E164,
  EMAIL,
  IsHttpUrl,
  NoCredentialsInUrl,
  IsInteger,
  IsMoney,
  IsPercent,
  moneyAsSent,
  percentAsSent,
  MAX_JSON_DEPTH,
  MaxJsonBytes,
  MaxLength,
  MinLength,
  Required,
  StorableJson,
  StorableText,
} from '../../http/request-rules';

const CUSTOM_FIELDS_MAX_BYTES = 2048;

/** The buyer of CreateInvoiceRequest; every field optional, null is absent. */
export class Customer {
  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(254)
  @Matches(EMAIL, { message: 'некорректный адрес электронной почты' })
  @JSONSchema({ description: 'E-mail покупателя' })
  email?: string | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(16)
  @Matches(E164, { message: 'телефон в формате E.164, например +79991234567' })
  @JSONSchema({ description: 'Телефон в формате E.164, например +79991234567', examples: ['+79991234567'] })
  phone?: string | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(128)
  @JSONSchema({ description: 'Идентификатор покупателя в системе мерчанта' })
  userId?: string | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(255)
  @JSONSchema({ description: 'Имя покупателя' })
  name?: string | null;
}

/** The body of POST /v1/invoices (spec: CreateInvoiceRequest). Fields in the order violations are listed. */
@JSONSchema({ description: 'Тело POST /invoices; неизвестные поля: 400 validation' })
export class CreateInvoiceRequest {
  @Required()
  @IsMoney({ anySize: true })
  @JSONSchema({
    description: 'Сумма в рублях: строка Money или число; в ответах всегда строка. Выше максимума способа или проекта: 422 amount_out_of_range',
    examples: ['1500.00', 1500],
  })
  amount!: string | number;

  @Required()
  @IsString()
  @StorableText()
  @MinLength(1)
  @MaxLength(128)
  @JSONSchema({ description: 'Номер заказа мерчанта, уникален в проекте; ключ идемпотентности' })
  orderId!: string;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(255)
  @JSONSchema({ description: 'Описание счёта' })
  description?: string | null;

  @IsOptional()
  @IsIn(METHOD_CODES)
  @JSONSchema({ description: 'Способ оплаты; без него покупатель выбирает сам; crypto только если в проекте включён приём USDT' })
  method?: (typeof METHOD_CODES)[number] | null;

  @IsOptional()
  @IsPercent({ numberOnly: true, anySize: true })
  @JSONSchema({
    description:
      'Процент от суммы, который покупатель платит сверх неё: от 0 до ставки мерчанта для способа; остаток ставки платит мерчант. ' +
      'Выше ставки: 422 customer_fee_pct_too_high. По умолчанию: настройка ползунка проекта (вся ставка на покупателе). ' +
      'Приоритетнее customerFeeShare и feePayer',
  })
  customerFeePct?: number | null;

  @IsOptional()
  @IsInteger(0, 100)
  @JSONSchema({
    deprecated: true,
    description: 'Устарело: доля ставки на покупателе в процентах (100 = вся ставка); пересчитывается в customerFeePct по ставке способа',
  })
  customerFeeShare?: number | null;

  @IsOptional()
  @IsIn(FEE_PAYERS)
  @JSONSchema({
    deprecated: true,
    description: 'Устарело: customer = вся ставка на покупателе, merchant = 0. Учитывается, только если не заданы customerFeePct и customerFeeShare',
  })
  feePayer?: FeePayer | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(2048)
  @IsHttpUrl()
  @NoCredentialsInUrl()
  @JSONSchema({ description: 'Куда вернуть покупателя после оплаты' })
  successUrl?: string | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(2048)
  @IsHttpUrl()
  @NoCredentialsInUrl()
  @JSONSchema({ description: 'Куда вернуть покупателя после отказа' })
  failUrl?: string | null;

  // The default is said in words: openapi-typescript makes a field with `default` required in a schema of components.
  @IsOptional()
  @IsInteger(1, 1440)
  @JSONSchema({ description: 'Время жизни счёта в минутах; по умолчанию 60' })
  expire?: number | null;

  @IsOptional()
  @IsString()
  @StorableText()
  @MaxLength(254)
  @Matches(EMAIL, { message: 'некорректный адрес электронной почты' })
  @JSONSchema({ deprecated: true, description: 'Устарело: синоним customer.email' })
  payerEmail?: string | null;

  // Typed without `| null` (null is absent, IsOptional): the reflected type names the nested class.
  @IsOptional()
  @IsObject()
  @ValidateNested()
  @JSONSchema({ description: 'Покупатель; неизвестные поля: 400 validation' })
  customer?: Customer;

  @IsOptional()
  @IsObject()
  @StorableJson()
  @MaxJsonBytes(CUSTOM_FIELDS_MAX_BYTES)
  @JSONSchema({
    description: `Произвольный JSON до 2 КБ; возвращается как передан (не больше ${CUSTOM_FIELDS_MAX_BYTES} байт в JSON, вложенность до ${MAX_JSON_DEPTH} уровней)`,
  })
  customFields?: Record<string, unknown> | null;
}

/** A valid CreateInvoiceRequest as the domain's InvoiceRequest. */
export function toInvoiceRequest(r: CreateInvoiceRequest): InvoiceRequest {
  const customer = {
    email: r.customer?.email ?? null,
    phone: r.customer?.phone ?? null,
    userId: r.customer?.userId ?? null,
    name: r.customer?.name ?? null,
  };
  return {
    amount: moneyAsSent(r, 'amount'),
    orderId: r.orderId,
    method: r.method ?? null,
    customerFeePct: r.customerFeePct == null ? null : percentAsSent(r, 'customerFeePct'),
    customerFeeShare: r.customerFeeShare ?? null,
    feePayer: r.feePayer ?? null,
    description: r.description ?? null,
    successUrl: r.successUrl ?? null,
    failUrl: r.failUrl ?? null,
    expireMinutes: r.expire ?? 60,
    // payerEmail is the deprecated synonym of customer.email, which wins when both are given.
    customer: { ...customer, email: customer.email ?? r.payerEmail ?? null },
    customFields: r.customFields ?? null,
  };
}
