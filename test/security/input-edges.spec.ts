/**
 * Input that used to reach the database or slip past a check, and answered 500 (or
 * worse, was accepted): each case is now a 400 or a 404 in the spec's error shape.
 * - a page cursor whose `seq` is not a safe non-negative integer, on every list;
 * - a path id with a character PostgreSQL cannot store (NUL), on every route with an id;
 * - a number literal longer than a few hundred characters before (or as) a money or
 *   percent field: the literal scanner must never lose its place, and a number it
 *   cannot account for is refused, never let through unchecked;
 * - a JSON body that names one field twice (JSON.parse keeps the last; a proxy may
 *   have read the first): 400 validation naming the field, on every body;
 * - a JSON body whose bytes are not UTF-8 (once read as text, every bad byte became
 *   U+FFFD, so two different orderIds were one) or that is sent compressed (the bytes
 *   were parsed as they came: gzip was "not JSON", a plain body labelled br was taken);
 * - a query string with a percent-escape that is not UTF-8: kept as written, so that
 *   `?orderId=%E9` found the invoice whose orderId is the text `%E9`.
 */
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { expectError, expectStatus, InvoiceGateway, Json, Merchant, orderId, Reply, startInvoiceGateway, waitForList } from '../support/merchant-fixtures';
import { paidInvoice, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { sendRaw } from '../support/signing';

/** A cursor as the gateway writes them (base64url JSON), with any JSON text inside. */
const cursorOf = (json: string) => Buffer.from(json).toString('base64url');

/** Cursor texts whose seq is not a safe non-negative integer (or not a number at all). */
const BAD_SEQS = [
  '{"seq":1.5}',
  '{"seq":1e308}',
  '{"seq":-1}',
  '{"seq":9007199254740993}',
  '{"seq":1e400}',
  '{"seq":"5"}',
  '{"seq":null}',
  '{"seq":true}',
  '{}',
  '[1]',
  '5',
];

/** A literal of about 400 characters with the same value as `n` (n.000…0e0). */
const longLiteralOf = (n: number) => `${n}.${'0'.repeat(400)}e0`;

describe('input edges that must be 400 or 404, never 500 and never let through', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;
  let invoiceId: string;
  let addressId: number;

  const merchantHeaders = (key: string) => ({ authorization: `Bearer ${key}` });
  const adminHeaders = () => ({ authorization: `Bearer ${gw.gateway.adminToken}` });
  const json = { 'content-type': 'application/json' };
  /**
   * Sent as the spec tells a client to: a 429 is waited out (Retry-After) and sent again.
   * On an idle machine these tests send one key more than the default 60 requests a
   * second; a refused request did nothing, and none of them asserts a 429.
   */
  const sendWithinRate = async (path: string, init: Parameters<typeof sendRaw>[3], method = 'POST'): Promise<Reply> => {
    for (let attempt = 1; ; attempt++) {
      const reply = await sendRaw(gw.baseUrl, method, path, init);
      if (reply.status !== 429 || attempt === 3) return reply;
      await new Promise((resolve) => setTimeout(resolve, Number(reply.headers.get('retry-after') ?? '1') * 1000));
    }
  };
  const send = (method: string, path: string, headers: Record<string, string>, body?: string): Promise<Reply> =>
    sendWithinRate(path, { headers: { ...headers, ...(body === undefined ? {} : json) }, body }, method);

  beforeAll(async () => {
    // The spec's poll interval on: a read of one invoice or payout takes a poll mark in the database.
    gw = await startInvoiceGateway();
    shop = await gw.operator.merchant({ holdHours: 0, usdtEnabled: true });
    invoiceId = await paidInvoice(gw.operator, shop.test, '100.00');
    addressId = (await payoutAddress(gw.operator, shop.accountId, { method: 'sbp', account: PHONE })).id;
  });

  afterAll(async () => {
    await gw?.close();
  });

  describe('a cursor whose seq is not a safe non-negative integer → 400 validation, param cursor', () => {
    const lists = () => [
      { name: 'GET /v1/invoices', path: '/v1/invoices', headers: merchantHeaders(shop.keys.test.secretKey) },
      { name: 'GET /v1/payouts (live key)', path: '/v1/payouts', headers: merchantHeaders(shop.keys.live.secretKey) },
      { name: 'GET /v1/payouts (test key)', path: '/v1/payouts', headers: merchantHeaders(shop.keys.test.secretKey) },
      { name: 'GET /admin/v1/webhook-deliveries', path: '/admin/v1/webhook-deliveries', headers: adminHeaders() },
      { name: 'GET /admin/v1/accounts/{id}/ledger', path: `/admin/v1/accounts/${shop.accountId}/ledger?mode=test`, headers: adminHeaders() },
    ];

    it.each(BAD_SEQS)('cursor %s on every list (merchant and operator)', async (text) => {
      for (const list of lists()) {
        const sep = list.path.includes('?') ? '&' : '?';
        const r = await send('GET', `${list.path}${sep}cursor=${cursorOf(text)}`, list.headers);
        expect({ list: list.name, status: r.status, code: r.body?.error?.code, param: r.body?.error?.param }).toEqual({
          list: list.name,
          status: 400,
          code: 'validation',
          param: 'cursor',
        });
      }
    });

    it('a cursor the gateway wrote still pages (seq 0 and a real one)', async () => {
      for (const list of lists()) {
        const sep = list.path.includes('?') ? '&' : '?';
        expectStatus(await send('GET', `${list.path}${sep}cursor=${cursorOf('{"seq":0}')}`, list.headers), 200);
        expectStatus(await send('GET', `${list.path}${sep}cursor=${cursorOf('{"seq":123456}')}`, list.headers), 200);
      }
    });
  });

  it('an empty orderId in a list query → 400 naming it, like every other empty parameter (no orderId is empty)', async () => {
    for (const path of ['/v1/invoices?orderId=', '/v1/payouts?orderId=']) {
      const r = await send('GET', path, merchantHeaders(shop.keys.live.secretKey));
      expectError(r, 400, 'validation', 'orderId');
      expect(r.body.error.details).toEqual([{ param: 'orderId', code: 'too_short', message: 'orderId: не может быть пустой строкой' }]);
    }
  });

  it('a parameter sent to a route that takes none → 400 unknown_field naming it, not ignored (a test key asking ?mode=live is not answered the test balance)', async () => {
    // Keys of their own: the other tests' keys keep their rate (60 requests a second).
    const own = await gw.operator.merchant();
    const test = merchantHeaders(own.keys.test.secretKey);
    const live = merchantHeaders(own.keys.live.secretKey);
    // Unknown ids where a read takes a poll mark: the other tests' resources keep theirs.
    const routes: [string, Record<string, string>][] = [
      ['/v1/balance', test],
      ['/v1/methods', test],
      ['/v1/payout-addresses', live],
      ['/v1/audit/keys', test],
      [`/v1/invoices/${randomUUID()}`, test],
      ['/v1/refunds/rf_unknown', test],
      ['/v1/payouts/999999999', live],
      [`/v1/events/${randomUUID()}`, test],
      ['/admin/v1/audit/checkpoint', adminHeaders()],
      [`/admin/v1/projects/${shop.projectId}`, adminHeaders()],
    ];
    for (const [path, headers] of routes) {
      const r = await send('GET', `${path}?mode=live`, headers);
      expect({ path, status: r.status, details: r.body.error?.details }).toEqual({
        path,
        status: 400,
        details: [{ param: 'mode', code: 'unknown_field', message: 'mode: неизвестное поле' }],
      });
    }
    expectStatus(await send('GET', '/v1/balance', test), 200);
    expectStatus(await send('GET', `/admin/v1/projects/${shop.projectId}`, adminHeaders()), 200);
  });

  it('a parameter sent to a write route, or a body field to one that takes no body → 400 unknown_field, and nothing done', async () => {
    const own = await gw.operator.merchant({ holdHours: 0 });
    const test = merchantHeaders(own.keys.test.secretKey);
    const live = merchantHeaders(own.keys.live.secretKey);
    const admin = adminHeaders();
    const paid = await paidInvoice(gw.operator, own.test, '100.00');
    const unpaid = await own.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('edge'), method: 'sbp' });
    expectStatus(unpaid, 201);
    const address: Json = await payoutAddress(gw.operator, own.accountId, { method: 'sbp', account: '+79001112233' }, false);
    const newOrder = orderId('edge');
    const refused = { status: 400, details: [{ param: 'bogus', code: 'unknown_field', message: 'bogus: неизвестное поле' }] };
    const routes: [string, string, Record<string, string>, unknown][] = [
      ['POST', '/v1/invoices', test, { amount: '100.00', orderId: newOrder, method: 'sbp' }],
      ['POST', `/v1/invoices/${paid}/refund`, test, { amount: '1.00' }],
      ['POST', '/v1/payouts', live, { amount: '100.00', addressId: address.id, orderId: orderId('edge') }],
      ['POST', '/admin/v1/accounts', admin, { name: 'Лишний', email: 'extra@example.com' }],
      ['POST', '/admin/v1/projects', admin, { accountId: own.accountId, name: 'Лишний' }],
      ['PATCH', `/admin/v1/projects/${own.projectId}`, admin, { name: 'Переименован' }],
      ['POST', `/admin/v1/projects/${own.projectId}/keys/rotate`, admin, { mode: 'test' }],
      ['POST', `/admin/v1/accounts/${own.accountId}/payout-addresses`, admin, { method: 'sbp', account: '+79004445566' }],
      ['POST', `/admin/v1/payout-addresses/${address.id}/confirm`, admin, undefined],
      ['POST', '/admin/v1/payouts/999999997/approve', admin, {}],
      ['POST', '/admin/v1/refunds/rf_unknown/fail', admin, {}],
      ['POST', `/admin/v1/invoices/${unpaid.body.id}/payment`, admin, { outcome: 'paid' }],
      ['POST', `/admin/v1/webhook-deliveries/${randomUUID()}/resend`, admin, undefined],
      ['POST', `/admin/v1/projects/${own.projectId}/webhook-deliveries/resend-failed`, admin, undefined],
      ['POST', `/admin/v1/projects/${own.projectId}/webhook-endpoint/enable`, admin, undefined],
      ['GET', '/v1/openapi.json', {}, undefined],
      ['GET', '/admin/v1/openapi.json', admin, undefined],
    ];
    for (const [method, path, headers, body] of routes) {
      const r = await send(method, `${path}?bogus=1`, headers, body === undefined ? undefined : JSON.stringify(body));
      expect({ route: `${method} ${path}`, status: r.status, details: r.body.error?.details }).toEqual({ route: `${method} ${path}`, ...refused });
    }
    // Routes that take no body refuse a field in one (an empty object is no field), and a body that is not an object.
    for (const [method, path, headers] of routes.filter(([method, , , body]) => method === 'POST' && body === undefined)) {
      const r = await send(method, path, headers, '{"bogus":1}');
      expect({ path, status: r.status, details: r.body.error?.details }).toEqual({ path, ...refused });
      expect({ path, param: (await send(method, path, headers, '[]')).body.error?.param }).toEqual({ path, param: 'body' });
    }
    // Nothing was done: no invoice, refund or payout, the project and keys as they were, the detail unconfirmed, the invoice unpaid.
    expect((await own.test.get(`/v1/invoices?orderId=${newOrder}`)).body.items).toEqual([]);
    expect((await own.test.get(`/v1/invoices/${paid}`)).body.status).toBe('paid');
    expect((await own.live.get('/v1/payouts')).body.items).toEqual([]);
    expect((await gw.operator.http.get(`/admin/v1/projects/${own.projectId}`)).body.name).toBe(own.project.name);
    expectStatus(await own.test.get('/v1/balance'), 200);
    expect((await own.live.get('/v1/payout-addresses')).body.items).toEqual([]);
    expect((await own.test.get(`/v1/invoices/${unpaid.body.id}`)).body.status).toBe(unpaid.body.status);
  });

  it('a read of one invoice or payout refused for a parameter does not spend its poll: the request without it is answered at once', async () => {
    const own = await gw.operator.merchant();
    for (const [path, key] of [
      [`/v1/invoices/${randomUUID()}`, own.keys.test.secretKey],
      ['/v1/payouts/999999998', own.keys.live.secretKey],
    ] as const) {
      const headers = { headers: merchantHeaders(key) };
      expect((await sendRaw(gw.baseUrl, 'GET', `${path}?mode=live`, headers)).status).toBe(400);
      expect({ path, status: (await sendRaw(gw.baseUrl, 'GET', path, headers)).status }).toEqual({ path, status: 404 });
      // The poll rule itself still holds: the same read again within 3 s is 429.
      expect({ path, status: (await sendRaw(gw.baseUrl, 'GET', path, headers)).status }).toEqual({ path, status: 429 });
    }
  });

  it('a query parameter named twice → 400 duplicate_field naming it, not a misleading bad value ("one of: paid, …" for status=paid&status=failed)', async () => {
    const own = await gw.operator.merchant();
    const test = merchantHeaders(own.keys.test.secretKey);
    const cases: [string, Record<string, string>, string][] = [
      ['/v1/invoices?status=paid&status=failed', test, 'status'],
      ['/v1/invoices?limit=5&limit=6', test, 'limit'],
      ['/v1/payouts?orderId=a&orderId=b', merchantHeaders(own.keys.live.secretKey), 'orderId'],
      ['/v1/balance?mode=live&mode=test', test, 'mode'],
      [`/admin/v1/accounts/${shop.accountId}/balance?mode=live&mode=test`, adminHeaders(), 'mode'],
    ];
    for (const [path, headers, param] of cases) {
      const r = await send('GET', path, headers);
      expect({ path, status: r.status, details: r.body.error?.details }).toEqual({
        path,
        status: 400,
        details: [{ param, code: 'duplicate_field', message: `${param}: параметр указан в адресе запроса дважды` }],
      });
    }
  });

  describe('a path id with NUL (%00) → 404 of that resource (or 400), never the database', () => {
    // Every route with an id, merchant and operator; each expected answer.
    const routes = (): {
      method: string;
      path: (id: string) => string;
      headers: () => Record<string, string>;
      body?: string;
      status: number;
      code: string;
    }[] => [
      { method: 'GET', path: (id) => `/v1/invoices/${id}`, headers: () => merchantHeaders(shop.keys.test.secretKey), status: 404, code: 'invoice_not_found' },
      {
        method: 'POST',
        path: (id) => `/v1/invoices/${id}/refund`,
        headers: () => merchantHeaders(shop.keys.test.secretKey),
        body: '{}',
        status: 404,
        code: 'invoice_not_found',
      },
      { method: 'GET', path: (id) => `/v1/refunds/${id}`, headers: () => merchantHeaders(shop.keys.test.secretKey), status: 404, code: 'invoice_not_found' },
      { method: 'GET', path: (id) => `/v1/payouts/${id}`, headers: () => merchantHeaders(shop.keys.live.secretKey), status: 404, code: 'not_found' },
      { method: 'GET', path: (id) => `/v1/payouts/${id}`, headers: () => merchantHeaders(shop.keys.test.secretKey), status: 404, code: 'not_found' },
      { method: 'GET', path: (id) => `/admin/v1/projects/${id}`, headers: adminHeaders, status: 404, code: 'not_found' },
      { method: 'PATCH', path: (id) => `/admin/v1/projects/${id}`, headers: adminHeaders, body: '{"name":"Новое имя"}', status: 404, code: 'not_found' },
      { method: 'POST', path: (id) => `/admin/v1/projects/${id}/keys/rotate`, headers: adminHeaders, body: '{"mode":"test"}', status: 404, code: 'not_found' },
      {
        method: 'POST',
        path: (id) => `/admin/v1/accounts/${id}/payout-addresses`,
        headers: adminHeaders,
        body: `{"method":"sbp","account":"${PHONE}"}`,
        status: 404,
        code: 'not_found',
      },
      { method: 'POST', path: (id) => `/admin/v1/payout-addresses/${id}/confirm`, headers: adminHeaders, status: 404, code: 'not_found' },
      {
        method: 'POST',
        path: (id) => `/admin/v1/invoices/${id}/payment`,
        headers: adminHeaders,
        body: '{"outcome":"paid"}',
        status: 404,
        code: 'invoice_not_found',
      },
      { method: 'POST', path: (id) => `/admin/v1/payouts/${id}/approve`, headers: adminHeaders, status: 404, code: 'not_found' },
      { method: 'POST', path: (id) => `/admin/v1/payouts/${id}/reject`, headers: adminHeaders, body: '{"reason":"нет"}', status: 404, code: 'not_found' },
      // The refund's own 404 code, as on the merchant API.
      { method: 'POST', path: (id) => `/admin/v1/refunds/${id}/fail`, headers: adminHeaders, status: 404, code: 'invoice_not_found' },
      { method: 'POST', path: (id) => `/admin/v1/webhook-deliveries/${id}/resend`, headers: adminHeaders, status: 404, code: 'not_found' },
      { method: 'GET', path: (id) => `/admin/v1/accounts/${id}/ledger?mode=test`, headers: adminHeaders, status: 400, code: 'validation' },
      { method: 'GET', path: (id) => `/admin/v1/accounts/${id}/balance?mode=test`, headers: adminHeaders, status: 400, code: 'validation' },
      { method: 'GET', path: (id) => `/admin/v1/streams/${id}`, headers: adminHeaders, status: 404, code: 'not_found' },
    ];

    it.each(['%00', 'a%00b', '1%00', 'rf_%00', 'invoice-%00', '%00%00%00'])('id %s on every route with an id', async (id) => {
      for (const route of routes()) {
        const path = route.path(id);
        const r = await send(route.method, path, route.headers(), route.body);
        expect({ route: `${route.method} ${path}`, status: r.status, code: r.body?.error?.code }).toEqual({
          route: `${route.method} ${path}`,
          status: route.status,
          code: route.code,
        });
      }
    });

    it.each(['%00', 'a%00b'])('the payment page of id %s: 404 (its HTML page), never a 500', async (id) => {
      expect((await send('GET', `/pay/${id}`, {})).status).toBe(404);
      const form = await sendRaw(gw.baseUrl, 'POST', `/pay/${id}/sandbox`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'outcome=paid',
      });
      expect(form.status).toBe(404);
    });

    it('an id with NUL after a real id is not that resource', async () => {
      const r = await send('GET', `/v1/invoices/${invoiceId}%00`, merchantHeaders(shop.keys.test.secretKey));
      expectError(r, 404, 'invoice_not_found');
      const stream = await send('GET', `/admin/v1/streams/invoice-${invoiceId}%00`, adminHeaders());
      expectError(stream, 404, 'not_found');
      expectStatus(await send('GET', `/admin/v1/streams/invoice-${invoiceId}`, adminHeaders()), 200);
    });
  });

  describe('number literals longer than a few hundred characters', () => {
    const createInvoice = (body: string) => send('POST', '/v1/invoices', merchantHeaders(shop.keys.test.secretKey), body);

    it('a long literal in customFields before the amount: 1e3 and 10.100 are still refused as written', async () => {
      for (const [amount, reason] of [
        ['1e3', 'invalid_money_exponent'],
        ['10.100', 'invalid_money_too_many_decimals'],
      ]) {
        // A decimal: customFields keeps it (an integer past 2^53 would be refused there, beside the amount's own refusal).
        const body = `{"orderId":"${orderId('long')}","customFields":{"pad":0.${'1'.repeat(500)}},"amount":${amount}}`;
        const r = await createInvoice(body);
        expectError(r, 400, 'validation', 'amount');
        expect(r.body.error.details.map((d: Json) => d.code)).toEqual([reason]);
      }
    });

    it('a long literal in the money field itself (its exponent beyond 400 characters) → 400 naming amount, on every endpoint with money', async () => {
      const amount = `1.${'0'.repeat(398)}e2`;
      const invoice = await createInvoice(`{"orderId":"${orderId('long')}","amount":${amount}}`);
      expectError(invoice, 400, 'validation', 'amount');
      const refund = await send('POST', `/v1/invoices/${invoiceId}/refund`, merchantHeaders(shop.keys.test.secretKey), `{"amount":${amount}}`);
      expectError(refund, 400, 'validation', 'amount');
      const payout = await send('POST', '/v1/payouts', merchantHeaders(shop.keys.live.secretKey), `{"addressId":${addressId},"amount":${amount}}`);
      expectError(payout, 400, 'validation', 'amount');
      const project = await send(
        'POST',
        '/admin/v1/projects',
        adminHeaders(),
        `{"accountId":"${shop.accountId}","name":"Длинные числа","methods":{"sbp":{"min":${amount}}}}`,
      );
      expectError(project, 400, 'validation', 'methods.sbp.min');
    });

    it('a long integer literal before the money field of a payout, and before a percent on the operator API: both still checked as written', async () => {
      // n.000…0e0 is the integer n (its exact value): taken, and the money or percent after it still read as written.
      const payout = await send('POST', '/v1/payouts', merchantHeaders(shop.keys.live.secretKey), `{"addressId":${longLiteralOf(addressId)},"amount":1e3}`);
      expectError(payout, 400, 'validation', 'amount');
      expect(payout.body.error.details.map((d: Json) => [d.param, d.code])).toEqual([['amount', 'invalid_money_exponent']]);
      const project = await send(
        'PATCH',
        `/admin/v1/projects/${shop.projectId}`,
        adminHeaders(),
        `{"holdHours":${longLiteralOf(0)},"methods":{"sbp":{"feePct":1e-1}}}`,
      );
      expectError(project, 400, 'validation', 'methods.sbp.feePct');
      expect(project.body.error.details.map((d: Json) => [d.param, d.code])).toEqual([['methods.sbp.feePct', 'invalid_percent_exponent']]);
      const invoice = await createInvoice(
        `{"orderId":"${orderId('long')}","expire":${longLiteralOf(60)},"amount":"100.00","method":"sbp","customerFeePct":1e-1}`,
      );
      expectError(invoice, 400, 'validation', 'customerFeePct');
      expect(invoice.body.error.details.map((d: Json) => [d.param, d.code])).toEqual([['customerFeePct', 'invalid_percent_exponent']]);
    });

    it('a literal of 60,000 digits anywhere: an answer in the error shape, and a valid body beside it still works', async () => {
      const huge = '9'.repeat(60_000);
      const r = await createInvoice(`{"orderId":"${orderId('huge')}","customFields":{"n":${huge}},"amount":"100.00"}`);
      // Infinity after parsing: a number JSON parsing changed, refused on customFields rather than kept as null.
      expectError(r, 400, 'validation', 'customFields');
      const ok = await createInvoice(`{"orderId":"${orderId('fine')}","customFields":{"n":0.${'7'.repeat(450)}},"amount":100.5}`);
      expectStatus(ok, 201);
      expect(ok.body.amount).toBe('100.50');
    });

    it('keys that collide with a nested path cannot lend their literal to another field', async () => {
      // "methods.sbp.feePct" as a top-level key is unknown (400 on it); the nested feePct is still checked as written.
      const r = await send('PATCH', `/admin/v1/projects/${shop.projectId}`, adminHeaders(), '{"methods":{"sbp":{"feePct":1e-1}},"methods.sbp.feePct":1.5}');
      expect(r.status).toBe(400);
      const details = r.body.error.details.map((d: Json) => `${d.param} ${d.code}`).sort();
      expect(details).toEqual(['methods.sbp.feePct invalid_percent_exponent', 'methods.sbp.feePct unknown_field']);
    });
  });

  describe('a field named twice in a JSON body → 400 validation naming it, nothing written', () => {
    const bodies = () => [
      {
        name: 'POST /v1/invoices',
        path: '/v1/invoices',
        headers: merchantHeaders(shop.keys.test.secretKey),
        body: `{"amount":100.001,"orderId":"${orderId('twice')}","amount":"100.00"}`,
        param: 'amount',
      },
      {
        name: 'POST /v1/invoices (nested)',
        path: '/v1/invoices',
        headers: merchantHeaders(shop.keys.test.secretKey),
        body: `{"amount":"100.00","orderId":"${orderId('twice')}","customer":{"email":"a@example.com","email":"b@example.com"}}`,
        param: 'customer.email',
      },
      {
        name: 'POST /v1/invoices (an escaped spelling of the same name)',
        path: '/v1/invoices',
        headers: merchantHeaders(shop.keys.test.secretKey),
        body: `{"amount":"100.00","orderId":"${orderId('twice')}","\\u006frderId":"${orderId('other')}"}`,
        param: 'orderId',
      },
      {
        name: 'POST /v1/invoices/{id}/refund',
        path: `/v1/invoices/${invoiceId}/refund`,
        headers: merchantHeaders(shop.keys.test.secretKey),
        body: '{"amount":"1.00","amount":"90.00"}',
        param: 'amount',
      },
      {
        name: 'POST /v1/payouts',
        path: '/v1/payouts',
        headers: merchantHeaders(shop.keys.live.secretKey),
        body: `{"amount":"150.00","addressId":${addressId},"amount":"100.00"}`,
        param: 'amount',
      },
      {
        name: 'POST /admin/v1/accounts',
        path: '/admin/v1/accounts',
        headers: adminHeaders(),
        body: '{"name":"Один","email":"one@example.com","name":"Другой"}',
        param: 'name',
      },
    ];

    it('on every merchant and operator body', async () => {
      const counts = async () =>
        (await gw.db.pool.query<{ n: string }>(`SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM accounts) AS n`)).rows[0]!.n;
      const before = await counts();
      for (const b of bodies()) {
        const r = await send('POST', b.path, b.headers, b.body);
        expect({ what: b.name, status: r.status, code: r.body?.error?.code, param: r.body?.error?.param }).toEqual({
          what: b.name,
          status: 400,
          code: 'validation',
          param: b.param,
        });
        expect(r.body.error.details).toEqual([{ param: b.param, code: 'duplicate_field', message: expect.stringMatching(/[А-Яа-я]/) }]);
      }
      expect(await counts()).toBe(before);
    });
  });

  describe('a body that is not UTF-8, or is compressed → refused before any check, nothing written', () => {
    const written = async () =>
      (await gw.db.pool.query<{ n: string }>(`SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM accounts) AS n`)).rows[0]!.n;
    /** A body as bytes: `text` in UTF-8 with `raw` (bytes that are not UTF-8) where `<bad>` stands. */
    const bytes = (text: string, raw: number[]) => {
      const [before, after] = text.split('<bad>') as [string, string];
      return Buffer.concat([Buffer.from(before), Buffer.from(raw), Buffer.from(after)]);
    };
    const sendBytes = (path: string, headers: Record<string, string>, body: Buffer) => sendWithinRate(path, { headers: { ...headers, ...json }, body });

    it('bytes that are not UTF-8 → 400 validation, param body, on merchant and operator bodies; two such orderIds are not made one', async () => {
      const before = await written();
      const order = orderId('latin1');
      const cases = [
        { path: '/v1/invoices', headers: merchantHeaders(shop.keys.test.secretKey), body: bytes(`{"amount":"100.00","orderId":"${order}-<bad>"}`, [0xe9]) },
        { path: '/v1/invoices', headers: merchantHeaders(shop.keys.test.secretKey), body: bytes(`{"amount":"200.00","orderId":"${order}-<bad>"}`, [0xe8]) },
        // An overlong encoding of "/" and a lone surrogate written as bytes: not UTF-8 either.
        {
          path: '/v1/invoices',
          headers: merchantHeaders(shop.keys.test.secretKey),
          body: bytes(`{"amount":"100.00","orderId":"${order}<bad>"}`, [0xc0, 0xaf]),
        },
        {
          path: '/v1/invoices',
          headers: merchantHeaders(shop.keys.test.secretKey),
          body: bytes(`{"amount":"100.00","orderId":"${order}<bad>"}`, [0xed, 0xa0, 0x80]),
        },
        { path: `/v1/invoices/${invoiceId}/refund`, headers: merchantHeaders(shop.keys.test.secretKey), body: bytes('{"amount":"1.00","x":"<bad>"}', [0xff]) },
        { path: '/admin/v1/accounts', headers: adminHeaders(), body: bytes('{"name":"Caf<bad>","email":"cafe@example.com"}', [0xe9]) },
        // UTF-16 (little-endian with its byte-order mark, big-endian without): told to send UTF-8 too.
        {
          path: '/v1/invoices',
          headers: merchantHeaders(shop.keys.test.secretKey),
          body: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`{"amount":"100.00","orderId":"${order}-16"}`, 'utf16le')]),
        },
        {
          path: '/v1/invoices',
          headers: merchantHeaders(shop.keys.test.secretKey),
          body: Buffer.from(`{"amount":"100.00","orderId":"${order}-16be"}`, 'utf16le').swap16(),
        },
      ];
      for (const c of cases) {
        const r = await sendBytes(c.path, c.headers, c.body);
        expect({ path: c.path, status: r.status, error: r.body?.error }).toEqual({
          path: c.path,
          status: 400,
          error: { code: 'validation', param: 'body', message: expect.stringContaining('UTF-8') },
        });
      }
      // A raw NUL inside UTF-8 JSON is a control character not escaped, not another encoding: no UTF-8 hint.
      const nul = await sendBytes('/v1/invoices', merchantHeaders(shop.keys.test.secretKey), bytes(`{"amount":"100.00","orderId":"${order}<bad>"}`, [0]));
      expect({ status: nul.status, error: nul.body?.error }).toEqual({
        status: 400,
        error: { code: 'validation', param: 'body', message: expect.not.stringContaining('UTF-8') },
      });
      expect(await written()).toBe(before);
      // The same text in UTF-8 is taken.
      const r = await sendBytes(
        '/v1/invoices',
        { ...merchantHeaders(shop.keys.test.secretKey), 'idempotency-key': `utf8-${order}` },
        Buffer.from(`{"amount":"100.00","orderId":"${order}-é"}`),
      );
      expectStatus(r, 201);
    });

    it('a query string with a percent-escape that is not UTF-8 → 400 naming its field, on merchant and operator routes', async () => {
      const literal = `%E9-${orderId('literal')}`;
      const created = await sendBytes(
        '/v1/invoices',
        merchantHeaders(shop.keys.test.secretKey),
        Buffer.from(JSON.stringify({ amount: '100.00', orderId: literal })),
      );
      expectStatus(created, 201);
      const get = (path: string, key = shop.keys.test.secretKey) => send('GET', path, merchantHeaders(key));
      // The text `%E9-…` is asked for as `%25E9-…`; `%E9-…` itself is not text.
      const found = await waitForList(shop.test, [created.body.id], `orderId=${encodeURIComponent(literal)}`);
      expect(found.map((i: Json) => i.id)).toEqual([created.body.id]);
      for (const [path, param, key] of [
        [`/v1/invoices?orderId=${literal}`, 'orderId', shop.keys.test.secretKey],
        ['/v1/invoices?limit=%zz', 'limit', shop.keys.test.secretKey],
        ['/v1/invoices?status=paid&orderId=a%C3', 'orderId', shop.keys.test.secretKey],
        ['/v1/invoices?%E9=1', 'query', shop.keys.test.secretKey],
        ['/v1/payouts?orderId=%E9', 'orderId', shop.keys.live.secretKey],
      ] as const) {
        const r = await get(path, key);
        expect({ path, status: r.status, code: r.body?.error?.code, param: r.body?.error?.param }).toEqual({ path, status: 400, code: 'validation', param });
      }
      const admin = await send('GET', '/admin/v1/audit/trial-balance?asOf=%FF', adminHeaders());
      expectError(admin, 400, 'validation', 'asOf');
    });

    it('an empty body labelled application/json → 400 saying it is empty; a refund is not taken as a full one', async () => {
      const before = await written();
      const refund = await send('POST', `/v1/invoices/${invoiceId}/refund`, { ...merchantHeaders(shop.keys.test.secretKey), ...json }, '');
      expectError(refund, 400, 'validation');
      expect(refund.body.error).toMatchObject({ param: 'body', message: expect.stringContaining('пустое') });
      const confirm = await send('POST', `/admin/v1/payout-addresses/${addressId}/confirm`, { ...adminHeaders(), ...json }, '');
      expect(confirm.body.error).toMatchObject({ code: 'validation', param: 'body', message: expect.stringContaining('пустое') });
      // Not JSON at all is still said to be so.
      const invalid = await send('POST', '/v1/invoices', { ...merchantHeaders(shop.keys.test.secretKey), ...json }, ' ');
      expect(invalid.body.error).toMatchObject({ code: 'validation', param: 'body', message: 'Тело запроса не является корректным JSON' });
      expect(await written()).toBe(before);
    });

    it('an empty body labelled as a form or text (curl -d "", PHP) → 415; a refund is not taken as a full one', async () => {
      const before = await written();
      for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=x']) {
        const headers = { ...merchantHeaders(shop.keys.test.secretKey), 'content-type': type };
        const refund = await sendWithinRate(`/v1/invoices/${invoiceId}/refund`, { headers, body: '' }, 'POST');
        expect({ type, status: refund.status, code: refund.body?.error?.code }).toEqual({ type, status: 415, code: 'unsupported_media_type' });
      }
      const form = { ...adminHeaders(), 'content-type': 'application/x-www-form-urlencoded' };
      const confirm = await sendWithinRate(`/admin/v1/payout-addresses/${addressId}/confirm`, { headers: form, body: '' }, 'POST');
      expectError(confirm, 415, 'unsupported_media_type');
      expect(await written()).toBe(before);
      // A GET that names a type for the body it does not have is still answered.
      expectStatus(await send('GET', `/v1/invoices/${invoiceId}`, { ...merchantHeaders(shop.keys.test.secretKey), 'content-type': 'text/plain' }), 200);
    });

    it('a Content-Encoding other than identity → 415 unsupported_media_type, whether or not the bytes are compressed', async () => {
      const before = await written();
      const body = `{"amount":"100.00","orderId":"${orderId('compressed')}"}`;
      const headers = merchantHeaders(shop.keys.test.secretKey);
      for (const [encoding, sent] of [
        ['gzip', gzipSync(body)],
        ['br', Buffer.from(body)],
        ['GZIP, identity', gzipSync(body)],
      ] as const) {
        const r = await sendBytes('/v1/invoices', { ...headers, 'content-encoding': encoding }, sent);
        expect({ encoding, status: r.status, code: r.body?.error?.code, message: r.body?.error?.message }).toEqual({
          encoding,
          status: 415,
          code: 'unsupported_media_type',
          message: expect.stringContaining('Content-Encoding'),
        });
      }
      const admin = await sendBytes(
        '/admin/v1/accounts',
        { ...adminHeaders(), 'content-encoding': 'gzip' },
        gzipSync('{"name":"Один","email":"one@example.com"}'),
      );
      expectError(admin, 415, 'unsupported_media_type');
      expect(await written()).toBe(before);
      // identity is no coding at all.
      expectStatus(
        await sendBytes('/v1/invoices', { ...headers, 'content-encoding': 'identity', 'idempotency-key': `identity-${body.length}` }, Buffer.from(body)),
        201,
      );
    });
  });
});
