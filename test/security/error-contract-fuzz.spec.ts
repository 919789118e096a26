/**
 * The spec's error contract under fuzzing (fast-check), on every merchant endpoint
 * and the operator endpoints:
 * - never a 5xx;
 * - every non-2xx answer is exactly `{error: {code, message, param?, details?}}`
 *   (snake_case code, a non-empty Russian message, no other keys, no stack);
 * - a 2xx body never has an `error` key;
 * - refused requests write nothing (row counts of the gateway's database).
 * Then the specific answers: unknown routes, wrong methods, bodies that are not JSON,
 * too large or of another content type, field violations with their (nested) param
 * and every violation in details, unknown fields.
 *
 * Counterexamples print with fast-check's seed and path; rerun one with
 * `fc.assert(..., { seed, path })`.
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { CYRILLIC, expectStatus, InvoiceGateway, Json, Merchant, orderId, Reply, startInvoiceGateway } from '../support/merchant-fixtures';
import { sendRaw, signRequest } from '../support/signing';
import { anyText, INVOICE_FIELDS, invoiceWith, nested, numberLiteral, wrongTypeFor } from '../support/request-fuzz';

const SNAKE_CASE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/;
const STACK_TRACE = /\n\s+at |node_modules|[\w-]+\.(?:ts|js):\d+|Error: /;
const ERROR_KEYS = new Set(['code', 'message', 'param', 'details']);
const BODY_LIMIT = 64 * 1024;

/** What is wrong with an answer under the spec's error contract; null when nothing. */
function contractViolation(reply: Reply): string | null {
  if (!Number.isInteger(reply.status)) return 'no status';
  if (reply.status >= 500) return `a ${reply.status} answer`;
  const body = reply.body;
  const isObject = typeof body === 'object' && body !== null && !Array.isArray(body);
  if (reply.status >= 200 && reply.status < 300) {
    return isObject && 'error' in body ? 'a 2xx body with an error key' : null;
  }
  if (!isObject) return 'an error answer that is not a JSON object';
  if (!/^application\/json/.test(reply.headers.get('content-type') ?? '')) return `content-type ${reply.headers.get('content-type')}`;
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== 'error') return `top-level keys ${JSON.stringify(keys)} instead of ["error"]`;
  const error = body.error;
  if (typeof error !== 'object' || error === null || Array.isArray(error)) return 'error is not an object';
  const extra = Object.keys(error).filter((k) => !ERROR_KEYS.has(k));
  if (extra.length > 0) return `unexpected keys in error: ${extra.join(', ')}`;
  if (typeof error.code !== 'string' || !SNAKE_CASE.test(error.code)) return `code ${JSON.stringify(error.code)} is not snake_case`;
  if (typeof error.message !== 'string' || error.message.trim() === '') return 'message is not a non-empty string';
  if (!CYRILLIC.test(error.message)) return `message ${JSON.stringify(error.message)} is not in Russian`;
  if ('param' in error && typeof error.param !== 'string') return `param ${JSON.stringify(error.param)} is not a string`;
  if ('details' in error) {
    if (!Array.isArray(error.details)) return 'details is not an array';
    for (const d of error.details) {
      if (typeof d !== 'object' || d === null || typeof d.param !== 'string' || typeof d.message !== 'string' || typeof d.code !== 'string') {
        return `a detail that is not {param, code, message}: ${JSON.stringify(d)}`;
      }
    }
  }
  if (STACK_TRACE.test(JSON.stringify(body))) return 'the answer looks like it carries a stack trace or source path';
  return null;
}

function expectContract(reply: Reply, what: string): void {
  const violation = contractViolation(reply);
  if (violation) throw new Error(`${what}: ${violation}; got ${reply.status} ${JSON.stringify(reply.body)?.slice(0, 400)}`);
}

/** The spec's error: status, code (and param when given), exact shape, Russian message. */
function expectApiError(reply: Reply, status: number | number[], code: string | string[], param?: string): void {
  const statuses = Array.isArray(status) ? status : [status];
  const codes = Array.isArray(code) ? code : [code];
  if (!statuses.includes(reply.status) || !codes.includes(reply.body?.error?.code)) {
    throw new Error(`expected ${statuses.join(' or ')} ${codes.join(' or ')}, got ${reply.status} ${JSON.stringify(reply.body)?.slice(0, 400)}`);
  }
  if (param !== undefined) expect(reply.body.error.param).toBe(param);
  expectContract(reply, 'error shape');
}

/** Printable Latin-1 (what an HTTP header value can carry). */
const headerText = (maxLength = 80) =>
  fc.string({
    unit: fc
      .integer({ min: 0x20, max: 0xff })
      .filter((c) => c !== 0x7f)
      .map((c) => String.fromCharCode(c)),
    maxLength,
  });

