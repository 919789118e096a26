/**
 * The request reader (the DTOs' ValidationPipe) against bodies that break naive DTO readers (docs/decisions/0085):
 * keys named like Object.prototype members are unknown fields like any other (class-
 * transformer drops them, class-validator's whitelist misses them), and nesting of any
 * depth in any field is a 400, never a stack overflow. Details are compared exactly.
 */
import { CreateInvoiceRequest } from '../../apps/api/src/invoices/create-invoice/create-invoice.request';
import { CreatePayoutRequest } from '../../apps/api/src/payouts/create-payout/create-payout.request';
import { PayoutReasonRequest, PayPayoutRequest } from '../../apps/api/src/payouts/transition-payout/transition-payout.request';
import { CreateAccountRequest, CreateProjectRequest, UpdateProjectRequest } from '../../apps/api/src/merchants/project-settings.request';
import { AdvanceClockRequest, MAX_ADVANCE_SECONDS } from '../../apps/api/src/operations/advance-clock.request';
import { refusalOf } from '../support/request-reading';

type Refusal = { error: { code: string; message: string; param?: string; details: { param: string; code: string; message: string }[] } };
const refusal = async (cls: new () => object, text: string) => (await refusalOf(cls, text)) as Refusal | null;
const unknown = (param: string) => ({ param, code: 'unknown_field', message: `${param}: неизвестное поле` });

