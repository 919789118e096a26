/**
 * One example per operation of the merchant API: the request (path parameters, query,
 * body), the answer, and from these two the `curl` line and the SDK call that the
 * `/docs` page shows. One source, so the three cannot drift apart; the tests validate
 * every request and answer against the document's schemas and check that every SDK
 * method named here exists on the SDK's client.
 */

/** Who calls: test keys for everything but POST /payouts, which takes a live key only. */
export type ExampleKey = 'test' | 'live';

export interface OperationExample {
  /** The path parameters in the path's order (they are also the SDK call's first arguments). */
  readonly params?: Readonly<Record<string, string | number>>;
  readonly query?: Readonly<Record<string, string | number>>;
  readonly body?: Readonly<Record<string, unknown>>;
  /** The POST carries an Idempotency-Key (the SDK makes one per call itself). */
  readonly idempotencyKey?: boolean;
  readonly key?: ExampleKey;
  /** The SDK's method and the name of what it returns. */
  readonly sdk: { readonly method: string; readonly result: string };
  readonly response: { readonly status: number; readonly body: unknown };
}

/** The address of `npm start`; a merchant puts the gateway's own. */
export const EXAMPLE_ORIGIN = 'http://127.0.0.1:3000';

const INVOICE_ID = '6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b';
const REFUND_ID = 'rf_k3v9q2m8x4t7b1n6p5r0w2z8';
const CREATED_AT = '2026-11-23T09:00:00.000Z';
const PAID_AT = '2026-11-23T09:05:12.000Z';

const invoiceCreated = {
  id: INVOICE_ID,
  url: `${EXAMPLE_ORIGIN}/pay/${INVOICE_ID}`,
  status: 'created',
  amount: '1500.00',
  feePct: '1.50',
  feeAmount: '22.50',
  customerFeePct: '1.50',
  customerFeeShare: 100,
  customerFeeAmount: '22.50',
  payableAmount: '1522.50',
  netAmount: '1500.00',
  feePayer: 'customer',
  expiresAt: '2026-11-23T10:00:00.000Z',
};

const invoice = {
  ...invoiceCreated,
  orderId: 'order-1001',
  status: 'paid',
  refundedAmount: '0.00',
  currency: 'RUB',
  method: 'sbp',
  description: 'Заказ №1001',
  customer: { email: 'buyer@example.com' },
  customFields: { cart: 'A-17' },
  isTest: true,
  createdAt: CREATED_AT,
  paidAt: PAID_AT,
  availableAt: '2026-11-24T09:05:12.000Z',
};

const refund = {
  id: REFUND_ID,
  invoiceId: INVOICE_ID,
  amount: '500.00',
  currency: 'RUB',
  status: 'pending',
  createdAt: '2026-11-23T12:00:00.000Z',
  completedAt: null,
};

const payout = {
  id: 345,
  status: 'pending',
  amount: '5000.00',
  feeAmount: '50.00',
  netAmount: '4950.00',
  currency: 'RUB',
  method: 'sbp',
  account: '+7916*****67',
  bank: 'Т-Банк',
  addressId: 12,
  orderId: 'payout-2001',
  comment: 'Вывод за ноябрь',
  usdtAmount: null,
  usdtRate: null,
  statusReason: null,
  externalId: null,
  source: 'api',
  createdAt: '2026-11-23T13:00:00.000Z',
  processedAt: null,
};

const paidPayout = { ...payout, status: 'paid', externalId: 'A3261130900123', processedAt: '2026-11-23T15:30:00.000Z' };

const invoicePaidEvent = { id: '0d4c8f2e-7a1b-4c3d-9e5f-6a7b8c9d0e1f', type: 'invoice.paid', createdAt: PAID_AT, isTest: true, data: { invoice } };
const PAYOUT_ENTRY = '8e2f4a6b-1c3d-5e7f-9a0b-2c4d6e8f0a1b';
const payoutMove = {
  type: 'payout_reserved',
  bucket: 'available',
  fee: null,
  currency: 'RUB',
  createdAt: '2026-11-23T12:00:00.000Z',
  availableAt: null,
  invoiceId: null,
  refundId: null,
  payoutId: 345,
};

