/**
 * The generators of the request fuzz corpus: the error-contract fuzz suite sends them to
 * the running gateway, the request-agreement suite runs them through the OpenAPI
 * document (Ajv) and the validator and requires the same verdict.
 */
import fc from 'fast-check';
import { orderId } from './merchant-fixtures';

/** Text of every kind: any UTF-16 code units (lone surrogates too), NUL, Cyrillic, emoji. */
export const anyText = (maxLength = 64) =>
  fc.oneof(
    fc.string({ unit: 'binary', maxLength }),
    fc.string({ unit: 'grapheme', maxLength }),
    fc.string({ unit: fc.constantFrom('\u0000', 'я', 'Ё', '😀', '\ud800', '\udfff', '"', '\\', '\n', '\u2028', '\ufeff', 'a'), maxLength }),
  );

/** A JSON number literal: exponents, many decimals, huge, negative zero. */
export const numberLiteral = fc.oneof(
  fc
    .tuple(fc.integer({ min: -99999, max: 99999 }), fc.constantFrom('e', 'E', 'e+', 'e-', 'E-'), fc.integer({ min: 0, max: 400 }))
    .map(([m, e, x]) => `${m}${e}${x}`),
  fc.tuple(fc.nat({ max: 1_000_000 }), fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: 40 })).map(([i, d]) => `${i}.${d}`),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.constantFrom('-0', '-0.0', '0.00', '1e-400', '1e400', '123456789012345678901234567890', '10.000000000000000001', '9007199254740993'),
);

/** Values of the wrong JSON type for a field that wants `kind`. */
export function wrongTypeFor(kind: 'string' | 'money' | 'number' | 'integer' | 'object' | 'boolean'): fc.Arbitrary<unknown> {
  const str = fc.string({ maxLength: 20 });
  const num = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }));
  // Without the names the JSON parser refuses body-wide (__proto__, constructor): that
  // refusal names the body, not the field (error-contract-fuzz.spec.ts pins it apart).
  const parsable = (v: unknown) => !/"(__proto__|constructor)"/.test(JSON.stringify(v));
  const arr = fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }).filter(parsable);
  const obj = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }).filter(parsable);
  switch (kind) {
    case 'string':
      return fc.oneof(num, fc.boolean(), arr, obj);
    case 'money':
      return fc.oneof(fc.boolean(), arr, obj);
    case 'number':
      return fc.oneof(str, fc.boolean(), arr, obj);
    case 'integer':
      return fc.oneof(
        str,
        fc.boolean(),
        arr,
        obj,
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
      );
    case 'object':
      return fc.oneof(str, num, fc.boolean(), arr);
    case 'boolean':
      return fc.oneof(str, num, arr, obj);
  }
}

/** Every field of CreateInvoiceRequest (customer's nested) and the JSON type it takes. */
export const INVOICE_FIELDS: [string, Parameters<typeof wrongTypeFor>[0]][] = [
  ['amount', 'money'],
  ['orderId', 'string'],
  ['description', 'string'],
  ['method', 'string'],
  ['customerFeePct', 'number'],
  ['customerFeeShare', 'integer'],
  ['feePayer', 'string'],
  ['successUrl', 'string'],
  ['failUrl', 'string'],
  ['expire', 'integer'],
  ['customer', 'object'],
  ['customer.email', 'string'],
  ['customer.phone', 'string'],
  ['customer.userId', 'string'],
  ['customer.name', 'string'],
  ['customFields', 'object'],
  ['payerEmail', 'string'],
];

/** `{amount, orderId}` with `path` (a.b for nested) set to `value`. */
export function invoiceWith(path: string, value: unknown): Record<string, unknown> {
  const body: Record<string, unknown> = { amount: '100.00', orderId: orderId('fuzz') };
  const [head, tail] = path.split('.') as [string, string | undefined];
  if (tail === undefined) body[head] = value;
  else body[head] = { [tail]: value };
  return body;
}

/** Nesting `depth` levels deep, as JSON text. */
export const nested = (depth: number, kind: 'array' | 'object') =>
  kind === 'array' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
