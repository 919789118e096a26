/**
 * The OpenAPI document and the validator cannot drift: the request schemas are generated
 * from the request DTOs, and here every body of the fuzz corpus is judged by both, the
 * document's schema (Ajv, JSON Schema 2020-12) and the live validator (the DTOs'
 * ValidationPipe, with the body's raw text), and the verdicts (valid or invalid) must
 * agree for every sample.
 *
 * The corpus is of JSON values, sent as JSON.stringify writes them but for integers of
 * 1e21 and more, written in digits (not `1e+21`): the rules about how a number is spelled
 * in the raw text (`1e3`, `10.100`) are rules about text, which JSON Schema cannot state
 * (the document says them in words); error-contract-fuzz sends those.
 * So is the depth of customFields (at most 32 levels): one recursive schema takes any
 * depth, the validator counts it; a sample deeper than that must be refused by the server.
 * The seed is printed; rerun one with TEST_SEED=<seed>.
 */
import fc from 'fast-check';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { OPENAPI_DOCUMENT } from '../../apps/api/src/docs/openapi-document';
import type { Type } from '@nestjs/common';
import { MAX_JSON_DEPTH } from '../../apps/api/src/http/request-rules';
import { CreateInvoiceRequest } from '../../apps/api/src/invoices/create-invoice/create-invoice.request';
import { CreatePayoutRequest } from '../../apps/api/src/payouts/create-payout/create-payout.request';
import { RefundInvoiceRequest } from '../../apps/api/src/refunds/refund-invoice/refund-invoice.request';
import { anyText, INVOICE_FIELDS, invoiceWith, nested, numberLiteral, wrongTypeFor } from '../support/request-fuzz';
import { refusalOf } from '../support/request-reading';

const seed = process.env.TEST_SEED ? Number(process.env.TEST_SEED) : Date.now() ^ (Math.random() * 0x100000000);

console.log(`request-agreement seed: ${seed} (replay: TEST_SEED=${seed})`);

const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
addFormats(ajv);

/**
 * JSON Schema defines multipleOf on the number's (decimal) value: 0.29 is a multiple of
 * 0.01. Ajv divides floats (0.29 / 0.01 = 28.999999999999996) and says it is not, so this
 * test judges multipleOf by a power of ten on the decimal text of the number, as the JSON
 * text written by JSON.stringify spells it (the shortest text that reads back as it).
 */
