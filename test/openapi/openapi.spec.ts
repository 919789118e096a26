/**
 * The OpenAPI 3.1.0 description (GET /v1/openapi.json) and the docs page (GET /docs):
 * the document's structure, every schema compiled with Ajv (JSON Schema 2020-12, the
 * 3.1 dialect), and real answers of a running gateway validated against the schema the
 * document declares for that operation and status. A mismatch there is a bug of the
 * application or of the description, never a reason to loosen the schema.
 */
import { randomUUID } from 'node:crypto';
import Ajv2020 from 'ajv/dist/2020';
import type { ErrorObject, ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { HTTP_METHODS, OPENAPI_DOCUMENT } from '../../apps/api/src/docs/openapi-document';
import type { OperationObject, PathItemObject, SchemaObject } from '../../apps/api/src/docs/openapi-document';
import { api, expectStatus, InvoiceGateway, Json, Merchant, orderId, poll, Reply, startInvoiceGateway, waitForList } from '../support/merchant-fixtures';
import { BEP20, fund, instantMerchant, paidInvoice, payoutAddress, PHONE, TRC20, waitForBalance } from '../support/money-out-fixtures';

const doc = OPENAPI_DOCUMENT;

/** The operations of the spec, by operationId. */
const SPEC_OPERATIONS = {
  createInvoice: ['post', '/invoices'],
  listInvoices: ['get', '/invoices'],
  getInvoice: ['get', '/invoices/{id}'],
  refundInvoice: ['post', '/invoices/{id}/refund'],
  getRefund: ['get', '/refunds/{id}'],
  listMethods: ['get', '/methods'],
  getBalance: ['get', '/balance'],
  listPayoutAddresses: ['get', '/payout-addresses'],
  createPayout: ['post', '/payouts'],
  listPayouts: ['get', '/payouts'],
  getPayout: ['get', '/payouts/{id}'],
  // Beyond the spec: the signed statement and the keys that check it (docs/audit-log.md).
  getStatement: ['get', '/statements'],
  listAuditKeys: ['get', '/audit/keys'],
} as const;
type OperationId = keyof typeof SPEC_OPERATIONS;

/** The spec's "Required:" lines, verbatim. */
const SPEC_REQUIRED: Record<string, string[]> = {
  InvoiceCreated: ['id', 'url', 'status', 'amount', 'feePct', 'feeAmount', 'customerFeeAmount', 'payableAmount', 'netAmount', 'expiresAt'],
  Invoice: [
    'id',
    'url',
    'orderId',
    'status',
    'amount',
    'feePct',
    'feeAmount',
    'customerFeeAmount',
    'payableAmount',
    'netAmount',
    'currency',
    'isTest',
    'createdAt',
    'expiresAt',
  ],
  InvoiceList: ['items', 'hasMore'],
  Refund: ['id', 'invoiceId', 'amount', 'currency', 'status', 'createdAt'],
  Method: ['code', 'title', 'feePct', 'min', 'max', 'currency', 'enabled'],
  Balance: ['available', 'pending', 'currency'],
  PayoutAddress: ['id', 'method', 'account', 'status', 'createdAt'],
  CreatePayoutRequest: ['amount'],
  Payout: ['id', 'status', 'amount', 'feeAmount', 'netAmount', 'currency', 'method', 'source', 'createdAt'],
  CreateInvoiceRequest: ['amount', 'orderId'],
  PayoutList: ['items', 'hasMore'],
};

const RESOURCES = [
  'Customer',
  'CreateInvoiceRequest',
  'InvoiceCreated',
  'Invoice',
  'InvoiceList',
  'Refund',
  'Method',
  'Balance',
  'PayoutAddress',
  'CreatePayoutRequest',
  'Payout',
  'PayoutList',
  'Error',
];

// ---------------------------------------------------------------------------
// Ajv over the document: components.schemas become $defs of each compiled schema.
// ---------------------------------------------------------------------------

const COMPONENT_REF = /^#\/components\/schemas\/(.+)$/;

/** A deep copy with `#/components/schemas/X` → `#/$defs/X`; `close` adds additionalProperties:false to every open object with properties. */
function rewrite(node: unknown, close = false): unknown {
  if (Array.isArray(node)) return node.map((n) => rewrite(n, close));
  if (typeof node !== 'object' || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$ref' && typeof value === 'string') {
      const m = COMPONENT_REF.exec(value);
      if (!m) throw new Error(`unexpected $ref ${value}`);
      out[key] = `#/$defs/${m[1]}`;
    } else if (key === 'properties' || key === '$defs' || key === 'dependentRequired') {
      out[key] = Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, rewrite(v, close)]));
    } else {
      out[key] = rewrite(value, close);
    }
  }
  if (close && out.properties !== undefined && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

/**
 * Strict, except strictRequired: `anyOf: [{required: [addressId]}, {required: [method, account]}]`
 * (CreatePayoutRequest) is the standard JSON Schema idiom for "one of these field sets",
 * and that lint wants every required name restated in the same subschema.
 */
function newAjv() {
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  return ajv;
}
const ajv = newAjv();
const closedAjv = newAjv();

/** A schema of the document (its $refs resolved against components.schemas), compiled. */
function compile(schema: SchemaObject, close = false): ValidateFunction {
  const wrapper = { $defs: rewrite(doc.components.schemas, close), ...(rewrite(schema, close) as object) };
  return (close ? closedAjv : ajv).compile(wrapper);
}

const errorLines = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);

function operation(id: OperationId): OperationObject {
  const [method, path] = SPEC_OPERATIONS[id];
  const op = doc.paths[path]?.[method];
  if (!op) throw new Error(`no ${method} ${path} in the document`);
  return op;
}

/** The schema the document declares for the answer of `operationId` with `status`. */
function responseSchema(id: OperationId, status: number): SchemaObject {
  const response = operation(id).responses[String(status)];
  if (!response) throw new Error(`${id} declares no ${status} response`);
  const schema = response.content?.['application/json'].schema;
  if (!schema) throw new Error(`${id} ${status} declares no JSON body`);
  return schema;
}