describe('the error contract under fuzzing', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;
  let scratch: Merchant;
  let invoiceId: string;
  let webhookSecret: string;

  const send = (method: string, path: string, init: { headers?: Record<string, string>; body?: string | Buffer } = {}) =>
    sendRaw(gw.baseUrl, method, path, init);
  const merchantHeaders = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${shop.keys.test.secretKey}`, ...extra });
  const adminHeaders = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${gw.gateway.adminToken}`, ...extra });
  const json = { 'content-type': 'application/json' };

  interface Endpoint {
    readonly name: string;
    readonly method: 'GET' | 'POST' | 'PATCH';
    readonly path: () => string;
    readonly admin: boolean;
    readonly body: boolean;
  }
  const ENDPOINTS: Endpoint[] = [
    { name: 'POST /v1/invoices', method: 'POST', path: () => '/v1/invoices', admin: false, body: true },
    { name: 'GET /v1/invoices', method: 'GET', path: () => '/v1/invoices', admin: false, body: false },
    { name: 'GET /v1/invoices/{id}', method: 'GET', path: () => `/v1/invoices/${invoiceId}`, admin: false, body: false },
    { name: 'GET /v1/methods', method: 'GET', path: () => '/v1/methods', admin: false, body: false },
    { name: 'GET /v1/balance', method: 'GET', path: () => '/v1/balance', admin: false, body: false },
    { name: 'POST /admin/v1/accounts', method: 'POST', path: () => '/admin/v1/accounts', admin: true, body: true },
    { name: 'POST /admin/v1/projects', method: 'POST', path: () => '/admin/v1/projects', admin: true, body: true },
    { name: 'PATCH /admin/v1/projects/{id}', method: 'PATCH', path: () => `/admin/v1/projects/${scratch.projectId}`, admin: true, body: true },
    { name: 'POST /admin/v1/invoices/{id}/payment', method: 'POST', path: () => `/admin/v1/invoices/${invoiceId}/payment`, admin: true, body: true },
    { name: 'POST /admin/v1/clock/advance', method: 'POST', path: () => '/admin/v1/clock/advance', admin: true, body: true },
    // The money going out: the target invoice is unpaid (a refund of it is refused), the
    // keys are test keys (payouts are refused), and the ids below do not exist.
    { name: 'POST /v1/invoices/{id}/refund', method: 'POST', path: () => `/v1/invoices/${invoiceId}/refund`, admin: false, body: true },
    { name: 'GET /v1/refunds/{id}', method: 'GET', path: () => '/v1/refunds/rf_000000000000000000000000', admin: false, body: false },
    { name: 'GET /v1/payout-addresses', method: 'GET', path: () => '/v1/payout-addresses', admin: false, body: false },
    { name: 'POST /v1/payouts', method: 'POST', path: () => '/v1/payouts', admin: false, body: true },
    { name: 'GET /v1/payouts', method: 'GET', path: () => '/v1/payouts', admin: false, body: false },
    { name: 'GET /v1/payouts/{id}', method: 'GET', path: () => '/v1/payouts/999999999', admin: false, body: false },
    { name: 'GET /v1/events', method: 'GET', path: () => '/v1/events', admin: false, body: false },
    { name: 'GET /v1/events/{id}', method: 'GET', path: () => '/v1/events/00000000-0000-4000-8000-000000000000', admin: false, body: false },
    { name: 'GET /v1/balance/transactions', method: 'GET', path: () => '/v1/balance/transactions', admin: false, body: false },
    {
      name: 'POST /admin/v1/payout-addresses/{id}/confirm',
      method: 'POST',
      path: () => '/admin/v1/payout-addresses/999999999/confirm',
      admin: true,
      body: true,
    },
    { name: 'POST /admin/v1/payouts/{id}/reject', method: 'POST', path: () => '/admin/v1/payouts/999999999/reject', admin: true, body: true },
    { name: 'POST /admin/v1/refunds/{id}/fail', method: 'POST', path: () => '/admin/v1/refunds/rf_000000000000000000000000/fail', admin: true, body: true },
    { name: 'GET /admin/v1/webhook-deliveries', method: 'GET', path: () => '/admin/v1/webhook-deliveries', admin: true, body: false },
    {
      name: 'GET /admin/v1/audit/trial-balance',
      method: 'GET',
      path: () => '/admin/v1/audit/trial-balance?asOf=2026-01-01T00:00:00Z',
      admin: true,
      body: false,
    },
    {
      name: 'GET /admin/v1/audit/reconciliation',
      method: 'GET',
      path: () => '/admin/v1/audit/reconciliation?from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z',
      admin: true,
      body: false,
    },
  ];
  /** Every route with an id (merchant and operator), and the status an id with NUL gets there. */
  const ID_ROUTES: { name: string; method: string; path: (id: string) => string; headers: () => Record<string, string>; body?: string; nulStatus: number }[] = [
    { name: 'GET /v1/invoices/{id}', method: 'GET', path: (id) => `/v1/invoices/${id}`, headers: () => merchantHeaders(), nulStatus: 404 },
    {
      name: 'POST /v1/invoices/{id}/refund',
      method: 'POST',
      path: (id) => `/v1/invoices/${id}/refund`,
      headers: () => merchantHeaders(),
      body: '{}',
      nulStatus: 404,
    },
    { name: 'GET /v1/refunds/{id}', method: 'GET', path: (id) => `/v1/refunds/${id}`, headers: () => merchantHeaders(), nulStatus: 404 },
    { name: 'GET /v1/payouts/{id} (test key)', method: 'GET', path: (id) => `/v1/payouts/${id}`, headers: () => merchantHeaders(), nulStatus: 404 },
    {
      name: 'GET /v1/payouts/{id} (live key)',
      method: 'GET',
      path: (id) => `/v1/payouts/${id}`,
      headers: () => ({ authorization: `Bearer ${shop.keys.live.secretKey}` }),
      nulStatus: 404,
    },
    { name: 'GET /admin/v1/projects/{id}', method: 'GET', path: (id) => `/admin/v1/projects/${id}`, headers: () => adminHeaders(), nulStatus: 404 },
    {
      name: 'PATCH /admin/v1/projects/{id}',
      method: 'PATCH',
      path: (id) => `/admin/v1/projects/${id}`,
      headers: () => adminHeaders(),
      body: '{"name":"Переименован"}',
      nulStatus: 404,
    },
    {
      name: 'POST /admin/v1/projects/{id}/keys/rotate',
      method: 'POST',
      path: (id) => `/admin/v1/projects/${id}/keys/rotate`,
      headers: () => adminHeaders(),
      body: '{"mode":"bogus"}',
      nulStatus: 404,
    },
    {
      name: 'POST /admin/v1/invoices/{id}/payment',
      method: 'POST',
      path: (id) => `/admin/v1/invoices/${id}/payment`,
      headers: () => adminHeaders(),
      body: '{"outcome":"paid"}',
      nulStatus: 404,
    },
    {
      name: 'POST /admin/v1/accounts/{id}/payout-addresses',
      method: 'POST',
      path: (id) => `/admin/v1/accounts/${id}/payout-addresses`,
      headers: () => adminHeaders(),
      body: '{"method":"sbp","account":"+79161234567"}',
      nulStatus: 404,
    },
    {
      name: 'POST /admin/v1/payout-addresses/{id}/confirm',
      method: 'POST',
      path: (id) => `/admin/v1/payout-addresses/${id}/confirm`,
      headers: () => adminHeaders(),
      nulStatus: 404,
    },
    {
      name: 'POST /admin/v1/payouts/{id}/approve',
      method: 'POST',
      path: (id) => `/admin/v1/payouts/${id}/approve`,
      headers: () => adminHeaders(),
      nulStatus: 404,
    },
    {
      name: 'POST /admin/v1/payouts/{id}/cancel',
      method: 'POST',
      path: (id) => `/admin/v1/payouts/${id}/cancel`,
      headers: () => adminHeaders(),
      body: '{"reason":"нет"}',
      nulStatus: 404,
    },
    { name: 'POST /admin/v1/refunds/{id}/fail', method: 'POST', path: (id) => `/admin/v1/refunds/${id}/fail`, headers: () => adminHeaders(), nulStatus: 404 },
    {
      name: 'POST /admin/v1/webhook-deliveries/{id}/resend',
      method: 'POST',
      path: (id) => `/admin/v1/webhook-deliveries/${id}/resend`,
      headers: () => adminHeaders(),
      nulStatus: 404,
    },
    {
      name: 'GET /admin/v1/accounts/{id}/ledger',
      method: 'GET',
      path: (id) => `/admin/v1/accounts/${id}/ledger?mode=test`,
      headers: () => adminHeaders(),
      nulStatus: 400,
    },
    {
      name: 'GET /admin/v1/accounts/{id}/balance',
      method: 'GET',
      path: (id) => `/admin/v1/accounts/${id}/balance?mode=test`,
      headers: () => adminHeaders(),
      nulStatus: 400,
    },
    {
      name: 'GET /admin/v1/accounts/{id}/statement',
      method: 'GET',
      path: (id) => `/admin/v1/accounts/${id}/statement?mode=test&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z`,
      headers: () => adminHeaders(),
      nulStatus: 400,
    },
    { name: 'GET /admin/v1/streams/{name}', method: 'GET', path: (id) => `/admin/v1/streams/${id}`, headers: () => adminHeaders(), nulStatus: 404 },
  ];
  /** Every list with a cursor (merchant and operator). */
  const LISTS: { name: string; path: () => string; headers: () => Record<string, string> }[] = [
    { name: 'GET /v1/invoices', path: () => '/v1/invoices', headers: () => merchantHeaders() },
    { name: 'GET /v1/payouts (test key)', path: () => '/v1/payouts', headers: () => merchantHeaders() },
    { name: 'GET /v1/payouts (live key)', path: () => '/v1/payouts', headers: () => ({ authorization: `Bearer ${shop.keys.live.secretKey}` }) },
    { name: 'GET /admin/v1/webhook-deliveries', path: () => '/admin/v1/webhook-deliveries', headers: () => adminHeaders() },
    { name: 'GET /v1/events', path: () => '/v1/events', headers: () => merchantHeaders() },
    { name: 'GET /v1/balance/transactions', path: () => '/v1/balance/transactions', headers: () => merchantHeaders() },
    { name: 'GET /admin/v1/accounts/{id}/ledger', path: () => `/admin/v1/accounts/${shop.accountId}/ledger?mode=test`, headers: () => adminHeaders() },
  ];
  const WITH_BODY = ENDPOINTS.filter((e) => e.body);
  const MERCHANT = ENDPOINTS.filter((e) => !e.admin);

  const call = (e: Endpoint, body: string | Buffer | undefined, headers: Record<string, string> = {}) =>
    send(e.method, e.path(), {
      body: e.body ? body : undefined,
      headers: { ...(e.admin ? adminHeaders() : merchantHeaders()), ...(e.body && body !== undefined ? json : {}), ...headers },
    });

  /** Row counts of what a request may write: the event log, accounts, projects, keys; and the mutable bits. */
  async function writtenState(): Promise<Json> {
    const q = async (sql: string) => (await gw.db.pool.query(sql)).rows[0];
    return {
      events: await q('SELECT count(*)::int AS n, coalesce(max(global_position), 0)::text AS last FROM events'),
      streams: await q('SELECT count(*)::int AS n FROM event_streams'),
      accounts: await q('SELECT count(*)::int AS n FROM accounts'),
      projects: await q('SELECT count(*)::int AS n, max(updated_at) AS updated FROM projects'),
      keys: await q('SELECT count(*)::int AS n, count(revoked_at)::int AS revoked FROM api_keys'),
      clock: await q('SELECT offset_ms::text AS offset FROM manual_clock'),
    };
  }

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      // The fuzz sends POST /admin/v1/clock/advance too, which only a manual clock serves (and leaves as it was).
      CLOCK: 'manual',
      // Thousands of requests from one address and key, failing ones on purpose: the limits have suites of their own.
      AUTH_FAILURE_LIMIT_PER_ADDRESS: '1000000',
      AUTH_FAILURE_LIMIT_OVERALL: '1000000',
      RATE_LIMIT_PER_SECOND: '1000000',
      POLL_INTERVAL_SECONDS: '0',
    });
    shop = await gw.operator.merchant({ name: 'Фаззинг' });
    scratch = await gw.operator.merchant({ name: 'Черновик' });
    const created = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('target') });
    expectStatus(created, 201);
    invoiceId = created.body.id;
    const project = await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`);
    webhookSecret = project.body.webhookSecret;
  });

  afterAll(async () => {
    await gw?.close();
  });

  describe('refused requests write nothing', () => {
    it('500 requests that must all be refused leave the event log, accounts, projects, keys and the clock as they were', async () => {
      const s = (arb: fc.Arbitrary<unknown>, n: number, seed: number) => fc.sample(arb, { numRuns: n, seed });
      type Req = { method: string; path: string; body?: string; headers: Record<string, string> };
      const requests: Req[] = [];
      const invoice = (body: unknown, headers: Record<string, string> = merchantHeaders()) =>
        requests.push({ method: 'POST', path: '/v1/invoices', body: JSON.stringify(body), headers: { ...headers, ...json } });
      const admin = (method: string, path: string, body: unknown, headers: Record<string, string> = adminHeaders()) =>
        requests.push({ method, path, body: JSON.stringify(body), headers: { ...headers, ...json } });
      const validInvoice = () => ({ amount: '100.00', orderId: orderId('refused') });
      const accountsBody = { name: 'ООО Тест', email: `x-${randomUUID()}@example.com` };

      // Every field of CreateInvoiceRequest of a wrong type.
      for (const [field, kind] of INVOICE_FIELDS) for (const v of s(wrongTypeFor(kind), 8, 1)) invoice(invoiceWith(field, v));
      // Out of range, enum, length.
      for (const change of [
        { amount: '0.001' },
        { amount: '-1.00' },
        { orderId: 'x'.repeat(129) },
        { description: 'д'.repeat(256) },
        { method: 'cash' },
        { expire: 0 },
        { expire: 1441 },
        { customerFeeShare: 101 },
        { customer: { email: 'a@' } },
        { customer: { phone: '123' } },
        { bogus: 1 },
        { successUrl: 'ftp://x' },
      ]) {
        invoice({ ...validInvoice(), ...change });
      }
      // Valid bodies with wrong credentials (bearer and HMAC).
      for (const token of s(headerText(60), 40, 2)) invoice(validInvoice(), { authorization: `Bearer ${String(token)}` });
      for (let i = 0; i < 30; i++) {
        const body = JSON.stringify(validInvoice());
        const ts = String(Math.floor(Date.now() / 1000));
        const bad = [
          { 'x-public-id': shop.keys.test.publicKey, 'x-timestamp': ts, 'x-signature': signRequest(webhookSecret, ts, `${body} `) },
          { 'x-public-id': shop.keys.test.publicKey, 'x-timestamp': 'now', 'x-signature': signRequest(webhookSecret, 'now', body) },
          { 'x-public-id': `pk_test_${'Z'.repeat(24)}`, 'x-timestamp': ts, 'x-signature': signRequest(webhookSecret, ts, body) },
        ][i % 3]!;
        requests.push({ method: 'POST', path: '/v1/invoices', body, headers: { ...bad, ...json } });
      }
      // Malformed, truncated, oversized, deeply nested, undecodable bodies.
      for (const text of s(
        fc.json().filter((t) => t.length > 1),
        30,
        3,
      )) {
        const t = String(text);
        requests.push({ method: 'POST', path: '/v1/invoices', body: t.slice(0, t.length - 1), headers: { ...merchantHeaders(), ...json } });
      }
      for (let i = 0; i < 5; i++)
        requests.push({
          method: 'POST',
          path: '/v1/invoices',
          body: JSON.stringify({ ...validInvoice(), description: 'я'.repeat(40_000) }),
          headers: { ...merchantHeaders(), ...json },
        });
      for (const depth of [3000, 5000, 10000])
        requests.push({
          method: 'POST',
          path: '/v1/invoices',
          body: `{"amount":"100.00","orderId":"${orderId('deep')}","customFields":{"a":${nested(depth, 'array')}}}`,
          headers: { ...merchantHeaders(), ...json },
        });
      for (const text of ['a\ud800', '\udc00b', '\u0000']) invoice({ ...validInvoice(), description: text });
      requests.push({
        method: 'POST',
        path: '/v1/invoices',
        body: JSON.stringify(validInvoice()),
        headers: { ...merchantHeaders(), 'content-type': 'multipart/form-data; boundary=x' },
      });

      // Operator endpoints: invalid bodies, and valid bodies without the operator token.
      for (const v of s(wrongTypeFor('string'), 15, 4)) admin('POST', '/admin/v1/accounts', { name: v, email: 'a@example.com' });
      for (const v of ['', 'not-an-email', 'a@', null]) admin('POST', '/admin/v1/accounts', { name: 'X', email: v });
      admin('POST', '/admin/v1/accounts', { name: 'X' });
      for (let i = 0; i < 10; i++) admin('POST', '/admin/v1/accounts', accountsBody, merchantHeaders());
      for (const change of [
        { holdHours: -1 },
        { holdHours: 'x' },
        { status: 'frozen' },
        { usdtEnabled: 'yes' },
        { webhookUrl: 'nope' },
        { webhookEvents: ['x'] },
        { customerFeeShare: 101 },
        { methods: { sbp: { feePct: -1 } } },
        { methods: { card: { min: '5.00', max: '1.00' } } },
        { name: '' },
        { bogus: true },
      ]) {
        admin('POST', '/admin/v1/projects', { accountId: shop.accountId, name: 'Новый', ...change });
        admin('PATCH', `/admin/v1/projects/${shop.projectId}`, change);
      }
      for (let i = 0; i < 10; i++)
        admin('POST', '/admin/v1/projects', { accountId: shop.accountId, name: 'Новый' }, { authorization: `Bearer ${shop.keys.live.secretKey}` });
      admin('PATCH', `/admin/v1/projects/${shop.projectId}`, { accountId: scratch.accountId });
      for (let i = 0; i < 10; i++) admin('PATCH', `/admin/v1/projects/${shop.projectId}`, { status: 'blocked' }, {});
      for (const mode of ['x', 'TEST', null, 1]) admin('POST', `/admin/v1/projects/${shop.projectId}/keys/rotate`, { mode });
      admin('POST', `/admin/v1/projects/${shop.projectId}/keys/rotate`, { mode: 'test' }, merchantHeaders());
      for (const outcome of ['x', 'PAID', null, 1, ['paid']]) admin('POST', `/admin/v1/invoices/${invoiceId}/payment`, { outcome });
      admin('POST', `/admin/v1/invoices/${invoiceId}/payment`, { outcome: 'paid', method: 'cash' });
      for (let i = 0; i < 5; i++) admin('POST', `/admin/v1/invoices/${invoiceId}/payment`, { outcome: 'paid' }, merchantHeaders());
      for (const seconds of [-1, 1.5, '60', null, 1e12, [1], true]) admin('POST', '/admin/v1/clock/advance', { seconds });
      for (let i = 0; i < 5; i++) admin('POST', '/admin/v1/clock/advance', { seconds: 3600 }, merchantHeaders());
      while (requests.length < 500) invoice(invoiceWith('expire', 0));

      const before = await writtenState();
      const replies: Reply[] = new Array(requests.length);
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < requests.length) {
            const i = next++;
            const r = requests[i]!;
            replies[i] = await send(r.method, r.path, { body: r.body, headers: r.headers });
          }
        }),
      );
      const accepted = replies.map((r, i) => ({ r, req: requests[i]! })).filter(({ r }) => r.status < 400);
      expect(accepted.map(({ r, req }) => `${req.method} ${req.path} ${req.body?.slice(0, 120)} → ${r.status}`)).toEqual([]);
      expect(await writtenState()).toEqual(before);
    });
  });

  describe('fuzzing every endpoint (fast-check)', () => {
    it('malformed bodies on every endpoint that takes one: no 5xx, the exact error shape', async () => {
      const where = fc.constantFrom(
        'top',
        'amount',
        'orderId',
        'description',
        'customFields',
        'customer',
        'name',
        'seconds',
        'outcome',
        'methods',
        'holdHours',
      );
      const body: fc.Arbitrary<string | Buffer> = fc.oneof(
        { weight: 4, arbitrary: fc.jsonValue({ stringUnit: 'binary' }).map((v) => JSON.stringify(v) ?? 'null') },
        { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 200 }) },
        {
          weight: 3,
          arbitrary: fc
            .json()
            .filter((t) => t.length > 1)
            .chain((t) => fc.nat({ max: t.length - 1 }).map((k) => t.slice(0, k))),
        },
        { weight: 3, arbitrary: fc.tuple(where, numberLiteral).map(([k, n]) => (k === 'top' ? n : `{"amount":"10.00","orderId":"fz","${k}":${n}}`)) },
        {
          weight: 3,
          arbitrary: fc
            .tuple(where, anyText(100))
            .map(([k, t]) => JSON.stringify(k === 'top' ? t : { amount: '10.00', orderId: `fz-${randomUUID()}`, [k]: t })),
        },
        {
          weight: 2,
          arbitrary: fc
            .tuple(fc.integer({ min: 1, max: 12_000 }), fc.constantFrom<'array' | 'object'>('array', 'object'), where)
            .map(([d, kind, k]) => (k === 'top' ? nested(d, kind) : `{"amount":"10.00","orderId":"fz","${k}":${nested(d, kind)}}`)),
        },
        {
          weight: 1,
          arbitrary: fc.integer({ min: 60_000, max: 70_000 }).map((n) => JSON.stringify({ amount: '10.00', orderId: 'fz', description: 'x'.repeat(n) })),
        },
        { weight: 2, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            '{"__proto__":{"admin":true}}',
            '{"constructor":{"prototype":{"admin":true}}}',
            '{"amount":"10.00","orderId":"fz","customFields":{"__proto__":{"x":1}}}',
            '{"amount":"10.00","amount":"20.00","orderId":"fz-dup"}',
            '\ufeff{}',
            '{}garbage',
            '{"a":1}{"b":2}',
            '',
            ' ',
            'null',
            'NaN',
            'Infinity',
            '{"amount":NaN,"orderId":"x"}',
          ),
        },
      );
      await fc.assert(
        // POST /v1/invoices, the merchant's main door, gets half of the cases.
        fc.asyncProperty(fc.oneof(fc.constant(WITH_BODY[0]!), fc.constantFrom(...WITH_BODY)), body, async (e, b) => {
          expectContract(await call(e, b), e.name);
        }),
        { numRuns: 2000 },
      );
    });

    it('every field of CreateInvoiceRequest with a wrong type → 400 validation naming exactly that field', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...INVOICE_FIELDS).chain(([field, kind]) => fc.tuple(fc.constant(field), wrongTypeFor(kind))),
          async ([field, value]) => {
            const r = await call(ENDPOINTS[0]!, JSON.stringify(invoiceWith(field, value)));
            expectContract(r, `POST /v1/invoices with ${field}`);
            expect({ status: r.status, code: r.body?.error?.code, param: r.body?.error?.param }).toEqual({ status: 400, code: 'validation', param: field });
            expect(r.body.error.details.map((d: Json) => d.param)).toEqual([field]);
          },
        ),
        { numRuns: 400 },
      );
    });

    it('any text (NUL, lone surrogates, Cyrillic, emoji) in every string field: a 2xx or a 400 naming the field, never a 5xx', async () => {
      const fields = ['orderId', 'description', 'customer.name', 'customer.userId', 'customer.email', 'successUrl', 'payerEmail', 'method'];
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...fields), anyText(), async (field, text) => {
          const value = field === 'orderId' ? `${randomUUID()}${text}` : text;
          const r = await call(ENDPOINTS[0]!, JSON.stringify(invoiceWith(field, value)));
          expectContract(r, `POST /v1/invoices with ${field}=${JSON.stringify(value)}`);
          if (r.status >= 300) expect({ status: r.status, param: r.body.error.param }).toEqual({ status: 400, param: field });
        }),
        { numRuns: 300 },
      );
    });

    // A lone surrogate in webhookUrl was a 500 (a byte count that threw on it).
    it("any text in a project's name and webhook URL (operator): a 2xx or a 400 naming the field, never a 5xx", async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('name', 'webhookUrl', 'a webhook URL path'), anyText(), async (field, text) => {
          const change = field === 'a webhook URL path' ? { webhookUrl: `https://shop.example/${text}` } : { [field]: text };
          const r = await send('PATCH', `/admin/v1/projects/${scratch.projectId}`, { headers: { ...adminHeaders(), ...json }, body: JSON.stringify(change) });
          expectContract(r, `PATCH /admin/v1/projects/{id} with ${JSON.stringify(change)}`);
          if (r.status >= 300)
            expect({ status: r.status, param: r.body.error.param }).toEqual({ status: 400, param: field === 'name' ? 'name' : 'webhookUrl' });
        }),
        { numRuns: 150 },
      );
    });

    it('random Authorization headers on every endpoint (merchant and operator): 401 unauthorized', async () => {
      const key = () => shop.keys.test.secretKey;
      const authorization = fc.oneof(
        headerText(),
        headerText(40).map((t) => `Bearer ${t}`),
        fc.base64String({ maxLength: 60 }).map((t) => `Bearer sk_test_${t}`),
        fc.base64String({ maxLength: 60 }).map((t) => `Bearer sk_live_${t}`),
        fc.constantFrom('Bearer', 'Bearer ', 'bearer', 'Basic dXNlcjpwYXNz', 'Token x', 'Bearer  ', 'Bearer sk_test_', 'Bearer pk_test_x'),
        fc.nat().map((i) => {
          const k = key();
          const at = 8 + (i % (k.length - 8));
          const flipped = k[at] === 'A' ? 'B' : 'A';
          return `Bearer ${k.slice(0, at)}${flipped}${k.slice(at + 1)}`;
        }),
        fc
          .constantFrom('prefix', 'suffix', 'double')
          .map((how) => (how === 'prefix' ? `Bearer x${key()}` : how === 'suffix' ? `Bearer ${key()}x` : `Bearer ${key()} ${key()}`)),
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...ENDPOINTS), authorization, async (e, auth) => {
          const r = await send(e.method, e.path(), {
            headers: { authorization: auth, ...(e.body ? json : {}) },
            body: e.body ? JSON.stringify({ amount: '10.00', orderId: orderId('auth') }) : undefined,
          });
          expectContract(r, `${e.name} with Authorization ${JSON.stringify(auth)}`);
          expect({ status: r.status, code: r.body?.error?.code }).toEqual({ status: 401, code: 'unauthorized' });
        }),
        { numRuns: 400 },
      );
    });

    it('random X-Public-Id / X-Timestamp / X-Signature combinations: 401 with the code of a rule that is broken', async () => {
      const clockNow = async () => Math.floor((await gw.operator.advance(0)).getTime() / 1000);
      const now = await clockNow();
      const publicId = fc.oneof(
        fc.constant<string | undefined>(undefined),
        fc.constant(shop.keys.test.publicKey),
        fc.constant(shop.keys.live.publicKey),
        headerText(40),
        fc.base64String({ maxLength: 40 }).map((t) => `pk_test_${t}`),
      );
      const timestamp = fc.oneof(
        fc.constant<string | undefined>(undefined),
        fc.integer({ min: -250, max: 250 }).map((d) => String(now + d)),
        fc.integer({ min: 301, max: 1e6 }).map((d) => String(now - d)),
        fc.integer({ min: 301, max: 1e6 }).map((d) => String(now + d)),
        headerText(20),
        numberLiteral,
      );
      const signature = fc.oneof(
        fc.constant<'valid' | string | undefined>('valid'),
        fc.constant(undefined),
        headerText(70),
        fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 }),
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...MERCHANT), publicId, timestamp, signature, fc.boolean(), async (e, pk, ts, sig, plainHeader) => {
          const body = e.body ? JSON.stringify({ amount: '10.00', orderId: orderId('hmac'), description: randomUUID() }) : undefined;
          const headers: Record<string, string> = { ...(e.body ? json : {}) };
          if (pk !== undefined) headers['x-public-id'] = pk;
          if (ts !== undefined) headers['x-timestamp'] = ts;
          // A valid signature over a GET's `<timestamp>.` may have been used by an earlier run: a replay.
          const sigValue = sig === 'valid' ? signRequest(webhookSecret, ts ?? '', body ?? '') : sig;
          if (sigValue !== undefined) headers[plainHeader ? 'signature' : 'x-signature'] = sigValue;
          const r = await send(e.method, e.path(), { headers, body });
          expectContract(r, `${e.name} with ${JSON.stringify(headers)}`);
          if (r.status < 300) return;
          const possible = new Set<string>();
          const knownKey = pk === shop.keys.test.publicKey || pk === shop.keys.live.publicKey;
          if (!knownKey) possible.add('unauthorized');
          const tsOk = ts !== undefined && /^\d+$/.test(ts) && Math.abs(Number(ts) - now) < 290;
          if (!tsOk) possible.add('timestamp_invalid');
          possible.add('signature_invalid'); // a wrong signature, or a valid one already used
          // Authenticated, the request meets the endpoint's own refusal (the ids do not
          // exist for that key, the body has a field the endpoint does not take, payouts
          // need a live key).
          const live = pk === shop.keys.live.publicKey;
          const afterAuthentication: Record<string, string | undefined> = {
            'GET /v1/invoices/{id}': live ? 'invoice_not_found' : undefined,
            'POST /v1/invoices/{id}/refund': 'validation',
            'GET /v1/refunds/{id}': 'invoice_not_found',
            'POST /v1/payouts': live ? 'validation' : 'test_mode',
            'GET /v1/payouts/{id}': 'not_found',
            'GET /v1/events/{id}': 'not_found',
          };
          const handled = knownKey ? afterAuthentication[e.name] : undefined;
          if (handled) possible.add(handled);
          expect(r.status === 401 || r.body.error.code === handled).toBe(true);
          expect([...possible]).toContain(r.body.error.code);
        }),
        { numRuns: 400 },
      );
    });

    it('content-type variations on every endpoint that takes a body: no 5xx, the exact shape, 415 is unsupported_media_type', async () => {
      const contentType = fc.oneof(
        fc.constantFrom(
          'application/json',
          'application/json; charset=utf-8',
          'Application/JSON',
          'application/json;charset=latin1',
          'text/plain',
          'text/html',
          'text/json',
          'application/xml',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=zz',
          'application/octet-stream',
          'application/vnd.api+json',
          'application/problem+json',
          '*/*',
          'application/',
          ';',
          'json',
        ),
        headerText(40),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...WITH_BODY),
          contentType,
          fc.constantFrom('{"amount":true}', '{"bogus":1}', 'a=1&b=2', '<x/>', '--zz--'),
          async (e, ct, b) => {
            const r = await send(e.method, e.path(), { body: b, headers: { ...(e.admin ? adminHeaders() : merchantHeaders()), 'content-type': ct } });
            expectContract(r, `${e.name} with content-type ${JSON.stringify(ct)}`);
            expect(r.status).toBeGreaterThanOrEqual(400);
            if (r.status === 415) expect(r.body.error.code).toBe('unsupported_media_type');
          },
        ),
        { numRuns: 300 },
      );
    });

    it('random query strings on GET /v1/invoices: 200 or 400 validation naming one of the parameters', async () => {
      const name = fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('limit', 'cursor', 'from', 'to', 'status', 'orderId') },
        { weight: 1, arbitrary: fc.string({ maxLength: 10 }) },
        { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'limit[]', 'status[0]', 'a.b', '') },
      );
      const value = fc.oneof(
        fc.string({ maxLength: 40 }),
        anyText(40),
        fc.integer({ min: -1000, max: 1000 }).map(String),
        numberLiteral,
        fc.constantFrom(
          'created',
          'paid',
          'PAID',
          'refunded',
          '2026-01-31T21:00:00Z',
          '2026-13-45T25:61:00Z',
          '0000-01-01T00:00:00Z',
          '9999-12-31T23:59:59.999999Z',
          'eyJzZXEiOjF9',
          'eyJzZXEiOiJ4In0',
          'e30',
          'bnVsbA',
          '%',
          '%%',
          '%E0%A4%A',
        ),
        fc.base64String({ maxLength: 40 }),
        fc.string({ minLength: 120, maxLength: 600 }),
      );
      const params = fc.array(fc.tuple(name, value), { maxLength: 6 });
      await fc.assert(
        fc.asyncProperty(params, fc.boolean(), async (pairs, encode) => {
          const query = encode
            ? new URLSearchParams(pairs).toString()
            : // eslint-disable-next-line no-control-regex -- control characters are what the fuzz removes here
              pairs.map(([k, v]) => `${k}=${v.replace(/[#\s\u0000-\u001f]/g, '')}`).join('&');
          const r = await send('GET', `/v1/invoices?${query}`, { headers: merchantHeaders() });
          expectContract(r, `GET /v1/invoices?${query}`);
          if (r.status !== 200) {
            expect({ status: r.status, code: r.body.error.code }).toEqual({ status: 400, code: 'validation' });
          }
        }),
        { numRuns: 500 },
      );
    });

    it('random ids (NUL included) in every path with an id, merchant and operator: no 5xx, the exact error shape', async () => {
      const rawId = fc.oneof(
        fc.uuid().map((u) => encodeURIComponent(u)),
        fc.uuid().map((u) => u.toUpperCase()),
        fc.string({ unit: 'grapheme', maxLength: 40 }).map((t) => encodeURIComponent(t)),
        fc.string({ unit: 'grapheme-ascii', minLength: 60, maxLength: 160 }).map((t) => encodeURIComponent(t)),
        fc.constantFrom('%00', '%', '%ZZ', '%E0%A4%A', '%C0%AF', '..', '.', '%2e%2e', '%2F', 'a%2Fb', '%ED%A0%80', '%FF', '%25', ';a', '*'),
        fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF-'), minLength: 30, maxLength: 40 }),
      );
      // Ids with a NUL character (%00) somewhere: PostgreSQL cannot store or compare them.
      const withNul = fc
        .tuple(
          fc.oneof(
            fc.constant(''),
            fc.uuid(),
            fc.constantFrom('rf_', 'invoice-', '1', 'po_1'),
            fc.string({ unit: 'grapheme-ascii', maxLength: 10 }).map(encodeURIComponent),
          ),
          fc.oneof(fc.constant(''), fc.uuid(), fc.nat().map(String)),
        )
        .map(([before, after]) => `${before}%00${after}`);
      const raw = fc.oneof(rawId, withNul);
      const target = fc.constantFrom(...ID_ROUTES);
      await fc.assert(
        fc.asyncProperty(target, raw, async (t, id) => {
          const r = await send(t.method, t.path(id), { body: t.body, headers: { ...t.headers(), ...(t.body ? json : {}) } });
          expectContract(r, `${t.method} ${t.path(id)}`);
          // An id with NUL is never a resource: its 404 (or the route's 400), decided before the database.
          // (Only where the id stays one path segment: %2F is a slash to the router.)
          if (id.includes('%00') && !/%(?![0-9A-Fa-f]{2})/.test(id) && !/%2f/i.test(id)) {
            expect({ route: t.name, id, status: r.status }).toEqual({ route: t.name, id, status: t.nulStatus });
          }
          // Dot segments and %2F are resolved before routing: those are unknown routes; an
          // id that is not valid percent-encoding makes the URL itself malformed (400, param path).
          const malformedUrl = (() => {
            try {
              decodeURIComponent(id);
              return false;
            } catch {
              return true;
            }
          })();
          if (t.name === 'GET /v1/invoices/{id}') {
            if (malformedUrl) expectApiError(r, 400, 'validation', 'path');
            else expectApiError(r, 404, ['invoice_not_found', 'not_found']);
          }
        }),
        { numRuns: 400 },
      );
    });

    it('random cursors on every list (merchant and operator): 200 for a safe non-negative integer seq, else 400 validation on cursor', async () => {
      const seqText = fc.oneof(
        fc.nat({ max: 1_000_000 }).map(String),
        fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
        fc.integer({ min: -1_000_000, max: -1 }).map(String),
        fc.bigInt({ min: 2n ** 53n - 2n, max: 10n ** 400n }).map(String),
        numberLiteral,
        fc.constantFrom('"5"', 'null', 'true', '[1]', '{}', '-0', '1.0', '1e2', '9007199254740991'),
      );
      const cursor = fc.oneof(
        { weight: 5, arbitrary: seqText.map((t) => ({ text: `{"seq":${t}}` })) },
        { weight: 1, arbitrary: fc.json().map((t) => ({ text: t })) },
        { weight: 1, arbitrary: fc.base64String({ maxLength: 40 }).map((t) => ({ raw: t.replace(/=+$/, '') })) },
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...LISTS), cursor, async (list, c) => {
          const value = 'text' in c ? Buffer.from(c.text).toString('base64url') : c.raw;
          const path = list.path();
          const r = await send('GET', `${path}${path.includes('?') ? '&' : '?'}cursor=${encodeURIComponent(value)}`, { headers: list.headers() });
          expectContract(r, `${list.name} with cursor ${JSON.stringify(c)}`);
          let decoded: unknown = undefined;
          try {
            decoded = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
          } catch {
            decoded = undefined;
          }
          const seq = typeof decoded === 'object' && decoded !== null && !Array.isArray(decoded) ? (decoded as Json).seq : undefined;
          const good = /^[A-Za-z0-9_-]{1,512}$/.test(value) && typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0;
          if (good) expect({ list: list.name, cursor: c, status: r.status }).toEqual({ list: list.name, cursor: c, status: 200 });
          else expectApiError(r, 400, 'validation', 'cursor');
        }),
        { numRuns: 400 },
      );
    });

    it('number literals of any length before (and in) the money and percent fields of every endpoint with a body: refused as written, never let through', async () => {
      // A literal of 300 to 3000 characters whose value fits the field beside it (an integer n written n.000…0e0).
      const longInteger = (n: number) => fc.integer({ min: 300, max: 3000 }).map((zeros) => `${n}.${'0'.repeat(zeros)}e0`);
      const badMoney = fc.oneof(
        fc.constantFrom('1e3', '10.100', '1E2', '100.000', '2.5e1'),
        fc.integer({ min: 300, max: 3000 }).map((zeros) => `1.${'0'.repeat(zeros)}e2`),
        fc.integer({ min: 300, max: 3000 }).map((zeros) => `10.${'0'.repeat(zeros)}1`),
      );
      const badPercent = fc.oneof(
        fc.constantFrom('1e-1', '1.00001', '2E0'),
        fc.integer({ min: 300, max: 3000 }).map((zeros) => `1.${'0'.repeat(zeros)}e0`),
      );
      const pad = fc.oneof(
        fc.integer({ min: 300, max: 5000 }).map((n) => '9'.repeat(n)),
        longInteger(7),
      );
      type Shape = { name: string; method: string; path: () => string; headers: () => Record<string, string>; body: fc.Arbitrary<string>; param: string };
      const SHAPES: Shape[] = [
        {
          name: 'POST /v1/invoices (amount after customFields and expire)',
          method: 'POST',
          path: () => '/v1/invoices',
          headers: () => merchantHeaders(),
          body: fc
            .tuple(pad, longInteger(60), badMoney)
            .map(([p, e, m]) => `{"orderId":"${orderId('fz-long')}","customFields":{"pad":${p}},"expire":${e},"amount":${m}}`),
          param: 'amount',
        },
        {
          name: 'POST /v1/invoices (customerFeePct after a long expire)',
          method: 'POST',
          path: () => '/v1/invoices',
          headers: () => merchantHeaders(),
          body: fc
            .tuple(longInteger(60), badPercent)
            .map(([e, p]) => `{"orderId":"${orderId('fz-long')}","amount":"100.00","method":"card","expire":${e},"customerFeePct":${p}}`),
          param: 'customerFeePct',
        },
        {
          name: 'POST /v1/invoices/{id}/refund',
          method: 'POST',
          path: () => `/v1/invoices/${invoiceId}/refund`,
          headers: () => merchantHeaders(),
          body: badMoney.map((m) => `{"amount":${m}}`),
          param: 'amount',
        },
        {
          name: 'POST /v1/payouts (live key, amount after a long addressId)',
          method: 'POST',
          path: () => '/v1/payouts',
          headers: () => ({ authorization: `Bearer ${shop.keys.live.secretKey}` }),
          body: fc.tuple(longInteger(1), badMoney).map(([a, m]) => `{"addressId":${a},"amount":${m}}`),
          param: 'amount',
        },
        {
          name: 'POST /admin/v1/projects (methods.sbp.min after a long holdHours)',
          method: 'POST',
          path: () => '/admin/v1/projects',
          headers: () => adminHeaders(),
          body: fc
            .tuple(longInteger(24), badMoney)
            .map(([h, m]) => `{"accountId":"${scratch.accountId}","name":"Длинные","holdHours":${h},"methods":{"sbp":{"min":${m}}}}`),
          param: 'methods.sbp.min',
        },
        {
          name: 'PATCH /admin/v1/projects/{id} (methods.card.feePct after a long holdHours)',
          method: 'PATCH',
          path: () => `/admin/v1/projects/${scratch.projectId}`,
          headers: () => adminHeaders(),
          body: fc.tuple(longInteger(24), badPercent).map(([h, p]) => `{"holdHours":${h},"methods":{"card":{"feePct":${p}}}}`),
          param: 'methods.card.feePct',
        },
      ];
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...SHAPES).chain((shape) => shape.body.map((body) => ({ shape, body }))),
          async ({ shape, body }) => {
            const r = await send(shape.method, shape.path(), { body, headers: { ...shape.headers(), ...json } });
            expectContract(r, `${shape.name} with ${body.slice(0, 120)}…`);
            expect({ shape: shape.name, status: r.status, code: r.body?.error?.code }).toEqual({ shape: shape.name, status: 400, code: 'validation' });
            expect(r.body.error.details.map((d: Json) => d.param)).toContain(shape.param);
          },
        ),
        { numRuns: 300 },
      );
      // The other endpoints with a body get the same shapes (a long literal, then a bad money literal): their contract holds.
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...WITH_BODY), pad, badMoney, async (e, p, m) => {
          expectContract(await call(e, `{"pad":${p},"amount":${m},"outcome":${m}}`), e.name);
        }),
        { numRuns: 100 },
      );
    });

    it('random Idempotency-Key values on every merchant POST: a key of 1-255 printable ASCII characters is taken, anything else is 400 on Idempotency-Key', async () => {
      const POSTS = MERCHANT.filter((e) => e.method === 'POST');
      const key = fc.oneof(
        headerText(300),
        fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 250, maxLength: 260 }),
        fc.uuid(),
        fc.constantFrom('', ' ', 'a', 'é', '\u00ff', 'k'.repeat(255), 'k'.repeat(256), 'a\tb'),
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...POSTS), key, async (e, k) => {
          const r = await call(e, '{"bogus":1}', { 'idempotency-key': k });
          expectContract(r, `${e.name} with Idempotency-Key ${JSON.stringify(k)}`);
          // HTTP drops the spaces and tabs around a header value.
          const sent = k.replace(/^[ \t]+|[ \t]+$/g, '');
          const valid = /^[\x20-\x7e]{1,255}$/.test(sent);
          // A valid key may meet itself again (409 idempotency_key_conflict on another endpoint): never a 400 on it.
          if (valid) expect([r.status, r.body?.error?.param]).not.toEqual([400, 'Idempotency-Key']);
          else expectApiError(r, 400, 'validation', 'Idempotency-Key');
        }),
        { numRuns: 300 },
      );
    });

    it('random methods and paths: no 5xx, the exact error shape', async () => {
      const segment = fc.oneof(
        fc.constantFrom(
          'v1',
          'admin',
          'invoices',
          'methods',
          'balance',
          'accounts',
          'projects',
          'clock',
          'advance',
          'payment',
          'keys',
          'rotate',
          'refunds',
          'payouts',
          'v2',
          '',
        ),
        fc.uuid(),
        fc.string({ unit: 'grapheme-ascii', maxLength: 12 }).map((t) => encodeURIComponent(t)),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'),
          fc.array(segment, { minLength: 1, maxLength: 5 }),
          fc.boolean(),
          async (method, segments, asAdmin) => {
            const path = `/${segments.join('/')}`;
            const withBody = method !== 'GET';
            const r = await send(method, path, {
              headers: { ...(asAdmin ? adminHeaders() : merchantHeaders()), ...(withBody ? json : {}) },
              body: withBody ? '{"bogus":1}' : undefined,
            });
            expectContract(r, `${method} ${path}`);
          },
        ),
        { numRuns: 300 },
      );
    });
  });

  describe('specific answers', () => {
    it.each([
      ['GET', '/v1/nope'],
      ['GET', '/nope'], // '/' itself redirects to /docs
      ['GET', '/v2/methods'],
      ['POST', '/v1/invoices/x/y'],
      ['GET', '/admin/v1/nope'],
      ['GET', '/v1/refunds'],
    ])('an unknown route (%s %s) → 404 not_found, with or without credentials', async (method, path) => {
      for (const headers of [{}, merchantHeaders(), adminHeaders()]) {
        expectApiError(await send(method, path, { headers }), 404, 'not_found');
      }
    });

    it.each([
      ['DELETE', '/v1/invoices'],
      ['PUT', '/v1/invoices'],
      ['PATCH', () => `/v1/invoices/${invoiceId}`],
      ['DELETE', () => `/v1/invoices/${invoiceId}`],
      ['POST', '/v1/methods'],
      ['PUT', '/v1/balance'],
      ['GET', '/admin/v1/accounts'],
      ['DELETE', () => `/admin/v1/projects/${scratch.projectId}`],
      ['GET', '/admin/v1/clock/advance'],
      ['GET', () => `/admin/v1/invoices/${invoiceId}/payment`],
    ])('a wrong method on a known path (%s %s) → 405 method_not_allowed in the error shape, with Allow', async (method, path) => {
      const p = typeof path === 'string' ? path : path();
      for (const headers of [merchantHeaders(), adminHeaders()]) {
        const withBody = method !== 'GET';
        const r = await send(method, p, { headers: { ...headers, ...(withBody ? json : {}) }, body: withBody ? '{}' : undefined });
        expectApiError(r, 405, 'method_not_allowed');
        expect(r.headers.get('allow')).toMatch(/^(GET, HEAD|POST|GET, HEAD, POST|GET, HEAD, PATCH)$/);
      }
    });

    it.each(['{', '{"amount": "10.00",', 'not json', "{'amount':'10.00'}", '{"amount":"10.00",}', '{amount: 1}', '\u0000', '{"a":1}{"b":2}'])(
      'a body that is not JSON (%j) → 400 validation with param body, on every endpoint that takes one',
      async (text) => {
        for (const e of WITH_BODY) {
          const r = await call(e, text);
          expectApiError(r, 400, 'validation', 'body');
        }
      },
    );

    it.each([
      ['{"amount":[{"__proto__":false}],"orderId":"x"}', 'amount[0].__proto__'],
      ['{"amount":"10.00","orderId":"x","customFields":{"__proto__":1}}', 'customFields.__proto__'],
      ['{"amount":"10.00","orderId":"x","customFields":{"constructor":{"prototype":{}}}}', 'customFields.constructor.prototype'],
      ['{"__proto__":{"admin":true}}', '__proto__'],
    ])('valid JSON with a name the parser refuses (%s) → 400 validation naming its path (%s), saying which rule', async (text, param) => {
      for (const e of WITH_BODY) {
        const r = await call(e, text);
        expectApiError(r, 400, 'validation', param);
        expect(r.body.error.message).toBe(`${param}: запрещённое имя поля (__proto__ или constructor с prototype внутри)`);
      }
    });

    it('such a name behind a path longer than 200 characters → 400 naming the body, not echoing the path', async () => {
      const text = JSON.stringify({ amount: '10.00', orderId: 'x', customFields: { ['k'.repeat(5_000)]: { constructor: { prototype: 1 } } } });
      for (const e of WITH_BODY) {
        const r = await call(e, text);
        expectApiError(r, 400, 'validation', 'body');
        expect(JSON.stringify(r.body).length).toBeLessThan(1_000);
      }
    });

    it('a name given twice behind a path longer than 200 characters → 400 duplicate_field naming the body; at 200 the path', async () => {
      const twice = (key: string) => `{"amount":"10.00","orderId":"x","customFields":{"${key}":1,"${key}":2}}`;
      for (const e of WITH_BODY) {
        const long = await call(e, twice('k'.repeat(30_000)));
        expectApiError(long, 400, 'validation', 'body');
        expect(long.body.error.details).toEqual([expect.objectContaining({ param: 'body', code: 'duplicate_field' })]);
        expect(JSON.stringify(long.body).length).toBeLessThan(1_000);
        const key = 'k'.repeat(200 - 'customFields.'.length);
        expectApiError(await call(e, twice(key)), 400, 'validation', `customFields.${key}`);
      }
    });

    it('a body of more than 64 KB → 413 in the error shape; exactly 64 KB is read', async () => {
      const bodyOf = (bytes: number) => {
        const base = JSON.stringify({ amount: '10.00', orderId: 'x', description: '' });
        return JSON.stringify({ amount: '10.00', orderId: 'x', description: 'x'.repeat(bytes - Buffer.byteLength(base)) });
      };
      expect(Buffer.byteLength(bodyOf(BODY_LIMIT))).toBe(BODY_LIMIT);
      for (const e of WITH_BODY) {
        const over = await call(e, bodyOf(BODY_LIMIT + 1));
        expectApiError(over, 413, 'payload_too_large');
        const huge = await call(e, bodyOf(5 * BODY_LIMIT));
        expectApiError(huge, 413, 'payload_too_large');
        const at = await call(e, bodyOf(BODY_LIMIT));
        expect(at.status).not.toBe(413);
        expectContract(at, `${e.name} with a 64 KB body`);
      }
    });

    it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x'])(
      'a body of content type %s → 415 unsupported_media_type, and nothing is created',
      async (ct) => {
        const id = orderId('ctype');
        const bodies: Record<string, string> = {
          'text/plain': JSON.stringify({ amount: '10.00', orderId: id }),
          'application/x-www-form-urlencoded': new URLSearchParams({ amount: '10.00', orderId: id }).toString(),
          'application/xml': `<invoice><amount>10.00</amount><orderId>${id}</orderId></invoice>`,
          'multipart/form-data; boundary=x': `--x\r\nContent-Disposition: form-data; name="amount"\r\n\r\n10.00\r\n--x\r\nContent-Disposition: form-data; name="orderId"\r\n\r\n${id}\r\n--x--\r\n`,
        };
        const r = await send('POST', '/v1/invoices', { body: bodies[ct], headers: merchantHeaders({ 'content-type': ct }) });
        expectApiError(r, 415, 'unsupported_media_type');
        // Nothing was stored under the orderId (another amount would be a 409 if it had been).
        expectStatus(await shop.test.post('/v1/invoices', { amount: '20.00', orderId: id }), 201);
      },
    );

    it('wrong types, enum values and lengths: 400 validation with the (nested) param, every violation in details', async () => {
      const r = await shop.test.post('/v1/invoices', {
        amount: '1.234',
        orderId: 'x'.repeat(129),
        description: 7,
        method: 'cash',
        customerFeeShare: 1.5,
        feePayer: 'nobody',
        expire: 1441,
        successUrl: 'ftp://example.com',
        customer: { email: 'ivan@', phone: '+7 999', userId: 5, name: 'я'.repeat(256) },
        customFields: [1],
        payerEmail: true,
      });
      const expected = [
        'amount',
        'orderId',
        'description',
        'method',
        'customerFeeShare',
        'feePayer',
        'expire',
        'successUrl',
        'customer.email',
        'customer.phone',
        'customer.userId',
        'customer.name',
        'customFields',
        'payerEmail',
      ];
      expectApiError(r, 400, 'validation');
      expect(r.body.error.details.map((d: Json) => d.param).sort()).toEqual([...expected].sort());
      expect(expected).toContain(r.body.error.param);
      for (const d of r.body.error.details) expect(d.message).toMatch(CYRILLIC);
    });

    it('one nested violation names the nested field: customer.email', async () => {
      const r = await shop.test.post('/v1/invoices', { amount: '10.00', orderId: orderId(), customer: { email: 'not-an-email' } });
      expectApiError(r, 400, 'validation', 'customer.email');
      expect(r.body.error.details).toEqual([expect.objectContaining({ param: 'customer.email', message: expect.stringMatching(CYRILLIC) })]);
    });

    it('the operator API names nested fields too (methods.sbp.feePct) and lists every violation', async () => {
      const r = await gw.operator.http.post('/admin/v1/projects', {
        accountId: 'not-a-uuid',
        name: '',
        status: 'frozen',
        holdHours: -1,
        webhookEvents: ['invoice.paid', 'nope'],
        methods: { sbp: { feePct: 'x' }, card: { enabled: 'yes' } },
      });
      expectApiError(r, 400, 'validation');
      expect(r.body.error.details.map((d: Json) => d.param).sort()).toEqual(
        ['accountId', 'holdHours', 'methods.card.enabled', 'methods.sbp.feePct', 'name', 'status', 'webhookEvents'].sort(),
      );
    });

    it('the query of GET /v1/invoices: every violation in details', async () => {
      const r = await shop.test.get(`/v1/invoices?limit=0&status=lost&from=yesterday&to=2026-02-30&cursor=%21%21&orderId=${'x'.repeat(129)}`);
      expectApiError(r, 400, 'validation');
      expect(r.body.error.details.map((d: Json) => d.param).sort()).toEqual(['cursor', 'from', 'limit', 'orderId', 'status', 'to'].sort());
    });

    it('an unknown field in a request body → 400 validation with param = its name', async () => {
      const r = await send('POST', '/v1/invoices', { body: '{"amount":"10.00","orderId":"x","bogus":1}', headers: merchantHeaders(json) });
      expectApiError(r, 400, 'validation', 'bogus');
      expect(r.body.error.details).toEqual([expect.objectContaining({ param: 'bogus' })]);
      // And nothing was created under orderId "x".
      expectStatus(await shop.test.post('/v1/invoices', { amount: '30.00', orderId: 'x' }), 201);
    });

    it('an unknown field on the operator API → 400 validation with param = its name, nothing changed', async () => {
      const before = await gw.operator.http.get(`/admin/v1/projects/${scratch.projectId}`);
      const r = await gw.operator.http.patch(`/admin/v1/projects/${scratch.projectId}`, { name: 'Новое имя', bogus: 1 });
      expectApiError(r, 400, 'validation', 'bogus');
      const after = await gw.operator.http.get(`/admin/v1/projects/${scratch.projectId}`);
      expect(after.body).toEqual(before.body);
    });

    it('text the database cannot store (lone UTF-16 surrogates) → 400 validation naming the field, never a 500', async () => {
      for (const [field, value] of [
        ['description', 'a\ud800b'],
        ['orderId', `lone-${randomUUID()}\udc00`],
        ['customer.name', '\udfff'],
      ] as const) {
        const r = await call(ENDPOINTS[0]!, JSON.stringify(invoiceWith(field, value)));
        expectApiError(r, 400, 'validation', field);
      }
      const r = await call(ENDPOINTS[0]!, JSON.stringify({ amount: '10.00', orderId: orderId(), customFields: { '\ud800': 1 } }));
      expectApiError(r, 400, 'validation', 'customFields');
    });

    it('deeply nested customFields (5000 levels, 10 KB) → 400 validation on customFields, never a 500', async () => {
      const body = `{"amount":"10.00","orderId":"${orderId('deep')}","customFields":{"a":${nested(5000, 'array')}}}`;
      expect(Buffer.byteLength(body)).toBeLessThan(BODY_LIMIT);
      expectApiError(await call(ENDPOINTS[0]!, body), 400, 'validation', 'customFields');
    });

    it('a 5xx, when one happens, carries only {error: {code: internal, message}}: no stack, no SQL, no class names', async () => {
      // No normal input should give a 500; these two did when this test was written
      // (see the two tests above), and are the way to look at a 500 from outside.
      const candidates = [
        `{"amount":"10.00","orderId":"${orderId('deep')}","customFields":{"a":${nested(8000, 'array')}}}`,
        JSON.stringify({ amount: '10.00', orderId: orderId(), description: '\ud800' }),
      ];
      for (const body of candidates) {
        const r = await call(ENDPOINTS[0]!, body);
        if (r.status < 500) continue;
        expect(r.status).toBe(500);
        expect(r.body).toEqual({ error: { code: 'internal', message: expect.stringMatching(CYRILLIC) } });
        expect(JSON.stringify(r.body)).not.toMatch(STACK_TRACE);
        expect(JSON.stringify(r.body)).not.toMatch(/SELECT|INSERT|invalid input syntax|RangeError|TypeError|stack/i);
      }
    });

    it.each([
      ['a malformed percent-escape in the path', () => '/v1/invoices/%E0%A4%A'],
      ['an invalid percent-escape in the path', () => '/v1/%ZZ'],
      ['an invoice id of 101 characters', () => `/v1/invoices/${'a'.repeat(101)}`],
      ['a project id of 200 characters', () => `/admin/v1/projects/${'a'.repeat(200)}`],
    ])("%s → an error in the spec shape (the router's own errors too)", async (_, path) => {
      const r = await send('GET', path(), { headers: path().startsWith('/admin') ? adminHeaders() : merchantHeaders() });
      expect(r.status).toBeGreaterThanOrEqual(400);
      expectContract(r, `GET ${path().slice(0, 60)}`);
    });

    it('a URL longer than the HTTP parser takes (20 KB query) → an error in the spec shape', async () => {
      const r = await send('GET', `/v1/invoices?orderId=${'x'.repeat(20_000)}`, { headers: merchantHeaders() });
      expect(r.status).toBeGreaterThanOrEqual(400);
      expectContract(r, 'GET with a 20 KB URL');
    });
  });
});
