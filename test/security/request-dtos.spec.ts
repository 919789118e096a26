/**
 * The request reader against bodies that break naive DTO readers (docs/decisions/0085):
 * keys named like Object.prototype members are unknown fields like any other (class-
 * transformer drops them, class-validator's whitelist misses them), and nesting of any
 * depth in any field is a 400, never a stack overflow. Details are compared exactly.
 */
import { readRequest } from '../../apps/api/src/http/request-validation';
import { ApiError } from '../../apps/api/src/http/errors/api-error';
import { CreateInvoiceRequest } from '../../apps/api/src/invoices/create-invoice.request';
import { CreatePayoutRequest } from '../../apps/api/src/payouts/create-payout.request';
import { UpdateProjectRequest } from '../../apps/api/src/merchants/project-settings.request';

type Refusal = { error: { code: string; message: string; param?: string; details: { param: string; code: string; message: string }[] } };
function refusal(cls: new () => object, text: string): Refusal | null {
  try {
    readRequest(cls, JSON.parse(text), Buffer.from(text));
  } catch (error) {
    if (error instanceof ApiError) return error.body() as Refusal;
    throw error;
  }
  return null;
}
const unknown = (param: string) => ({ param, code: 'unknown_field', message: `${param}: неизвестное поле` });

describe('request DTOs: hostile keys and nesting', () => {
  it.each(['constructor', 'toString', 'hasOwnProperty', 'isPrototypeOf', 'valueOf', '__proto__', '__defineGetter__'])(
    'a body key %s is an unknown field, at the top and nested',
    (key) => {
      expect(refusal(CreateInvoiceRequest, `{"amount":"1.00","orderId":"x","${key}":1}`)).toEqual({
        error: { code: 'validation', message: `${key}: неизвестное поле`, param: key, details: [unknown(key)] },
      });
      expect(refusal(CreateInvoiceRequest, `{"amount":"1.00","orderId":"x","customer":{"${key}":{"a":1}}}`)?.error.details).toEqual([
        unknown(`customer.${key}`),
      ]);
      expect(refusal(UpdateProjectRequest, `{"methods":{"sbp":{"${key}":1}}}`)?.error.details).toEqual([unknown(`methods.sbp.${key}`)]);
    },
  );

  it('a body key constructor does not hide the class: the other fields are still checked', () => {
    expect(
      refusal(CreateInvoiceRequest, '{"constructor":1,"amount":"1.234"}')?.error.details.map((d: { param: string; code: string }) => [d.param, d.code]),
    ).toEqual([
      ['amount', 'invalid_money_too_many_decimals'],
      ['orderId', 'required'],
      ['constructor', 'unknown_field'],
    ]);
  });

  it.each(['customFields', 'customer', 'bogus', 'description', 'amount'])('12 000 levels of nesting in %s: a 400 naming it, no stack overflow', (field) => {
    for (const nested of [`${'['.repeat(12000)}${']'.repeat(12000)}`, `${'{"a":'.repeat(12000)}1${'}'.repeat(12000)}`]) {
      const body = refusal(CreateInvoiceRequest, `{"amount":"1.00","orderId":"x","${field}":${nested}}`);
      expect(body?.error.code).toBe('validation');
      expect(body?.error.details.map((d: { param: string }) => d.param)).toEqual([field === 'customer' && nested.startsWith('{') ? 'customer.a' : field]);
    }
  });

  it('payouts: the addressId / method + account rule follows the field violations, unknown fields come last', () => {
    expect(
      refusal(CreatePayoutRequest, '{"bogus":1,"orderId":5,"method":"sbp"}')?.error.details.map((d: { param: string; code: string }) => [d.param, d.code]),
    ).toEqual([
      ['amount', 'required'],
      ['orderId', 'invalid_type'],
      ['account', 'required'],
      ['bogus', 'unknown_field'],
    ]);
  });
});