function allOperations(items: Readonly<Record<string, PathItemObject>>): { key: string; path: string; op: OperationObject }[] {
  return Object.entries(items).flatMap(([path, item]) =>
    HTTP_METHODS.filter((m) => item[m]).map((m) => ({ key: `${m.toUpperCase()} ${path}`, path, op: item[m]! })),
  );
}

/** Every `$ref` string anywhere in the document. */
function refsIn(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refsIn(n, out));
  else if (typeof node === 'object' && node !== null) {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsIn(v, out);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The document itself
// ---------------------------------------------------------------------------

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1.0, description version 1.0.0, served under /v1, with both auth modes', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    expect(doc.info.title).toEqual(expect.any(String));
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/v1' })]);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    const headers = Object.values(doc.components.securitySchemes)
      .filter((s) => s.type === 'apiKey')
      .map((s) => (s.type === 'apiKey' ? `${s.in}:${s.name}` : ''));
    expect(headers.sort()).toEqual(['header:X-Public-Id', 'header:X-Signature', 'header:X-Timestamp']);
    expect(doc.security).toEqual([{ bearerAuth: [] }, { hmacPublicId: [], hmacTimestamp: [], hmacSignature: [] }]);
  });

  it('lists the decisions taken where the spec says "not shown"', () => {
    const text = doc.info.description;
    expect(text).toContain('not shown');
    for (const fact of ['{items, nextCursor, hasMore}', '{id, type, createdAt, isTest, data}', '100.00', 'insufficient_balance', 'X-Service-Delivery-Id']) {
      expect(text).toContain(fact);
    }
    // Money going out: fees and minimum per method, the refusals, what counts as "in processing", visibility, masking, USDT.
    for (const fact of [
      '`sbp`: 1.00%',
      '`usdt_trc20`: 2.00%',
      '`usdt_bep20`: 1.50%',
      'PAYOUT_TERMS',
      'amount_out_of_range',
      'too_many_pending',
      'pending, approved или processing',
      'аккаунта',
      'available',
      '+7916*****67',
      'USDT_RUB_RATE',
      '6 знаков',
    ]) {
      expect(text).toContain(fact);
    }
  });

  it('has every operationId of the spec exactly once, at the spec’s method and path', () => {
    const ids = allOperations(doc.paths).map((o) => o.op.operationId);
    for (const id of Object.keys(SPEC_OPERATIONS)) expect(ids.filter((x) => x === id)).toHaveLength(1);
    // Beside the spec's: the events and balance transactions of issue 36.
    expect(ids.sort()).toEqual([...Object.keys(SPEC_OPERATIONS), 'listEvents', 'getEvent', 'listBalanceTransactions'].sort());
    for (const id of Object.keys(SPEC_OPERATIONS) as OperationId[]) expect(operation(id).operationId).toBe(id);
    const webhookIds = allOperations(doc.webhooks).map((o) => o.op.operationId);
    expect(new Set([...ids, ...webhookIds]).size).toBe(ids.length + webhookIds.length);
  });

  it('is structurally sound: responses, path parameters, tags, security schemes, $refs', () => {
    const tagNames = doc.tags.map((t) => t.name);
    for (const { key, path, op } of [...allOperations(doc.paths), ...allOperations(doc.webhooks)]) {
      expect({ key, responses: Object.keys(op.responses).length > 0 }).toEqual({ key, responses: true });
      for (const [status, r] of Object.entries(op.responses)) {
        expect({ key, status, ok: /^([1-5]\d\d|[1-5]XX|default)$/.test(status) && r.description.length > 0 }).toEqual({ key, status, ok: true });
      }
      for (const tag of op.tags) expect(tagNames).toContain(tag);
      for (const requirement of op.security ?? doc.security) {
        for (const scheme of Object.keys(requirement)) expect(doc.components.securitySchemes).toHaveProperty([scheme]);
      }
      if (!path.startsWith('/')) continue; // webhooks are keyed by event kind
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
      expect(pathParams.map((p) => p.name).sort()).toEqual(templated.sort());
      for (const p of pathParams) expect(p.required).toBe(true);
      const names = (op.parameters ?? []).map((p) => `${p.in}:${p.name}`);
      expect(new Set(names).size).toBe(names.length);
    }
    for (const r of refsIn(doc)) {
      const m = COMPONENT_REF.exec(r);
      expect({ ref: r, resolves: m !== null && doc.components.schemas[m[1]!] !== undefined }).toEqual({ ref: r, resolves: true });
    }
  });

  it('has a schema for every resource, with the spec’s required lists', () => {
    for (const name of RESOURCES) expect(doc.components.schemas).toHaveProperty([name]);
    for (const [name, required] of Object.entries(SPEC_REQUIRED)) {
      expect({ name, required: [...(doc.components.schemas[name]!.required ?? [])].sort() }).toEqual({ name, required: [...required].sort() });
    }
  });

  it.each(Object.keys(doc.components.schemas))('components.schemas.%s compiles with Ajv 2020 (strict)', (name) => {
    expect(() => compile({ $ref: `#/components/schemas/${name}` })).not.toThrow();
  });

  it('every parameter, header and body schema of every operation and webhook compiles', () => {
    for (const { op } of [...allOperations(doc.paths), ...allOperations(doc.webhooks)]) {
      for (const p of op.parameters ?? []) compile(p.schema);
      if (op.requestBody) compile(op.requestBody.content['application/json'].schema);
      for (const r of Object.values(op.responses)) {
        if (r.content) compile(r.content['application/json'].schema);
        for (const h of Object.values(r.headers ?? {})) compile(h.schema);
      }
    }
  });

  it('every error response is the one Error schema; 429 carries Retry-After', () => {
    for (const { key, op } of allOperations(doc.paths)) {
      for (const [status, r] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        expect({ key, status, schema: r.content?.['application/json'].schema }).toEqual({ key, status, schema: { $ref: '#/components/schemas/Error' } });
        if (status === '429') expect(r.headers).toHaveProperty(['Retry-After']);
      }
    }
    const error = doc.components.schemas.Error!;
    expect(error.properties!.error).toMatchObject({ type: 'object', required: ['code', 'message'], additionalProperties: false });
    expect(Object.keys(error.properties!.error!.properties!).sort()).toEqual(['code', 'details', 'message', 'param']);
  });

  it('every operation documents 400 (a parameter it does not take is refused), 500 and 503 with Retry-After, and one with a body 413 and 415', () => {
    for (const { key, op } of allOperations(doc.paths)) {
      const statuses = Object.keys(op.responses);
      expect({ key, has400: statuses.includes('400'), has500: statuses.includes('500') }).toEqual({ key, has400: true, has500: true });
      expect({ key, unavailable: op.responses['503'] }).toMatchObject({
        key,
        unavailable: { 'x-error-codes': ['provider_unavailable'], headers: { 'Retry-After': {} } },
      });
      // Any request not all in within 60 s (408 request_timeout); a body too large (413) or not JSON as sent (415).
      expect({ key, timeout: op.responses['408']?.['x-error-codes'] }).toEqual({ key, timeout: ['request_timeout'] });
      if (op.requestBody) expect({ key, bodyErrors: statuses.filter((s) => s === '413' || s === '415') }).toEqual({ key, bodyErrors: ['413', '415'] });
    }
  });

  it('marks the deprecated fields: customerFeeShare, feePayer, payerEmail', () => {
    const s = doc.components.schemas;
    expect(s.CreateInvoiceRequest!.properties).toMatchObject({
      customerFeeShare: { deprecated: true },
      feePayer: { deprecated: true },
      payerEmail: { deprecated: true },
    });
    expect(s.InvoiceCreated!.properties).toMatchObject({ customerFeeShare: { deprecated: true }, feePayer: { deprecated: true } });
    expect(s.Invoice!.properties).toMatchObject({ customerFeeShare: { deprecated: true }, feePayer: { deprecated: true } });
  });

  it('documents the seven webhook kinds with the {id, type, createdAt, isTest, data} envelope', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual(
      ['invoice.paid', 'invoice.failed', 'invoice.expired', 'refund.succeeded', 'refund.failed', 'payout.paid', 'payout.rejected'].sort(),
    );
    for (const name of ['InvoiceEvent', 'RefundEvent', 'PayoutEvent']) {
      expect(doc.components.schemas[name]!.required).toEqual(['id', 'type', 'createdAt', 'isTest', 'data']);
    }
  });

  it('scopes Idempotency-Key as the gateway does: the project and mode, whichever key pair sends it (idempotency-keys.spec.ts)', () => {
    const texts = [doc.info.description ?? '', JSON.stringify(doc.paths), JSON.stringify(doc.components)];
    for (const text of texts) expect(text).not.toMatch(/(той же|этой|другой) пар(ой|ы) ключей/);
    expect(doc.info.description).toContain('Ключ принадлежит проекту и режиму, какой бы парой ключей ни был отправлен запрос');
  });

  it('says how to send a full refund: an empty body labelled JSON is refused (input-edges.spec.ts)', () => {
    const refund = doc.paths['/invoices/{id}/refund']!.post!;
    expect(refund.description).toContain('Полный возврат: тело {} или запрос без тела и без Content-Type');
    expect(refund.description).toContain('пустое тело с Content-Type application/json — 400');
  });

  it('the schemas say what the spec says (spot checks)', () => {
    const s = doc.components.schemas;
    const validate = (name: string, value: unknown) => compile({ $ref: `#/components/schemas/${name}` })(value);
    // Money: two decimals exactly; request amounts also take a number.
    expect(validate('Money', '10.00')).toBe(true);
    expect(validate('Money', '10.0')).toBe(false);
    expect(validate('Money', 10)).toBe(false);
    expect(validate('CreateInvoiceRequest', { amount: 10, orderId: 'a' })).toBe(true);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'a' })).toBe(true);
    expect(validate('CreateInvoiceRequest', { amount: '10.5', orderId: 'a' })).toBe(false);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'x'.repeat(129) })).toBe(false);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'a', expire: 1441 })).toBe(false);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'a', method: 'cash' })).toBe(false);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'a', colour: 'red' })).toBe(false);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'a', customer: { email: 'a@example.com' } })).toBe(true);
    expect(validate('CreateInvoiceRequest', { amount: '10.00', orderId: 'a', customer: { colour: 'red' } })).toBe(false);
    // Payouts: addressId, or method + account together.
    expect(validate('CreatePayoutRequest', { amount: '100.00', addressId: 1 })).toBe(true);
    expect(validate('CreatePayoutRequest', { amount: '100.00', method: 'sbp', account: '+79990000000' })).toBe(true);
    expect(validate('CreatePayoutRequest', { amount: '100.00', method: 'sbp' })).toBe(false);
    expect(validate('CreatePayoutRequest', { amount: '100.00' })).toBe(false);
    // Errors are closed.
    expect(validate('Error', { error: { code: 'validation', message: 'м', param: 'amount', details: [] } })).toBe(true);
    expect(validate('Error', { error: { code: 'validation', message: 'м', extra: 1 } })).toBe(false);
    // Nullable fields are 3.1 style.
    expect(s.Invoice!.properties!.paidAt!.type).toEqual(['string', 'null']);
    expect(s.Invoice!.properties!.method!.enum).toContain(null);
    // Paging parameters.
    for (const id of ['listInvoices', 'listPayouts'] as const) {
      expect(operation(id).parameters!.find((p) => p.name === 'limit')!.schema).toEqual({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
      expect(operation(id).parameters!.find((p) => p.name === 'orderId')!.schema.maxLength).toBe(128);
    }
    const listInvoices = operation('listInvoices').parameters!;
    expect(listInvoices.find((p) => p.name === 'from')!.schema.format).toBe('date-time');
    expect(listInvoices.find((p) => p.name === 'to')!.schema.format).toBe('date-time');
  });
});

