import type { InvoiceRequest } from '#domain';
import { METHOD_CODES } from '#domain';
import { parseMoney, parsePercent } from '#ledger';
import { Email, HttpUrl, Integer, JsonObject, Money, Nested, OneOf, Percent, Phone, Text } from '../http/request-fields';
import { RequestSchema } from '../http/request-validation';

const CUSTOM_FIELDS_MAX_BYTES = 2048;

/** The buyer of CreateInvoiceRequest; every field optional, null is absent. */
export class InvoiceCustomer {
  @Email({ nullable: true, description: 'E-mail покупателя' })
  email?: string | null;

  @Phone({ nullable: true, description: 'Телефон в формате E.164, например +79991234567' })
  phone?: string | null;

  @Text({ nullable: true, max: 128, description: 'Идентификатор покупателя в системе мерчанта' })
  userId?: string | null;

  @Text({ nullable: true, max: 255, description: 'Имя покупателя' })
  name?: string | null;
}

/** The body of POST /v1/invoices (spec: CreateInvoiceRequest). Fields in the order violations are listed. */
@RequestSchema({ description: 'Тело POST /invoices; неизвестные поля: 400 validation' })
export class CreateInvoiceRequest {
  @Money({ required: true, description: 'Сумма в рублях: строка Money или число; в ответах всегда строка', examples: ['1500.00', 1500] })
  amount!: string | number;

  @Text({ required: true, min: 1, max: 128, description: 'Номер заказа мерчанта, уникален в проекте; ключ идемпотентности' })
  orderId!: string;

  @Text({ nullable: true, max: 255, description: 'Описание счёта' })
  description?: string | null;

  @OneOf(METHOD_CODES, { nullable: true, description: 'Способ оплаты; без него покупатель выбирает сам; crypto только если в проекте включён приём USDT' })
  method?: (typeof METHOD_CODES)[number] | null;

  @Percent({
    nullable: true,
    numberOnly: true,
    description:
      'Процент от суммы, который покупатель платит сверх неё: от 0 до ставки мерчанта для способа; остаток ставки платит мерчант. ' +
      'Выше ставки: 422 customer_fee_pct_too_high. По умолчанию: настройка ползунка проекта (вся ставка на покупателе). ' +
      'Приоритетнее customerFeeShare и feePayer',
  })
  customerFeePct?: number | null;

  @Integer({
    nullable: true,
    min: 0,
    max: 100,
    deprecated: true,
    description: 'Устарело: доля ставки на покупателе в процентах (100 = вся ставка); пересчитывается в customerFeePct по ставке способа',
  })
  customerFeeShare?: number | null;

  @OneOf(['merchant', 'customer'], {
    nullable: true,
    deprecated: true,
    description: 'Устарело: customer = вся ставка на покупателе, merchant = 0. Учитывается, только если не заданы customerFeePct и customerFeeShare',
  })
  feePayer?: 'merchant' | 'customer' | null;

  @HttpUrl({ nullable: true, description: 'Куда вернуть покупателя после оплаты' })
  successUrl?: string | null;

  @HttpUrl({ nullable: true, description: 'Куда вернуть покупателя после отказа' })
  failUrl?: string | null;

  @Integer({ nullable: true, min: 1, max: 1440, default: 60, description: 'Время жизни счёта в минутах' })
  expire?: number | null;

  @Email({ nullable: true, deprecated: true, description: 'Устарело: синоним customer.email' })
  payerEmail?: string | null;

  @Nested(() => InvoiceCustomer, { nullable: true, schemaName: 'Customer', description: 'Покупатель; неизвестные поля: 400 validation' })
  customer?: InvoiceCustomer | null;

  @JsonObject({ nullable: true, maxBytes: CUSTOM_FIELDS_MAX_BYTES, description: 'Произвольный JSON до 2 КБ; возвращается как передан' })
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
    amount: parseMoney(r.amount),
    orderId: r.orderId,
    method: r.method ?? null,
    customerFeePct: r.customerFeePct == null ? null : parsePercent(r.customerFeePct),
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