function decimalMultipleOf(step: number, value: number): boolean {
  const decimals = /^1e-(\d+)$/.exec(step.toExponential());
  if (!decimals) throw new Error(`multipleOf ${step} is not a power of ten`);
  const [mantissa, exponent] = value.toExponential().split('e') as [string, string];
  const fraction = (mantissa.split('.')[1] ?? '').length - Number(exponent);
  return Math.max(0, fraction) <= Number(decimals[1]);
}
ajv.removeKeyword('multipleOf');
ajv.addKeyword({ keyword: 'multipleOf', type: 'number', schemaType: 'number', validate: (step: number, value: number) => decimalMultipleOf(step, value) });
ajv.addSchema({ $id: 'doc', $defs: JSON.parse(JSON.stringify(OPENAPI_DOCUMENT.components.schemas).replace(/#\/components\/schemas\//g, 'doc#/$defs/')) });
const schemaOf = (name: string) => ajv.compile({ $ref: `doc#/$defs/${name}` });

const serverVerdict = async (cls: Type<object>, text: string): Promise<boolean> => (await refusalOf(cls, text)) === null;

/** How deep a JSON value nests (a scalar: 0). */
const depthOf = (value: unknown): number => (typeof value === 'object' && value !== null ? 1 + Math.max(0, ...Object.values(value).map(depthOf)) : 0);
/** customFields deeper than the validator takes: the one rule of the corpus the document says in words only. */
const tooDeep = (body: unknown): boolean => {
  const fields = (body as { customFields?: unknown } | null)?.customFields;
  return typeof fields === 'object' && fields !== null && depthOf(fields) > MAX_JSON_DEPTH;
};

/** JSON text of a value with every number of 1e21 or more (an integer) in digits, as a client may well write it. */
function inDigits(body: unknown): string {
  const digits: string[] = [];
  const text = JSON.stringify(body, (_key, v: unknown) =>
    typeof v === 'number' && Number.isFinite(v) && Math.abs(v) >= 1e21 ? `\u0000${digits.push(BigInt(v).toString()) - 1}\u0000` : v,
  );
  return text.replace(/"\\u0000(\d+)\\u0000"/g, (_, i: string) => digits[Number(i)]!);
}

/** Every sample judged by both; the disagreements, listed. */
async function disagreements(name: string, cls: Type<object>, bodies: fc.Arbitrary<unknown>, numRuns: number): Promise<{ valid: number; invalid: number }> {
  const validate = schemaOf(name);
  const counts = { valid: 0, invalid: 0 };
  await fc.assert(
    fc.asyncProperty(bodies, async (body) => {
      const text = inDigits(body);
      const value = JSON.parse(text) as unknown;
      const server = await serverVerdict(cls, text);
      counts[server ? 'valid' : 'invalid']++;
      if (tooDeep(value)) {
        if (server) throw new Error(`${name}: customFields deeper than ${MAX_JSON_DEPTH} levels accepted: ${text.slice(0, 400)}`);
        return;
      }
      const document = validate(value) as boolean;
      if (document !== server) {
        throw new Error(
          `${name}: the document says ${document ? 'valid' : 'invalid'} ${JSON.stringify(validate.errors)}, the server ${server ? 'valid' : 'invalid'}: ${text.slice(0, 400)}`,
        );
      }
    }),
    { seed, numRuns },
  );
  return counts;
}

const numberValue = numberLiteral.map((literal) => JSON.parse(literal) as number);
const fieldValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  anyText(40),
  numberValue,
  fc.constantFrom(
    '10.00',
    '0.29',
    '1000000000.00',
    '1000000000.01',
    '1.234',
    0.29,
    10.5,
    1e9,
    1e9 + 0.01,
    'http://shop.example/ok',
    'HTTPS://x.ru',
    'ftp://x',
    'a@b.cc',
    'ivan@',
    '+79991234567',
    'card',
    'sbp',
    'usdt_trc20',
    'merchant',
    null,
    60,
    1441,
    0,
    -1,
    1.5,
    100,
    101,
  ),
);

describe('the OpenAPI request schemas and the validator agree on the fuzz corpus', () => {
  it('CreateInvoiceRequest', async () => {
    const nestedField = fc.tuple(
      fc.integer({ min: 1, max: 60 }),
      fc.constantFrom<'array' | 'object'>('array', 'object'),
      fc.constantFrom(...INVOICE_FIELDS.map(([f]) => f)),
    );
    const bodies = fc.oneof(
      // Every field with a value of the wrong type (error-contract-fuzz's corpus).
      fc.constantFrom(...INVOICE_FIELDS).chain(([field, kind]) => wrongTypeFor(kind).map((v) => invoiceWith(field, v))),
      // Any text in every field.
      fc.tuple(fc.constantFrom(...INVOICE_FIELDS.map(([f]) => f)), anyText(64)).map(([field, text]) => invoiceWith(field, text)),
      // Numbers of every kind in every field.
      fc.tuple(fc.constantFrom(...INVOICE_FIELDS.map(([f]) => f)), numberValue).map(([field, n]) => invoiceWith(field, n)),
      // Nesting, to 60 levels, in every field.
      nestedField.map(([depth, kind, field]) => invoiceWith(field, JSON.parse(nested(depth, kind)))),
      // Any mix of the fields (and unknown ones), valid values among them.
      fc.dictionary(fc.constantFrom(...INVOICE_FIELDS.map(([f]) => f.split('.')[0]!), 'bogus', 'constructor', '__proto__'), fieldValue, { maxKeys: 8 }),
      fc.record({
        amount: fc.constantFrom('10.00', 10, 0.5, '0.29', 1e9),
        orderId: fc.string({ minLength: 1, maxLength: 20 }),
        customer: fc.dictionary(
          fc.constantFrom('email', 'phone', 'userId', 'name', 'colour'),
          fc.oneof(fieldValue, fc.constantFrom('a@b.cc', '+79991234567')),
          { maxKeys: 3 },
        ),
        customFields: fc.oneof(fc.constant(null), fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 })),
      }),
    );
    const counts = await disagreements('CreateInvoiceRequest', CreateInvoiceRequest, bodies, 2000);
    // Both verdicts occur: the corpus tests the agreement, not one side of it.
    expect(counts.valid).toBeGreaterThan(50);
    expect(counts.invalid).toBeGreaterThan(50);
  });

  it('CreatePayoutRequest', async () => {
    const bodies = fc.oneof(
      fc.dictionary(fc.constantFrom('amount', 'addressId', 'method', 'account', 'orderId', 'comment', 'bogus'), fieldValue, { maxKeys: 6 }),
      fc.record(
        {
          amount: fc.constantFrom('100.00', 100, '0.001'),
          addressId: fc.oneof(fc.nat(), fieldValue),
          method: fc.constantFrom('sbp', 'usdt_bep20', 'cash'),
          account: fc.oneof(anyText(20), fc.constant('+79991234567')),
          orderId: anyText(10),
          comment: fc.oneof(fc.constant(null), anyText(10)),
        },
        { requiredKeys: ['amount'] },
      ),
    );
    const counts = await disagreements('CreatePayoutRequest', CreatePayoutRequest, bodies, 2000);
    expect(counts.valid).toBeGreaterThan(20);
    expect(counts.invalid).toBeGreaterThan(20);
  });

  it('RefundInvoiceRequest', async () => {
    const bodies = fc.oneof(
      fc.dictionary(fc.constantFrom('amount', 'bogus'), fieldValue, { maxKeys: 2 }),
      numberValue.map((amount) => ({ amount })),
    );
    const counts = await disagreements('RefundInvoiceRequest', RefundInvoiceRequest, bodies, 1000);
    expect(counts.valid).toBeGreaterThan(20);
    expect(counts.invalid).toBeGreaterThan(20);
  });

  it('the one rule JSON Schema cannot state, the byte length of customFields as JSON text, is stated in words and bounded by maxProperties', async () => {
    const schema = OPENAPI_DOCUMENT.components.schemas.CreateInvoiceRequest!.properties!.customFields!;
    expect(schema.description).toContain('2048 байт');
    const validate = schemaOf('CreateInvoiceRequest');
    const tooManyKeys = { amount: '10.00', orderId: 'a', customFields: Object.fromEntries(Array.from({ length: 342 }, (_, i) => [`k${i}`, 1])) };
    expect(validate(tooManyKeys)).toBe(false);
    expect(await serverVerdict(CreateInvoiceRequest, JSON.stringify(tooManyKeys))).toBe(false);
  });
});
