import type { InvoiceRequest } from '../../../../libs/domain/src';
import { METHOD_CODES } from '../../../../libs/domain/src';
import { Fields, unstorableJson } from '../http/validation';

const CUSTOM_FIELDS_MAX_BYTES = 2048;

/** CreateInvoiceRequest → InvoiceRequest, or a 400 listing every violation. */
export function readCreateInvoiceRequest(body: unknown, rawBody?: Buffer): InvoiceRequest {
  const f = Fields.ofBody(body, rawBody);
  const amount = f.money('amount', { required: true });
  const orderId = f.string('orderId', { required: true, min: 1, max: 128 });
  const description = f.string('description', { nullable: true, max: 255 });
  const method = f.enumOf('method', METHOD_CODES, { nullable: true });
  const customerFeePct = f.percent('customerFeePct', { nullable: true, numberOnly: true });
  const customerFeeShare = f.integer('customerFeeShare', { nullable: true, min: 0, max: 100 });
  const feePayer = f.enumOf('feePayer', ['merchant', 'customer'] as const, { nullable: true });
  const successUrl = f.url('successUrl', { nullable: true });
  const failUrl = f.url('failUrl', { nullable: true });
  const expire = f.integer('expire', { nullable: true, min: 1, max: 1440 });
  const payerEmail = f.email('payerEmail', { nullable: true });
  const customer =
    f.object(
      'customer',
      (c) => ({
        email: c.email('email', { nullable: true }) ?? null,
        phone: c.phone('phone', { nullable: true }) ?? null,
        userId: c.string('userId', { nullable: true, max: 128 }) ?? null,
        name: c.string('name', { nullable: true, max: 255 }) ?? null,
      }),
      { nullable: true },
    ) ?? { email: null, phone: null, userId: null, name: null };
  let customFields: Record<string, unknown> | null = null;
  if (f.has('customFields') && f.raw('customFields') !== null) {
    const raw = f.raw('customFields');
    if (typeof raw !== 'object' || Array.isArray(raw)) f.fail('customFields', 'invalid_type', 'ожидается объект');
    else if (unstorableJson(raw)) f.fail('customFields', 'invalid_value', unstorableJson(raw)!);
    else if (Buffer.byteLength(JSON.stringify(raw)) > CUSTOM_FIELDS_MAX_BYTES) {
      f.fail('customFields', 'too_large', `не больше ${CUSTOM_FIELDS_MAX_BYTES} байт в JSON`);
    } else customFields = raw as Record<string, unknown>;
  }
  f.done();
  return {
    amount: amount!,
    orderId: orderId!,
    method: method ?? null,
    customerFeePct: customerFeePct ?? null,
    customerFeeShare: customerFeeShare ?? null,
    feePayer: feePayer ?? null,
    description: description ?? null,
    successUrl: successUrl ?? null,
    failUrl: failUrl ?? null,
    expireMinutes: expire ?? 60,
    // payerEmail is the deprecated synonym of customer.email, which wins when both are given.
    customer: { ...customer, email: customer.email ?? payerEmail ?? null },
    customFields,
  };
}
