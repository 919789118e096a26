/**
 * Regression (issue 13): the hand-written CreateInvoiceRequest schema disagreed with the
 * server on these points; the generated one states the server's rules. Each sample is
 * judged by the document (Ajv) and by the validator, and both verdicts are pinned.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { OPENAPI_DOCUMENT } from '../../apps/api/src/docs/openapi-document';
import { CreateInvoiceRequest } from '../../apps/api/src/invoices/create-invoice/create-invoice.request';
import { refusalOf } from '../support/request-reading';

const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
addFormats(ajv);
ajv.addSchema({ $id: 'doc', $defs: JSON.parse(JSON.stringify(OPENAPI_DOCUMENT.components.schemas).replace(/#\/components\/schemas\//g, 'doc#/$defs/')) });
const documentSays = ajv.compile({ $ref: 'doc#/$defs/CreateInvoiceRequest' });
const serverSays = async (body: unknown) => (await refusalOf(CreateInvoiceRequest, JSON.stringify(body))) === null;
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
    // Well-formed but too much: the route's own limit answers (422 amount_out_of_range, customer_fee_pct_too_high), not the format rules.
    ['amount', 1000000000.01],
    ['amount', '1000000000.01'],
    ['amount', '123456789012345678901234567890.00'],
    ['customerFeePct', 100.5],
  ])('%s: %j is accepted by both', async (field, value) => {
    const body = { ...base, [field]: value };
    expect({ document: documentSays(body), server: await serverSays(body) }).toEqual({ document: true, server: true });
  });

  it.each([
    ['an ftp: URL', { successUrl: 'ftp://example.com/x' }],
    ['a javascript: URL', { failUrl: 'javascript:alert(1)' }],
    ['a URL after spaces', { successUrl: ' https://example.com/ok' }],
    ['a URL with a space inside', { successUrl: 'https://example.com/o k' }],
    ['a URL with a backslash', { failUrl: 'https:\\\\example.com' }],
    ['three decimals in a number', { amount: 10.123 }],
    ['an amount with three decimals above the maximum', { amount: '1000000000.001' }],
    ['a percent with five decimals above 100', { customerFeePct: 100.00001 }],
    ['oversized customFields (342 keys)', { customFields: Object.fromEntries(Array.from({ length: 342 }, (_, i) => [`k${i}`, i])) }],
    ['a NUL in the description', { description: 'a\u0000b' }],
    ['a lone surrogate in customer.name', { customer: { name: '\ud800' } }],
    ['a NUL in a customFields key', { customFields: { 'a\u0000': 1 } }],
    ['an integer past 2^53 in customFields', { customFields: { n: [1, { id: 2 ** 53 }] } }],
    ['an unknown field in customer', { customer: { colour: 'red' } }],
  ])('%s is refused by both', async (_, change) => {
    const body = { ...base, ...change };
    expect({ document: documentSays(body), server: await serverSays(body) }).toEqual({ document: false, server: false });
  });

  it("the depth of customFields (32 levels) is the validator's, said in words: one recursive schema takes any depth", async () => {
    expect(OPENAPI_DOCUMENT.components.schemas.CreateInvoiceRequest!.properties!.customFields!.description).toContain('вложенность до 32 уровней');
    const body = { ...base, customFields: JSON.parse(`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`) };
    expect({ document: documentSays(body), server: await serverSays(body) }).toEqual({ document: true, server: false });
  });
});