describe('request DTOs: hostile keys and nesting', () => {
  it.each(['constructor', 'toString', 'hasOwnProperty', 'isPrototypeOf', 'valueOf', '__proto__', '__defineGetter__'])(
    'a body key %s is an unknown field, at the top and nested',
    async (key) => {
      expect(await refusal(CreateInvoiceRequest, `{"amount":"1.00","orderId":"x","${key}":1}`)).toEqual({
        error: { code: 'validation', message: `${key}: неизвестное поле`, param: key, details: [unknown(key)] },
      });
      expect((await refusal(CreateInvoiceRequest, `{"amount":"1.00","orderId":"x","customer":{"${key}":{"a":1}}}`))?.error.details).toEqual([
        unknown(`customer.${key}`),
      ]);
      expect((await refusal(UpdateProjectRequest, `{"methods":{"sbp":{"${key}":1}}}`))?.error.details).toEqual([unknown(`methods.sbp.${key}`)]);
    },
  );

  it('a body key constructor does not hide the class: the other fields are still checked', async () => {
    expect(
      (await refusal(CreateInvoiceRequest, '{"constructor":1,"amount":"1.234"}'))?.error.details.map((d: { param: string; code: string }) => [d.param, d.code]),
    ).toEqual([
      ['amount', 'invalid_money_too_many_decimals'],
      ['orderId', 'required'],
      ['constructor', 'unknown_field'],
    ]);
  });

  it.each(['customFields', 'customer', 'bogus', 'description', 'amount'])(
    '12 000 levels of nesting in %s: a 400 naming it, no stack overflow',
    async (field) => {
      for (const nested of [`${'['.repeat(12000)}${']'.repeat(12000)}`, `${'{"a":'.repeat(12000)}1${'}'.repeat(12000)}`]) {
        const body = await refusal(CreateInvoiceRequest, `{"amount":"1.00","orderId":"x","${field}":${nested}}`);
        expect(body?.error.code).toBe('validation');
        expect(body?.error.details.map((d: { param: string }) => d.param)).toEqual([field === 'customer' && nested.startsWith('{') ? 'customer.a' : field]);
      }
    },
  );

  it('length messages read as Russian: an empty string is said to be empty, a limit takes its plural', async () => {
    expect((await refusal(CreatePayoutRequest, '{"amount":"100.00","method":"sbp","account":""}'))?.error.details).toEqual([
      { param: 'account', code: 'too_short', message: 'account: не может быть пустой строкой' },
    ]);
    expect((await refusal(CreatePayoutRequest, `{"amount":"100.00","addressId":1,"comment":"${'x'.repeat(501)}"}`))?.error.details).toEqual([
      { param: 'comment', code: 'too_long', message: 'comment: не длиннее 500 символов' },
    ]);
  });

  it('a name, a payout reason or a payout externalId of white space only says nothing (the console would list a blank row): 400 blank', async () => {
    const blank = { param: 'name', code: 'blank', message: 'name: не может состоять из одних пробелов' };
    expect((await refusal(CreateAccountRequest, '{"name":"  \\t ","email":"owner@example.com"}'))?.error.details).toEqual([blank]);
    expect((await refusal(CreateProjectRequest, '{"accountId":"3f0c5a4e-0000-4000-8000-000000000001","name":" "}'))?.error.details).toEqual([blank]);
    expect((await refusal(UpdateProjectRequest, '{"name":"\\u00a0"}'))?.error.details).toEqual([blank]);
    expect(await refusal(UpdateProjectRequest, '{"name":" Магазин "}')).toBeNull();
    // A payout's reject or cancel reason is shown to the merchant (statusReason).
    expect((await refusal(PayoutReasonRequest, '{"reason":"   "}'))?.error.details).toEqual([
      { ...blank, param: 'reason', message: 'reason: не может состоять из одних пробелов' },
    ]);
    // So is a paid payout's externalId (a transfer number or hash): blank or empty says nothing; null is none.
    expect((await refusal(PayPayoutRequest, '{"externalId":" "}'))?.error.details).toEqual([
      { ...blank, param: 'externalId', message: 'externalId: не может состоять из одних пробелов' },
    ]);
    expect((await refusal(PayPayoutRequest, '{"externalId":""}'))?.error.details).toEqual([
      { param: 'externalId', code: 'too_short', message: 'externalId: не может быть пустой строкой' },
    ]);
    expect(await refusal(PayPayoutRequest, '{"externalId":null}')).toBeNull();
    expect(await refusal(PayPayoutRequest, '{"externalId":"bank-000123"}')).toBeNull();
  });

  it('payouts: the addressId / method + account rule follows the field violations, unknown fields come last', async () => {
    expect(
      (await refusal(CreatePayoutRequest, '{"bogus":1,"orderId":5,"method":"sbp"}'))?.error.details.map((d: { param: string; code: string }) => [
        d.param,
        d.code,
      ]),
    ).toEqual([
      ['amount', 'required'],
      ['orderId', 'invalid_type'],
      ['account', 'required'],
      ['bogus', 'unknown_field'],
    ]);
  });

  // Every integer field of every body: [class, the rest of a valid body, field, min, max, the code and message of a refusal when the route sets its own].
  const INTEGER_FIELDS: [new () => object, string, string, number, number, { code: string; message: string }?][] = [
    [CreateInvoiceRequest, '"amount":"100.00","orderId":"x",', 'expire', 1, 1440],
    [CreateInvoiceRequest, '"amount":"100.00","orderId":"x",', 'customerFeeShare', 0, 100],
    [CreatePayoutRequest, '"amount":"100.00",', 'addressId', 1, Number.MAX_SAFE_INTEGER],
    [CreateProjectRequest, '"accountId":"3f0c5a4e-0000-4000-8000-000000000001","name":"Магазин",', 'holdHours', 0, 720],
    [UpdateProjectRequest, '', 'holdHours', 0, 720],
    [UpdateProjectRequest, '', 'customerFeeShare', 0, 100],
    [AdvanceClockRequest, '', 'seconds', 0, MAX_ADVANCE_SECONDS, { code: 'invalid', message: `целое число секунд от 0 до ${MAX_ADVANCE_SECONDS}` }],
  ];
  it.each(INTEGER_FIELDS.map(([cls, rest, field, min, max, own]) => [`${cls.name}.${field}`, cls, rest, field, min, max, own] as const))(
    'the integer %s is judged on the exact value written: a fraction is refused whatever the number parses to; 60.0 is 60; bounds are exact',
    async (_, cls, rest, field, min, max, own) => {
      const body = (literal: string) => `{${rest}"${field}":${literal}}`;
      const details = async (literal: string) => (await refusal(cls, body(literal)))?.error.details ?? null;
      const answer = (code: string, message: string) => [{ param: field, code: own?.code ?? code, message: `${field}: ${own?.message ?? message}` }];
      const notDigits = answer('invalid_type', 'ожидается целое число');
      // Literals that parse to min or max (or to a number between them) but write a fraction.
      const bad = [`${max}.00000000000000000001`, `${min}.000000000000000000001e0`, `${max}00000000000000000001e-20`];
      if (min > 0) bad.push(`${min - 1}.99999999999999999999`);
      if (max < 2 ** 52) bad.push(`${max - 1}.99999999999999999999`);
      for (const literal of bad) expect({ literal, details: await details(literal) }).toEqual({ literal, details: notDigits });
      const outOfRange = answer('out_of_range', `от ${min} до ${max}`);
      for (const literal of [String(min - 1), String(BigInt(max) + 1n), `${max}${'0'.repeat(30)}`, `${BigInt(max) + 1n}.0`, `${BigInt(max) + 1n}e0`]) {
        expect({ literal, details: await details(literal) }).toEqual({ literal, details: outOfRange });
      }
      for (const literal of [String(min), String(max), `${max}.0`, `${min}e0`, `${min}.0E+0`, ...(min === 0 ? ['-0', '-0.0', '0.0e5'] : [])])
        expect({ literal, details: await details(literal) }).toEqual({ literal, details: null });
    },
  );
});
