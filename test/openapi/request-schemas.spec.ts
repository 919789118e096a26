/**
 * Regression (issue 13): the hand-written CreateInvoiceRequest schema disagreed with the
 * server on these points; the generated one states the server's rules. Each sample is
 * judged by the document (Ajv) and by the validator, and both verdicts are pinned.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { OPENAPI_DOCUMENT } from '../../apps/api/src/docs/openapi-document';
import { readRequest } from '../../apps/api/src/http/request-validation';
import { CreateInvoiceRequest } from '../../apps/api/src/invoices/create-invoice.request';

const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
addFormats(ajv);
ajv.addSchema({ $id: 'doc', $defs: JSON.parse(JSON.stringify(OPENAPI_DOCUMENT.components.schemas).replace(/#\/components\/schemas\//g, 'doc#/$defs/')) });
const documentSays = ajv.compile({ $ref: 'doc#/$defs/CreateInvoiceRequest' });
const serverSays = (body: unknown) => {
  const text = JSON.stringify(body);
  try {
    readRequest(CreateInvoiceRequest, JSON.parse(text), Buffer.from(text));
    return true;
  } catch {
    return false;
  }
};
const base = { amount: '10.00', orderId: 'a' };

describe('CreateInvoiceRequest: the document says what the server does', () => {
  it.each([
    ['description', null],
    ['method', null],
    ['customerFeePct', null],
    ['customerFeeShare', null],
    ['feePayer', null],
    ['successUrl', null],
    ['failUrl', null],
    ['expire', null],
    ['payerEmail', null],
    ['customer', null],
    ['customFields', null],
    ['customer', { email: null, phone: null, userId: null, name: null }],
  ])('%s: %j is accepted by both', (field, value) => {
    const body = { ...base, [field]: value };
    expect({ document: documentSays(body), server: serverSays(body) }).toEqual({ document: true, server: true });
  });

  it.each([
    ['an ftp: URL', { successUrl: 'ftp://example.com/x' }],
    ['a javascript: URL', { failUrl: 'javascript:alert(1)' }],
    ['three decimals in a number', { amount: 10.123 }],
    ['an amount above the maximum (number)', { amount: 1000000000.01 }],
    ['an amount above the maximum (string)', { amount: '1000000000.01' }],
    ['a percent above 100', { customerFeePct: 100.5 }],
    ['oversized customFields (342 keys)', { customFields: Object.fromEntries(Array.from({ length: 342 }, (_, i) => [`k${i}`, i])) }],
    ['customFields nested 40 levels', { customFields: JSON.parse(`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`) }],
    ['a NUL in the description', { description: 'a\u0000b' }],
    ['a lone surrogate in customer.name', { customer: { name: '\ud800' } }],
    ['a NUL in a customFields key', { customFields: { 'a\u0000': 1 } }],
    ['an unknown field in customer', { customer: { colour: 'red' } }],
  ])('%s is refused by both', (_, change) => {
    const body = { ...base, ...change };
    expect({ document: documentSays(body), server: serverSays(body) }).toEqual({ document: false, server: false });
  });
});