export const OPERATION_EXAMPLES: Readonly<Record<string, OperationExample>> = {
  createInvoice: {
    body: { amount: '1500.00', orderId: 'order-1001', method: 'sbp', description: 'Заказ №1001', customer: { email: 'buyer@example.com' } },
    sdk: { method: 'createInvoice', result: 'invoice' },
    response: { status: 201, body: invoiceCreated },
  },
  listInvoices: {
    query: { status: 'paid', limit: 2 },
    sdk: { method: 'listInvoices', result: 'page' },
    response: { status: 200, body: { items: [invoice], nextCursor: 'eyJzZXEiOjE4NDJ9', hasMore: true } },
  },
  getInvoice: {
    params: { id: INVOICE_ID },
    sdk: { method: 'getInvoice', result: 'invoice' },
    response: { status: 200, body: invoice },
  },
  refundInvoice: {
    params: { id: INVOICE_ID },
    body: { amount: '500.00' },
    idempotencyKey: true,
    sdk: { method: 'refundInvoice', result: 'refund' },
    response: { status: 202, body: refund },
  },
  getRefund: {
    params: { id: REFUND_ID },
    sdk: { method: 'getRefund', result: 'refund' },
    response: { status: 200, body: { ...refund, status: 'succeeded', completedAt: '2026-11-23T12:00:10.000Z' } },
  },
  listMethods: {
    sdk: { method: 'listMethods', result: '{ methods }' },
    response: {
      status: 200,
      body: {
        methods: [
          { code: 'sbp', title: 'СБП (Система быстрых платежей)', feePct: '1.50', min: '10.00', max: '1000000.00', currency: 'RUB', enabled: true },
          { code: 'card', title: 'Банковская карта', feePct: '3.00', min: '10.00', max: '600000.00', currency: 'RUB', enabled: true },
          { code: 'crypto', title: 'Криптовалюта (USDT)', feePct: '2.00', min: '500.00', max: '5000000.00', currency: 'RUB', enabled: true },
        ],
      },
    },
  },
  getBalance: {
    sdk: { method: 'getBalance', result: 'balance' },
    response: { status: 200, body: { available: '14775.00', pending: '1500.00', reserved: '500.00', currency: 'RUB' } },
  },
  getStatement: {
    query: { from: '2026-11-01T00:00:00.000Z', to: '2026-12-01T00:00:00.000Z' },
    sdk: { method: 'getStatement', result: 'statement' },
    response: {
      status: 200,
      body: {
        accountId: '0b9d6c1e-7a3f-4e2b-8c5d-9f1a2b3c4d5e',
        checkpoint: { events: 1532, hash: '9c0f3b6a1e4d7c2f8a5b0e3d6c9f2a5b8e1d4c7f0a3b6e9d2c5f8b1a4e7d0c3f', position: '1843/1532' },
        closing: { available: '1477.50', pending: '0.00', reserved: '0.00' },
        currency: 'RUB',
        from: '2026-11-01T00:00:00.000Z',
        mode: 'test',
        object: 'statement',
        opening: { available: '0.00', pending: '0.00', reserved: '0.00' },
        signature: { alg: 'Ed25519', kid: '3be1a07c5d2e9f41', value: 'q1Jx…base64…Ag==' },
        to: '2026-12-01T00:00:00.000Z',
        transactions: [
          {
            amount: '1477.50',
            bucket: 'available',
            cause: `payment:${INVOICE_ID}`,
            entryId: '5d0e2c7a-1b3f-5a8e-9c4d-2f6b1e0a7c3d',
            kind: 'payment_recorded',
            occurredAt: PAID_AT,
          },
        ],
      },
    },
  },
  listAuditKeys: {
    sdk: { method: 'listAuditKeys', result: '{ keys }' },
    response: {
      status: 200,
      body: {
        keys: [
          {
            kid: '3be1a07c5d2e9f41',
            alg: 'Ed25519',
            publicKey: '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA…\n-----END PUBLIC KEY-----\n',
            validFrom: CREATED_AT,
            validUntil: null,
          },
        ],
      },
    },
  },
  listPayoutAddresses: {
    key: 'live',
    sdk: { method: 'listPayoutAddresses', result: '{ items }' },
    response: {
      status: 200,
      body: {
        items: [
          {
            id: 12,
            method: 'sbp',
            label: 'Основной счёт',
            account: '+7916*****67',
            bank: 'Т-Банк',
            status: 'confirmed',
            confirmedAt: '2026-11-20T08:00:00.000Z',
            createdAt: '2026-11-20T07:55:00.000Z',
          },
        ],
      },
    },
  },
  createPayout: {
    key: 'live',
    body: { amount: '5000.00', addressId: 12, orderId: 'payout-2001', comment: 'Вывод за ноябрь' },
    idempotencyKey: true,
    sdk: { method: 'createPayout', result: 'payout' },
    response: { status: 201, body: payout },
  },
  listPayouts: {
    key: 'live',
    query: { status: 'paid', limit: 20 },
    sdk: { method: 'listPayouts', result: 'page' },
    response: { status: 200, body: { items: [paidPayout], nextCursor: null, hasMore: false } },
  },
  getPayout: {
    key: 'live',
    params: { id: 345 },
    sdk: { method: 'getPayout', result: 'payout' },
    response: { status: 200, body: paidPayout },
  },
  listEvents: {
    query: { deliveryStatus: 'failing', limit: 20 },
    sdk: { method: 'listEvents', result: 'page' },
    response: { status: 200, body: { items: [{ ...invoicePaidEvent, deliveryStatus: 'failing' }], nextCursor: null, hasMore: false } },
  },
  getEvent: {
    params: { id: invoicePaidEvent.id },
    sdk: { method: 'getEvent', result: 'event' },
    response: { status: 200, body: invoicePaidEvent },
  },
  listBalanceTransactions: {
    key: 'live',
    query: { payoutId: 345 },
    sdk: { method: 'listBalanceTransactions', result: 'page' },
    response: {
      status: 200,
      body: {
        items: [
          { ...payoutMove, id: '3a5c7e9f-0b2d-4f6a-8c0e-1f3a5c7e9b2d:reserved', type: 'payout_paid', amount: '-5000.00', balanceAfter: '0.00', fee: '50.00', createdAt: '2026-11-23T15:30:00.000Z' },
          { ...payoutMove, id: `${PAYOUT_ENTRY}:reserved`, bucket: 'reserved', amount: '5000.00', balanceAfter: '5000.00' },
          { ...payoutMove, id: `${PAYOUT_ENTRY}:available`, amount: '-5000.00', balanceAfter: '9775.00' },
        ],
        nextCursor: null,
        hasMore: false,
      },
    },
  },
};