// ---------------------------------------------------------------------------
// Real answers of a running gateway
// ---------------------------------------------------------------------------

interface Case {
  readonly operationId: OperationId;
  readonly status: number;
  readonly reply: () => Promise<Reply>;
}

describe('real answers of the gateway match the document', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;
  const replies = new Map<string, { operationId: OperationId; status: number; reply: Reply }>();

  /** Named calls, made in this order in beforeAll (later ones may use what earlier ones created). */
  const created: Record<string, Json> = {};

  // Money going out. `payer`: a merchant whose project releases payments at once (holdHours 0);
  // refunds are made in its test mode, payouts (live keys only) in its live mode. `sibling`:
  // a second project of the same account (payouts belong to the account). `held`: a merchant
  // with the default 24-hour hold, so a paid invoice is `pending`, not `available`.
  let payer: Merchant;
  let sibling: Merchant;
  let held: Merchant;
  const ids: Record<string, string> = {};
  const addresses: Record<string, Json> = {};
  const payoutOrderId = orderId('openapi-payout');
  const sbpPayout = () => ({ amount: '150.00', addressId: addresses.sbp.id, orderId: payoutOrderId, comment: 'Вывод за май' });
  const usdtPayout = { amount: '500.00', method: 'usdt_trc20', account: TRC20 };
  const MONEY_OUT_CASES: Record<string, Case> = {
    'refundInvoice 202 (partial)': {
      operationId: 'refundInvoice',
      status: 202,
      reply: () => payer.test.post(`/v1/invoices/${ids.refundedPartly}/refund`, { amount: '100.00' }),
    },
    'refundInvoice 202 (full, no body)': {
      operationId: 'refundInvoice',
      status: 202,
      reply: () => payer.test.post(`/v1/invoices/${ids.refundedFully}/refund`),
    },
    'refundInvoice 422 refund_exceeds_amount (above the remainder)': {
      operationId: 'refundInvoice',
      status: 422,
      reply: () => payer.test.post(`/v1/invoices/${ids.refundedPartly}/refund`, { amount: '950.00' }),
    },
    'refundInvoice 422 insufficient_balance (money still on hold)': {
      operationId: 'refundInvoice',
      status: 422,
      reply: () => held.test.post(`/v1/invoices/${ids.onHold}/refund`),
    },
    'refundInvoice 409 conflict (unpaid invoice)': {
      operationId: 'refundInvoice',
      status: 409,
      reply: () => payer.test.post(`/v1/invoices/${ids.unpaid}/refund`),
    },
    'refundInvoice 404 invoice_not_found': {
      operationId: 'refundInvoice',
      status: 404,
      reply: () => payer.test.post(`/v1/invoices/${randomUUID()}/refund`, { amount: '10.00' }),
    },
    'refundInvoice 400 validation': {
      operationId: 'refundInvoice',
      status: 400,
      reply: () => payer.test.post(`/v1/invoices/${ids.refundedPartly}/refund`, { amount: 'abc' }),
    },
    'getRefund 200': { operationId: 'getRefund', status: 200, reply: () => payer.test.get(`/v1/refunds/${created.partialRefund.id}`) },
    'getRefund 404 invoice_not_found (unknown id)': {
      operationId: 'getRefund',
      status: 404,
      reply: () => payer.test.get(`/v1/refunds/rf_${randomUUID().replace(/-/g, '').slice(0, 24)}`),
    },
    'getRefund 404 invoice_not_found (key of the other mode)': {
      operationId: 'getRefund',
      status: 404,
      reply: () => payer.live.get(`/v1/refunds/${created.partialRefund.id}`),
    },
    'listPayoutAddresses 200 (one confirmed address)': { operationId: 'listPayoutAddresses', status: 200, reply: () => payer.live.get('/v1/payout-addresses') },
    'createPayout 201 (sbp, addressId, orderId)': { operationId: 'createPayout', status: 201, reply: () => payer.live.post('/v1/payouts', sbpPayout()) },
    'createPayout 200 (orderId repeat)': { operationId: 'createPayout', status: 200, reply: () => payer.live.post('/v1/payouts', sbpPayout()) },
    'createPayout 201 (usdt_trc20, method + account, no orderId)': {
      operationId: 'createPayout',
      status: 201,
      reply: () => payer.live.post('/v1/payouts', usdtPayout),
    },
    'createPayout 409 duplicate_request (same amount and detail, no orderId, within a minute)': {
      operationId: 'createPayout',
      status: 409,
      reply: () => payer.live.post('/v1/payouts', usdtPayout),
    },
    'createPayout 422 insufficient_balance (above available)': {
      operationId: 'createPayout',
      status: 422,
      reply: () => payer.live.post('/v1/payouts', { amount: '1000000.00', addressId: addresses.sbp.id }),
    },
    'createPayout 422 amount_out_of_range (below the minimum)': {
      operationId: 'createPayout',
      status: 422,
      reply: () => payer.live.post('/v1/payouts', { amount: '99.99', addressId: addresses.sbp.id }),
    },
    'createPayout 422 address_not_confirmed': {
      operationId: 'createPayout',
      status: 422,
      reply: () => payer.live.post('/v1/payouts', { amount: '100.00', addressId: addresses.unconfirmed.id }),
    },
    'createPayout 404 address_not_found': {
      operationId: 'createPayout',
      status: 404,
      reply: () => payer.live.post('/v1/payouts', { amount: '100.00', addressId: addresses.foreign.id }),
    },
    'createPayout 400 validation (no addressId, no method + account)': {
      operationId: 'createPayout',
      status: 400,
      reply: () => payer.live.post('/v1/payouts', { amount: '100.00' }),
    },
    'createPayout 403 test_mode': {
      operationId: 'createPayout',
      status: 403,
      reply: () => payer.test.post('/v1/payouts', { amount: '100.00', addressId: addresses.sbp.id }),
    },
    'createPayout 201 (sbp, method + account in another spelling: the third unfinished payout)': {
      operationId: 'createPayout',
      status: 201,
      reply: () => payer.live.post('/v1/payouts', { amount: '200.00', method: 'sbp', account: '8 (916) 123-45-67', orderId: orderId('openapi-payout-3') }),
    },
    'createPayout 409 too_many_pending (a fourth unfinished payout)': {
      operationId: 'createPayout',
      status: 409,
      reply: () => payer.live.post('/v1/payouts', { amount: '100.00', addressId: addresses.sbp.id, orderId: orderId('openapi-payout-4') }),
    },
    'listPayouts 200 (list)': { operationId: 'listPayouts', status: 200, reply: () => payer.live.get('/v1/payouts') },
    'listPayouts 200 (test key: empty list)': { operationId: 'listPayouts', status: 200, reply: () => payer.test.get('/v1/payouts') },
    'listPayouts 200 (orderId: the one payout object)': {
      operationId: 'listPayouts',
      status: 200,
      reply: () => payer.live.get(`/v1/payouts?orderId=${encodeURIComponent(payoutOrderId)}`),
    },
    'listPayouts 404 not_found (unknown orderId)': {
      operationId: 'listPayouts',
      status: 404,
      reply: () => payer.live.get(`/v1/payouts?orderId=${encodeURIComponent(orderId('openapi-nobody'))}`),
    },
    'listPayouts 400 validation': { operationId: 'listPayouts', status: 400, reply: () => payer.live.get('/v1/payouts?limit=0') },
    'getPayout 200': { operationId: 'getPayout', status: 200, reply: () => payer.live.get(`/v1/payouts/${created.sbpPayout.id}`) },
    'getPayout 429 rate_limited (polled again within 3 seconds)': {
      operationId: 'getPayout',
      status: 429,
      reply: () => payer.live.get(`/v1/payouts/${created.sbpPayout.id}`),
    },
    'getPayout 200 (another project of the same account)': {
      operationId: 'getPayout',
      status: 200,
      reply: () => sibling.live.get(`/v1/payouts/${created.sbpPayout.id}`),
    },
    'getPayout 404 not_found': { operationId: 'getPayout', status: 404, reply: () => payer.live.get('/v1/payouts/999999999') },
  };
  const fullRequest = {
    amount: '1500.00',
    orderId: orderId('openapi-full'),
    description: 'Заказ №1: книги',
    method: 'card',
    customerFeePct: 1.5,
    successUrl: 'https://shop.example.com/success',
    failUrl: 'https://shop.example.com/fail',
    expire: 30,
    customer: { email: 'buyer@example.com', phone: '+79991234567', userId: 'user-42', name: 'Иван Петров' },
    customFields: { cart: [1, 2, 3], note: 'тест' },
  };
  const idempotencyKey = randomUUID();
  const keyedBody = JSON.stringify({ amount: '10.00', orderId: orderId('openapi-keyed') });
  const keyedCreate = (body: string, key: string) =>
    shop.test.raw('POST', '/v1/invoices', {
      body,
      headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json', 'idempotency-key': key },
    });
  const CASES: Record<string, Case> = {
    'createInvoice 201 (every field)': { operationId: 'createInvoice', status: 201, reply: () => shop.test.post('/v1/invoices', fullRequest) },
    'createInvoice 200 (idempotent repeat)': { operationId: 'createInvoice', status: 200, reply: () => shop.test.post('/v1/invoices', fullRequest) },
    'createInvoice 201 (minimal, number amount, no method)': {
      operationId: 'createInvoice',
      status: 201,
      reply: () => shop.test.post('/v1/invoices', { amount: 250, orderId: orderId('openapi-min') }),
    },
    'createInvoice 201 (deprecated fields)': {
      operationId: 'createInvoice',
      status: 201,
      reply: () =>
        shop.test.post('/v1/invoices', {
          amount: '300.00',
          orderId: orderId('openapi-dep'),
          method: 'sbp',
          feePayer: 'merchant',
          payerEmail: 'old@example.com',
        }),
    },
    'getInvoice 200 (method chosen)': { operationId: 'getInvoice', status: 200, reply: () => shop.test.get(`/v1/invoices/${created.full.id}`) },
    'getInvoice 200 (no method yet)': { operationId: 'getInvoice', status: 200, reply: () => shop.test.get(`/v1/invoices/${created.minimal.id}`) },
    'getInvoice 200 (paid)': { operationId: 'getInvoice', status: 200, reply: () => shop.test.get(`/v1/invoices/${created.paid.id}`) },
    'listInvoices 200 (page with a next cursor)': { operationId: 'listInvoices', status: 200, reply: () => shop.test.get('/v1/invoices?limit=2') },
    'listInvoices 200 (by orderId)': {
      operationId: 'listInvoices',
      status: 200,
      reply: () => shop.test.get(`/v1/invoices?orderId=${encodeURIComponent(fullRequest.orderId)}`),
    },
    'listInvoices 200 (empty page)': { operationId: 'listInvoices', status: 200, reply: () => shop.test.get('/v1/invoices?status=refunded') },
    'listMethods 200': { operationId: 'listMethods', status: 200, reply: () => shop.test.get('/v1/methods') },
    'getBalance 200': { operationId: 'getBalance', status: 200, reply: () => shop.test.get('/v1/balance') },
    'createInvoice 400 validation': {
      operationId: 'createInvoice',
      status: 400,
      reply: () => shop.test.post('/v1/invoices', { amount: 'abc', orderId: 'x'.repeat(129) }),
    },
    'createInvoice 400 validation (not JSON)': {
      operationId: 'createInvoice',
      status: 400,
      reply: () =>
        shop.test.raw('POST', '/v1/invoices', {
          body: '{"amount":',
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json' },
        }),
    },
    'createInvoice 400 validation (unknown field)': {
      operationId: 'createInvoice',
      status: 400,
      reply: () => shop.test.post('/v1/invoices', { amount: '10.00', orderId: orderId('openapi-unknown'), colour: 'red' }),
    },
    'listInvoices 400 validation': { operationId: 'listInvoices', status: 400, reply: () => shop.test.get('/v1/invoices?limit=0') },
    'createInvoice 401 (no key)': {
      operationId: 'createInvoice',
      status: 401,
      reply: () => api(gw.baseUrl).post('/v1/invoices', { amount: '10.00', orderId: 'o' }),
    },
    'getBalance 401 (unknown key)': { operationId: 'getBalance', status: 401, reply: () => api(gw.baseUrl, `sk_test_${randomUUID()}`).get('/v1/balance') },
    'getInvoice 404 invoice_not_found': { operationId: 'getInvoice', status: 404, reply: () => shop.test.get(`/v1/invoices/${randomUUID()}`) },
    'createInvoice 409 order_id_conflict': {
      operationId: 'createInvoice',
      status: 409,
      reply: () => shop.test.post('/v1/invoices', { ...fullRequest, amount: '1600.00' }),
    },
    'createInvoice 201 (Idempotency-Key)': { operationId: 'createInvoice', status: 201, reply: () => keyedCreate(keyedBody, idempotencyKey) },
    'createInvoice 201 (Idempotency-Key, the first answer replayed)': {
      operationId: 'createInvoice',
      status: 201,
      reply: () => keyedCreate(keyedBody, idempotencyKey),
    },
    'createInvoice 409 idempotency_key_conflict': {
      operationId: 'createInvoice',
      status: 409,
      reply: () => keyedCreate(JSON.stringify({ amount: '20.00', orderId: orderId('openapi-keyed-other') }), idempotencyKey),
    },
    'createInvoice 400 validation (Idempotency-Key)': { operationId: 'createInvoice', status: 400, reply: () => keyedCreate(keyedBody, 'k'.repeat(256)) },
    'createInvoice 422 amount_out_of_range': {
      operationId: 'createInvoice',
      status: 422,
      reply: () => shop.test.post('/v1/invoices', { amount: '1.00', orderId: orderId('openapi-small'), method: 'card' }),
    },
    'createInvoice 422 customer_fee_pct_too_high': {
      operationId: 'createInvoice',
      status: 422,
      reply: () => shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('openapi-fee'), method: 'card', customerFeePct: 50 }),
    },
    'getInvoice 429 rate_limited (polled again within 3 seconds)': {
      operationId: 'getInvoice',
      status: 429,
      reply: () => shop.test.get(`/v1/invoices/${created.full.id}`),
    },
    ...MONEY_OUT_CASES,
  };
  const CODES: Record<string, string> = {
    'createInvoice 400 validation': 'validation',
    'createInvoice 400 validation (not JSON)': 'validation',
    'listInvoices 400 validation': 'validation',
    'createInvoice 400 validation (unknown field)': 'validation',
    'createInvoice 401 (no key)': 'unauthorized',
    'getBalance 401 (unknown key)': 'unauthorized',
    'getInvoice 404 invoice_not_found': 'invoice_not_found',
    'createInvoice 409 order_id_conflict': 'order_id_conflict',
    'createInvoice 409 idempotency_key_conflict': 'idempotency_key_conflict',
    'createInvoice 400 validation (Idempotency-Key)': 'validation',
    'createInvoice 422 amount_out_of_range': 'amount_out_of_range',
    'createInvoice 422 customer_fee_pct_too_high': 'customer_fee_pct_too_high',
    'getInvoice 429 rate_limited (polled again within 3 seconds)': 'rate_limited',
    'refundInvoice 422 refund_exceeds_amount (above the remainder)': 'refund_exceeds_amount',
    'refundInvoice 422 insufficient_balance (money still on hold)': 'insufficient_balance',
    'refundInvoice 409 conflict (unpaid invoice)': 'conflict',
    'refundInvoice 404 invoice_not_found': 'invoice_not_found',
    'refundInvoice 400 validation': 'validation',
    'getRefund 404 invoice_not_found (unknown id)': 'invoice_not_found',
    'getRefund 404 invoice_not_found (key of the other mode)': 'invoice_not_found',
    'createPayout 409 duplicate_request (same amount and detail, no orderId, within a minute)': 'duplicate_request',
    'createPayout 422 insufficient_balance (above available)': 'insufficient_balance',
    'createPayout 422 amount_out_of_range (below the minimum)': 'amount_out_of_range',
    'createPayout 422 address_not_confirmed': 'address_not_confirmed',
    'createPayout 404 address_not_found': 'address_not_found',
    'createPayout 400 validation (no addressId, no method + account)': 'validation',
    'createPayout 403 test_mode': 'test_mode',
    'createPayout 409 too_many_pending (a fourth unfinished payout)': 'too_many_pending',
    'listPayouts 404 not_found (unknown orderId)': 'not_found',
    'listPayouts 400 validation': 'validation',
    'getPayout 429 rate_limited (polled again within 3 seconds)': 'rate_limited',
    'getPayout 404 not_found': 'not_found',
  };
  /** The param of an error answer, where it names a field of the request. */
  const PARAMS: Record<string, string> = {
    'createInvoice 409 idempotency_key_conflict': 'Idempotency-Key',
    'createInvoice 400 validation (Idempotency-Key)': 'Idempotency-Key',
    'refundInvoice 400 validation': 'amount',
    'refundInvoice 422 refund_exceeds_amount (above the remainder)': 'amount',
    'createPayout 422 insufficient_balance (above available)': 'amount',
    'createPayout 422 amount_out_of_range (below the minimum)': 'amount',
    'createPayout 422 address_not_confirmed': 'addressId',
    'createPayout 404 address_not_found': 'addressId',
    'createPayout 400 validation (no addressId, no method + account)': 'addressId',
    'listPayouts 400 validation': 'limit',
  };

  beforeAll(async () => {
    // The polling limit of the spec (once per 3 s per invoice) on, to see a real 429.
    gw = await startInvoiceGateway({ CLOCK: 'manual' });
    shop = await gw.operator.merchant({ name: 'Магазин OpenAPI' });

    const run = async (name: string) => {
      const c = CASES[name]!;
      replies.set(name, { operationId: c.operationId, status: c.status, reply: await c.reply() });
      return replies.get(name)!.reply;
    };
    created.full = (await run('createInvoice 201 (every field)')).body;
    await run('createInvoice 200 (idempotent repeat)');
    created.minimal = (await run('createInvoice 201 (minimal, number amount, no method)')).body;
    created.paid = (await run('createInvoice 201 (deprecated fields)')).body;
    expectStatus(await gw.operator.payment(created.paid.id, 'paid'), 200);
    await waitForList(shop.test, [created.full.id, created.minimal.id, created.paid.id]);
    for (const name of Object.keys(CASES)) if (!replies.has(name) && !(name in MONEY_OUT_CASES)) await run(name);

    // Money going out, in an order that gives each case the answer it names.
    payer = await instantMerchant(gw.operator);
    sibling = await instantMerchant(gw.operator, payer.accountId);
    held = await gw.operator.merchant({ name: 'Магазин с холдом' });
    const other = await instantMerchant(gw.operator);

    // Refunds (test mode of `payer`): two paid 1000.00 invoices, available 2000.00.
    ids.refundedPartly = await paidInvoice(gw.operator, payer.test, '1000.00');
    ids.refundedFully = await paidInvoice(gw.operator, payer.test, '1000.00');
    await waitForBalance(payer.test, { available: '2000.00' });
    const unpaid = await payer.test.post('/v1/invoices', { amount: '500.00', orderId: orderId('openapi-unpaid'), method: 'sbp' });
    expectStatus(unpaid, 201);
    ids.unpaid = unpaid.body.id;
    ids.onHold = await paidInvoice(gw.operator, held.test, '1000.00');
    created.partialRefund = (await run('refundInvoice 202 (partial)')).body; // remainder of that invoice: 900.00
    created.fullRefund = (await run('refundInvoice 202 (full, no body)')).body;
    for (const name of Object.keys(MONEY_OUT_CASES).filter((n) => /^(refundInvoice|getRefund) /.test(n))) if (!replies.has(name)) await run(name);

    // Payouts (live mode of `payer`): 1000.00 available; one confirmed SBP detail listed.
    await fund(gw.operator, payer, 'live', ['1000.00']);
    addresses.sbp = await payoutAddress(gw.operator, payer.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк', label: 'Основной' });
    addresses.unconfirmed = await payoutAddress(gw.operator, payer.accountId, { method: 'usdt_bep20', account: BEP20 }, false);
    addresses.foreign = await payoutAddress(gw.operator, other.accountId, { method: 'sbp', account: PHONE });
    await run('listPayoutAddresses 200 (one confirmed address)');
    addresses.trc20 = await payoutAddress(gw.operator, payer.accountId, { method: 'usdt_trc20', account: TRC20, label: 'Кошелёк' });
    created.sbpPayout = (await run('createPayout 201 (sbp, addressId, orderId)')).body; // unfinished: 1, available 850.00
    await run('createPayout 200 (orderId repeat)');
    created.usdtPayout = (await run('createPayout 201 (usdt_trc20, method + account, no orderId)')).body; // unfinished: 2, available 350.00
    await run('createPayout 409 duplicate_request (same amount and detail, no orderId, within a minute)');
    await run('createPayout 422 insufficient_balance (above available)');
    await run('createPayout 422 amount_out_of_range (below the minimum)');
    await run('createPayout 422 address_not_confirmed');
    await run('createPayout 404 address_not_found');
    await run('createPayout 400 validation (no addressId, no method + account)');
    await run('createPayout 403 test_mode');
    created.thirdPayout = (await run('createPayout 201 (sbp, method + account in another spelling: the third unfinished payout)')).body; // unfinished: 3
    await run('createPayout 409 too_many_pending (a fourth unfinished payout)');
    // The list is a read model: wait until it shows the three payouts.
    await poll(
      () => payer.live.get('/v1/payouts'),
      (r) => r.status === 200 && r.body.items.length === 3,
      'the payout list to show three payouts',
    );
    // Polled twice in a row (well within 3 seconds): 200, then 429.
    await run('getPayout 200');
    await run('getPayout 429 rate_limited (polled again within 3 seconds)');
    for (const name of Object.keys(CASES)) if (!replies.has(name)) await run(name);
  });
  afterAll(async () => {
    await gw?.close();
  });

  it.each(Object.keys(CASES))('%s: status and body match the declared schema', (name) => {
    const { operationId, status, reply } = replies.get(name)!;
    expect({ status: reply.status, body: reply.status === status ? undefined : reply.body }).toEqual({ status, body: undefined });
    expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
    const validate = compile(responseSchema(operationId, status));
    validate(reply.body);
    expect({ body: reply.body, errors: errorLines(validate.errors) }).toEqual({ body: reply.body, errors: [] });
    if (CODES[name]) expect(reply.body.error.code).toBe(CODES[name]);
    if (PARAMS[name]) expect(reply.body.error.param).toBe(PARAMS[name]);
    const declared = operation(operationId).responses[String(status)]!;
    if (declared['x-error-codes']) expect(declared['x-error-codes']).toContain(reply.body.error.code);
    if (status === 429) expect(reply.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it.each(Object.keys(CASES))('%s: every field of the body is documented', (name) => {
    const { operationId, status, reply } = replies.get(name)!;
    const validate = compile(responseSchema(operationId, status), true);
    validate(reply.body);
    const undocumented = (validate.errors ?? [])
      .filter((e) => e.keyword === 'additionalProperties')
      .map((e) => `${e.instancePath || '/'}: ${(e.params as { additionalProperty: string }).additionalProperty}`);
    expect(undocumented).toEqual([]);
  });

  it('the Idempotency-Key cases: the replay is the first answer, marked with the documented header', () => {
    const first = replies.get('createInvoice 201 (Idempotency-Key)')!.reply;
    const replay = replies.get('createInvoice 201 (Idempotency-Key, the first answer replayed)')!.reply;
    expect(replay.body).toEqual(first.body);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const declared = operation('createInvoice').responses['201']!.headers!['Idempotent-Replayed']!;
    const validate = compile(declared.schema);
    expect(validate(replay.headers.get('idempotent-replayed'))).toBe(true);
    for (const id of ['createInvoice', 'refundInvoice', 'createPayout'] as const) {
      expect(operation(id).parameters?.find((p) => p.in === 'header' && p.name === 'Idempotency-Key')).toMatchObject({
        required: false,
        schema: { maxLength: 255 },
      });
      expect(operation(id).responses['409']!['x-error-codes']).toEqual(expect.arrayContaining(['idempotency_key_conflict', 'idempotency_key_in_use']));
    }
  });

  it('the refund and payout cases got the answers they name', () => {
    const body = (name: string) => replies.get(name)!.reply.body;
    expect(body('refundInvoice 202 (partial)')).toMatchObject({
      id: expect.stringMatching(/^rf_[0-9a-z]{24}$/),
      invoiceId: ids.refundedPartly,
      amount: '100.00',
    });
    expect(body('refundInvoice 202 (full, no body)')).toMatchObject({ invoiceId: ids.refundedFully, amount: '1000.00', status: 'pending' });
    expect(body('getRefund 200')).toMatchObject({ id: created.partialRefund.id, invoiceId: ids.refundedPartly, amount: '100.00' });
    expect(body('listPayoutAddresses 200 (one confirmed address)').items).toEqual([
      expect.objectContaining({ id: addresses.sbp.id, method: 'sbp', account: '+7916*****67', bank: 'Сбербанк', label: 'Основной', status: 'confirmed' }),
    ]);
    const sbp = body('createPayout 201 (sbp, addressId, orderId)');
    expect(sbp).toMatchObject({
      status: 'pending',
      amount: '150.00',
      feeAmount: '1.50',
      netAmount: '148.50',
      method: 'sbp',
      account: '+7916*****67',
      addressId: addresses.sbp.id,
      orderId: payoutOrderId,
      usdtAmount: null,
      usdtRate: null,
      source: 'api',
    });
    expect(body('createPayout 200 (orderId repeat)')).toEqual(sbp);
    expect(body('createPayout 201 (usdt_trc20, method + account, no orderId)')).toMatchObject({
      amount: '500.00',
      feeAmount: '10.00',
      netAmount: '490.00',
      method: 'usdt_trc20',
      account: `${TRC20.slice(0, 6)}****${TRC20.slice(-4)}`,
      addressId: addresses.trc20.id,
      orderId: null,
      usdtAmount: '5.157894', // 490.00 / 95.00, rounded down to 6 decimals
      usdtRate: '95.00',
    });
    expect(body('createPayout 201 (sbp, method + account in another spelling: the third unfinished payout)')).toMatchObject({ addressId: addresses.sbp.id });
    const list = body('listPayouts 200 (list)');
    expect(list.items.map((p: Json) => p.id)).toEqual([created.thirdPayout.id, created.usdtPayout.id, created.sbpPayout.id]);
    expect(list).toMatchObject({ nextCursor: null, hasMore: false });
    expect(body('listPayouts 200 (test key: empty list)')).toEqual({ items: [], nextCursor: null, hasMore: false });
    expect(body('listPayouts 200 (orderId: the one payout object)')).toMatchObject({ id: sbp.id, orderId: payoutOrderId });
    expect(body('getPayout 200').id).toBe(sbp.id);
    expect(body('getPayout 200 (another project of the same account)').id).toBe(sbp.id);
  });

  it('GET /v1/openapi.json answers the document, without a key', async () => {
    const r = await api(gw.baseUrl).get('/v1/openapi.json');
    expectStatus(r, 200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body).toEqual(JSON.parse(JSON.stringify(doc)));
  });

  it('GET /docs answers a self-contained HTML page naming every operation, schema and webhook', async () => {
    const r = await api(gw.baseUrl).get('/docs');
    expectStatus(r, 200);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    const html = r.body as string;
    expect(html).toMatch(/^<!DOCTYPE html>/);
    for (const id of Object.keys(SPEC_OPERATIONS)) expect(html).toContain(id);
    for (const [id, [method, path]] of Object.entries(SPEC_OPERATIONS)) {
      expect(html).toContain(`id="op-${id}"`);
      expect(html).toContain(`${method.toUpperCase()}</span> <code class="path">/v1${path}</code>`);
    }
    for (const name of Object.keys(doc.components.schemas)) expect(html).toContain(`id="schema-${name}"`);
    for (const kind of Object.keys(doc.webhooks)) expect(html).toContain(`id="webhook-${kind}"`);
    for (const code of ['order_id_conflict', 'amount_out_of_range', 'Retry-After', 'customerFeeShare', 'X-Signature']) expect(html).toContain(code);
    // HMAC signing as a client without the SDK needs it: the key's bytes, what is not signed, one body a second.
    expect(html).toContain('ключ: вся строка webhook secret проекта с префиксом <code>whsec_</code> как байты UTF-8');
    expect(html).toContain('Подпись не покрывает ни метод, ни путь, ни query');
    expect(html).toMatch(/с одной секундой и одним телом[^.]*несут одну подпись, и второй получает 401 <code>signature_invalid<\/code>/);
    // The payout request's choice of fields (inside allOf, so that generators type the body) is said in words.
    expect(html).toContain('Нужно одно из: <code>addressId</code> или <code>method</code> + <code>account</code>.');
    // No scripts, nothing fetched from elsewhere.
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|src=/i);
    expect(r.headers.get('content-security-policy')).toContain("default-src 'none'");
  });

  it('GET / redirects to /docs, and /favicon.ico is an icon', async () => {
    const root = await fetch(`${gw.baseUrl}/`, { redirect: 'manual' });
    expect({ status: root.status, location: root.headers.get('location') }).toEqual({ status: 302, location: '/docs' });
    const icon = await fetch(`${gw.baseUrl}/favicon.ico`);
    expect({ status: icon.status, type: icon.headers.get('content-type') }).toEqual({ status: 200, type: 'image/svg+xml' });
    expect(await icon.text()).toMatch(/^<svg /);
  });
});