// ---------------------------------------------------------------------------
// Rendering: the request as a curl line and as an SDK call
// ---------------------------------------------------------------------------

/** The concrete path of an example: `{name}` replaced by its parameter, the query appended. */
export function examplePath(path: string, example: OperationExample): string {
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = example.params?.[name];
    if (value === undefined) throw new Error(`the example has no path parameter ${name}`);
    return encodeURIComponent(String(value));
  });
  const query = new URLSearchParams(Object.entries(example.query ?? {}).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return query === '' ? filled : `${filled}?${query}`;
}

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** The curl line: the secret key from an environment variable, the exact body. */
export function curlLine(method: string, base: string, path: string, example: OperationExample): string {
  const key = example.key === 'live' ? '$LIVE_SECRET_KEY' : '$SECRET_KEY';
  const parts = [`curl -s${method.toUpperCase() === 'GET' ? '' : ` -X ${method.toUpperCase()}`} ${shellQuote(`${EXAMPLE_ORIGIN}${base}${examplePath(path, example)}`)}`];
  parts.push(`-H "Authorization: Bearer ${key}"`);
  if (example.idempotencyKey) parts.push(`-H "Idempotency-Key: $(uuidgen)"`);
  if (example.body !== undefined) parts.push(`-H 'Content-Type: application/json'`, `-d ${shellQuote(JSON.stringify(example.body))}`);
  return parts.join(' \\\n  ');
}

/** A value as a JavaScript literal: unquoted keys where they are names, strings in single quotes. */
export function jsLiteral(value: unknown, indent = ''): string {
  if (value === null || typeof value !== 'object') {
    return typeof value === 'string' ? `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'` : JSON.stringify(value);
  }
  const inner = `${indent}  `;
  if (Array.isArray(value)) return `[${value.map((v) => jsLiteral(v, inner)).join(', ')}]`;
  const entries = Object.entries(value).map(([k, v]) => `${inner}${/^[A-Za-z_$][\w$]*$/.test(k) ? k : `'${k}'`}: ${jsLiteral(v, inner)}`);
  return entries.length === 0 ? '{}' : `{\n${entries.join(',\n')},\n${indent}}`;
}

/** The SDK call: path parameters first, then the query or the body (the client's signatures). */
export function sdkCall(example: OperationExample): string {
  const args = [...Object.values(example.params ?? {}).map((v) => jsLiteral(v))];
  if (example.query !== undefined) args.push(jsLiteral(example.query));
  if (example.body !== undefined) args.push(jsLiteral(example.body));
  const client = example.key === 'live' ? 'liveGateway' : 'gateway';
  return `const ${example.sdk.result} = await ${client}.${example.sdk.method}(${args.join(', ')});`;
}
