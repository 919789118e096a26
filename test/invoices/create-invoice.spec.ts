/**
 * POST /invoices: the InvoiceCreated answer and its formats, every field rule with its
 * 400, orderId idempotency (also under 50 concurrent requests), the 422s and the 403.
 * The fee arithmetic has a file of its own (fees.spec.ts).
 */
import { randomUUID } from 'node:crypto';
import {
  CYRILLIC,
  expectError,
  expectStatus,
  InvoiceGateway,
  ISO_UTC,
  Json,
  listAll,
  Merchant,
  MONEY,
  orderId,
  PERCENT,
  Reply,
  startInvoiceGateway,
  UUID,
  waitForList,
} from '../support/merchant-fixtures';

const INVOICE_CREATED_FIELDS = [
  'id',
  'url',
  'status',
  'amount',
  'feePct',
  'feeAmount',
  'customerFeePct',
  'customerFeeShare',
  'customerFeeAmount',
  'payableAmount',
  'netAmount',
  'feePayer',
  'expiresAt',
];

describe('POST /invoices', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      // Sends more than 60 requests a second with one key; the rate limit has its own suite (rate-limits.spec.ts).
      RATE_LIMIT_PER_SECOND: '1000000',
    });
    shop = await gw.operator.merchant();
  });
  afterAll(async () => {
    await gw?.close();
  });

  const create = (body: Record<string, unknown>, client = shop.test) => client.post('/v1/invoices', { orderId: orderId(), ...body });
  const read = async (id: string, client = shop.test) => {
    const r = await client.get(`/v1/invoices/${id}`);
    expectStatus(r, 200);
    return r.body;
  };

  describe('201 InvoiceCreated', () => {
    it('has every field in the spec format', async () => {
      const before = Date.now();
      const r = await create({ amount: '2500.00', method: 'sbp' });
      const after = Date.now();
      expectStatus(r, 201);
      const body = r.body;
      for (const field of INVOICE_CREATED_FIELDS) expect({ field, present: field in body }).toEqual({ field, present: true });
      expect(body.id).toMatch(UUID);
      expect(body.url).toMatch(/^https?:\/\/\S+$/);
      expect(() => new URL(body.url)).not.toThrow();
      expect(body.url.endsWith(`/pay/${body.id}`)).toBe(true);
      expect(body.status).toBe('created');
      for (const money of ['amount', 'feeAmount', 'customerFeeAmount', 'payableAmount', 'netAmount']) {
        expect({ money, value: body[money] }).toEqual({ money, value: expect.stringMatching(MONEY) });
      }
      expect(body.feePct).toEqual(expect.stringMatching(PERCENT));
      expect(body.customerFeePct).toEqual(expect.stringMatching(PERCENT));
      expect(Number.isInteger(body.customerFeeShare)).toBe(true);
      expect(['merchant', 'customer']).toContain(body.feePayer);
      expect(body).toMatchObject({
        amount: '2500.00',
        feePct: '1.50',
        feeAmount: '37.50',
        customerFeePct: '1.50',
        customerFeeShare: 100,
        customerFeeAmount: '37.50',
        payableAmount: '2537.50',
        netAmount: '2500.00',
        feePayer: 'customer',
      });
      // Default lifetime: 60 minutes from now.
      expect(body.expiresAt).toMatch(ISO_UTC);
      const expiresAt = Date.parse(body.expiresAt);
      expect(expiresAt).toBeGreaterThanOrEqual(before + 60 * 60_000 - 1000);
      expect(expiresAt).toBeLessThanOrEqual(after + 60 * 60_000 + 1000);
      const invoice = await read(body.id);
      expect(Date.parse(invoice.expiresAt) - Date.parse(invoice.createdAt)).toBe(60 * 60_000);
      expect(Date.parse(invoice.createdAt)).toBeGreaterThanOrEqual(before - 1000);
      expect(Date.parse(invoice.createdAt)).toBeLessThanOrEqual(after + 1000);
    });

    it.each([
      ['a string', '100.00', '100.00'],
      ['an integer number', 100, '100.00'],
      ['a number with one decimal', 10.5, '10.50'],
      ['a number with two decimals', 1234.56, '1234.56'],
      ['a string with leading zeros', '0042.10', '42.10'],
    ])('takes amount as %s', async (_, amount, expected) => {
      const r = await create({ amount, method: 'card' });
      expectStatus(r, 201);
      expect(r.body.amount).toBe(expected);
      expect((await read(r.body.id)).amount).toBe(expected);
    });

    it.each([1, 59, 1440])('takes expire %i minutes: expiresAt = now + expire', async (expire) => {
      const before = Date.now();
      const r = await create({ amount: '100.00', expire });
      const after = Date.now();
      expectStatus(r, 201);
      const expiresAt = Date.parse(r.body.expiresAt);
      expect(expiresAt).toBeGreaterThanOrEqual(before + expire * 60_000 - 1000);
      expect(expiresAt).toBeLessThanOrEqual(after + expire * 60_000 + 1000);
      const invoice = await read(r.body.id);
      expect(Date.parse(invoice.expiresAt) - Date.parse(invoice.createdAt)).toBe(expire * 60_000);
    });

    it('takes the longest orderId and description, and keeps them', async () => {
      const longOrder = `o${'x'.repeat(127)}`;
      const description = 'Описание '.repeat(40).slice(0, 255);
      const r = await create({ amount: '100.00', orderId: longOrder, description });
      expectStatus(r, 201);
      expect(await read(r.body.id)).toMatchObject({ orderId: longOrder, description });
    });

    it('counts lengths in characters, as the document’s maxLength does: 128 in orderId and 255 in description fit as emoji, one more does not', async () => {
      const orderId = '💳'.repeat(128); // 256 UTF-16 code units
      const description = `${'😀'.repeat(253)}❤️`; // the heart and its variation selector are two characters
      const r = await create({ amount: '100.00', orderId, description });
      expectStatus(r, 201);
      expect(await read(r.body.id)).toMatchObject({ orderId, description });
      const tooLong = await create({ amount: '100.00', orderId: `${orderId}💳` });
      expectError(tooLong, 400, 'validation', 'orderId');
      expect(tooLong.body.error.message).toBe('orderId: не длиннее 128 символов');
      expectError(await create({ amount: '100.00', description: `${description}😀` }), 400, 'validation', 'description');
    });

    it('returns customFields as given, up to 2 KB of JSON (bytes, not characters)', async () => {
      const nested = {
        cart: [
          { sku: 'A-1', qty: 2, price: '10.00' },
          { sku: 'B-2', qty: 1, price: 5.5 },
        ],
        flags: { gift: true, express: false, coupon: null },
        comment: 'Позвоните за час',
        n: 0,
        deep: { a: { b: { c: [1, [2, [3]]] } } },
      };
      const r1 = await create({ amount: '100.00', customFields: nested });
      expectStatus(r1, 201);
      expect((await read(r1.body.id)).customFields).toEqual(nested);

      const ascii = padTo(2048, 'x');
      expect(Buffer.byteLength(JSON.stringify(ascii))).toBe(2048);
      const r2 = await create({ amount: '100.00', customFields: ascii });
      expectStatus(r2, 201);
      expect((await read(r2.body.id)).customFields).toEqual(ascii);

      // Two bytes per Cyrillic letter: 2048 bytes (1020 letters) fit; 2050 bytes (1021 letters) do not, below.
      const cyrillic = padTo(2048, 'я');
      expect(Buffer.byteLength(JSON.stringify(cyrillic))).toBe(2048);
      const r3 = await create({ amount: '100.00', customFields: cyrillic });
      expectStatus(r3, 201);
      expect((await read(r3.body.id)).customFields).toEqual(cyrillic);

      const nullFields = await create({ amount: '100.00', customFields: null });
      expectStatus(nullFields, 201);
      expect((await read(nullFields.body.id)).customFields).toBeNull();
      const none = await create({ amount: '100.00' });
      expect((await read(none.body.id)).customFields).toBeNull();
    });

    it('refuses a number in customFields that JSON parsing already changed, rather than answer it back changed', async () => {
      const raw = (customFields: string) =>
        shop.test.raw('POST', '/v1/invoices', {
          body: `{"amount":"100.00","orderId":"${orderId()}","customFields":${customFields}}`,
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json' },
        });
      for (const changed of ['{"n":12345678901234567890}', '{"a":[1,{"b":-9007199254740993}]}', '{"big":1e400}']) {
        const r = await raw(changed);
        expectError(r, 400, 'validation', 'customFields');
        expect(r.body.error.message).toContain('передайте его строкой');
      }
      // Up to 2^53 - 1 in magnitude, and any decimal, stay numbers as given.
      const kept = await raw('{"max":9007199254740991,"min":-9007199254740991,"f":0.1,"e":1e2}');
      expectStatus(kept, 201);
      expect((await read(kept.body.id)).customFields).toEqual({ max: 9007199254740991, min: -9007199254740991, f: 0.1, e: 100 });
      // The value comes back, not the bytes (docs/api.md): key order and number spelling may differ.
      const respelled = await raw('{"b":1.0,"a":1e2}');
      expectStatus(respelled, 201);
      expect(JSON.stringify((await read(respelled.body.id)).customFields)).toBe('{"a":100,"b":1}');
    });

    it('keeps the customer; payerEmail is the deprecated synonym of customer.email', async () => {
      const customer = { email: 'ivan@example.ru', phone: '+79991234567', userId: 'user-42', name: 'Иван' };
      const full = await create({ amount: '100.00', customer });
      expectStatus(full, 201);
      expect((await read(full.body.id)).customer).toEqual(customer);

      const legacy = await create({ amount: '100.00', payerEmail: 'old@example.com' });
      expectStatus(legacy, 201);
      expect((await read(legacy.body.id)).customer).toMatchObject({ email: 'old@example.com' });

      const legacyWithCustomer = await create({ amount: '100.00', payerEmail: 'old@example.com', customer: { name: 'Пётр', phone: '+12025550123' } });
      expectStatus(legacyWithCustomer, 201);
      expect((await read(legacyWithCustomer.body.id)).customer).toMatchObject({ email: 'old@example.com', name: 'Пётр', phone: '+12025550123' });

      // Both given: customer.email is the current field and wins.
      const both = await create({ amount: '100.00', payerEmail: 'old@example.com', customer: { email: 'new@example.com' } });
      expectStatus(both, 201);
      expect((await read(both.body.id)).customer).toMatchObject({ email: 'new@example.com' });

      const nothing = await create({ amount: '100.00' });
      const c = (await read(nothing.body.id)).customer;
      expect(c === null || typeof c === 'object').toBe(true);
      for (const v of Object.values(c ?? {})) expect(v).toBeNull();
    });

    it('keeps successUrl and failUrl (http and https URIs)', async () => {
      const r = await create({ amount: '100.00', successUrl: 'https://shop.example/ok?order=1&x=%20', failUrl: 'http://localhost:8080/fail' });
      expectStatus(r, 201);
      // The Invoice object has no field for them; the invoice's stored event (operator audit API) keeps them.
      const stream = await gw.operator.http.get(`/admin/v1/streams/invoice-${r.body.id}`);
      expectStatus(stream, 200);
      expect(stream.body.events[0].data).toMatchObject({ successUrl: 'https://shop.example/ok?order=1&x=%20', failUrl: 'http://localhost:8080/fail' });
    });
  });

  describe('400 validation', () => {
    const valid = () => ({ amount: '100.00', orderId: orderId() });

    it.each<[string, Record<string, unknown>, string]>([
      ['amount missing', { amount: undefined }, 'amount'],
      ['amount null', { amount: null }, 'amount'],
      ['amount "100" (no decimals)', { amount: '100' }, 'amount'],
      ['amount "100.0" (one decimal)', { amount: '100.0' }, 'amount'],
      ['amount "100.001"', { amount: '100.001' }, 'amount'],
      ['amount 100.001 (number)', { amount: 100.001 }, 'amount'],
      ['amount "-100.00"', { amount: '-100.00' }, 'amount'],
      ['amount -5', { amount: -5 }, 'amount'],
      ['amount "1e3"', { amount: '1e3' }, 'amount'],
      ['amount "100,00"', { amount: '100,00' }, 'amount'],
      ['amount " 100.00"', { amount: ' 100.00' }, 'amount'],
      ['amount true', { amount: true }, 'amount'],
      ['amount an object', { amount: { value: '100.00' } }, 'amount'],
      ['orderId missing', { orderId: undefined }, 'orderId'],
      ['orderId empty', { orderId: '' }, 'orderId'],
      ['orderId of 129 characters', { orderId: 'x'.repeat(129) }, 'orderId'],
      ['orderId a number', { orderId: 42 }, 'orderId'],
      ['description of 256 characters', { description: 'д'.repeat(256) }, 'description'],
      ['description a number', { description: 5 }, 'description'],
      ['method cash', { method: 'cash' }, 'method'],
      ['method SBP (case matters)', { method: 'SBP' }, 'method'],
      ['customerFeePct -1', { customerFeePct: -1 }, 'customerFeePct'],
      ['customerFeePct "abc"', { customerFeePct: 'abc' }, 'customerFeePct'],
      ['customerFeePct 1.00001 (more than four decimals)', { customerFeePct: 1.00001 }, 'customerFeePct'],
      ['customerFeePct 150.00001 (more than four decimals, above 100)', { customerFeePct: 150.00001 }, 'customerFeePct'],
      ['customerFeeShare 101', { customerFeeShare: 101 }, 'customerFeeShare'],
      ['customerFeeShare -1', { customerFeeShare: -1 }, 'customerFeeShare'],
      ['customerFeeShare 50.5', { customerFeeShare: 50.5 }, 'customerFeeShare'],
      ['customerFeeShare "50"', { customerFeeShare: '50' }, 'customerFeeShare'],
      ['feePayer both', { feePayer: 'both' }, 'feePayer'],
      ['successUrl not a URI', { successUrl: 'not a url' }, 'successUrl'],
      ['successUrl javascript:', { successUrl: 'javascript:alert(1)' }, 'successUrl'],
      ['successUrl with leading spaces (not a URI)', { successUrl: '  http://example.com/ok' }, 'successUrl'],
      ['successUrl with a control character', { successUrl: '\u0001https://example.com/ok' }, 'successUrl'],
      ['failUrl with backslashes', { failUrl: 'http:\\\\example.com\\fail' }, 'failUrl'],
      ['failUrl a relative path', { failUrl: '/fail' }, 'failUrl'],
      // A login part reads as another site: the buyer sees the bank's name and lands elsewhere.
      ['successUrl with a login part', { successUrl: 'https://sberbank.ru@evil.example/ok' }, 'successUrl'],
      ['failUrl with a user and password', { failUrl: 'https://user:pass@shop.example/fail' }, 'failUrl'],
      ['failUrl a number', { failUrl: 1 }, 'failUrl'],
      ['expire 0', { expire: 0 }, 'expire'],
      ['expire 1441', { expire: 1441 }, 'expire'],
      ['expire -5', { expire: -5 }, 'expire'],
      ['expire 1.5', { expire: 1.5 }, 'expire'],
      ['expire "60"', { expire: '60' }, 'expire'],
      ['customer a string', { customer: 'ivan@example.com' }, 'customer'],
      ['customer an array', { customer: [] }, 'customer'],
      ['customer.email invalid', { customer: { email: 'ivan@' } }, 'customer.email'],
      ['customer.email a number', { customer: { email: 7 } }, 'customer.email'],
      ['customer.phone without +', { customer: { phone: '89991234567' } }, 'customer.phone'],
      ['customer.phone with spaces', { customer: { phone: '+7 999 123 45 67' } }, 'customer.phone'],
      ['customer.phone with a leading 0', { customer: { phone: '+0123456789' } }, 'customer.phone'],
      ['customer.phone of 16 digits', { customer: { phone: '+1234567890123456' } }, 'customer.phone'],
      ['customer.userId a number', { customer: { userId: 42 } }, 'customer.userId'],
      ['customer.name a boolean', { customer: { name: true } }, 'customer.name'],
      ['payerEmail invalid', { payerEmail: 'not-an-email' }, 'payerEmail'],
      ['customFields an array', { customFields: [1, 2] }, 'customFields'],
      ['customFields a string', { customFields: '{"a":1}' }, 'customFields'],
      ['customFields of 2049 bytes', { customFields: padTo(2049, 'x') }, 'customFields'],
      ['customFields of 2050 bytes in Cyrillic', { customFields: padTo(2050, 'я') }, 'customFields'],
    ])('%s → 400 validation', async (_, change, param) => {
      const body: Record<string, unknown> = { ...valid(), ...change };
      for (const [k, v] of Object.entries(change)) if (v === undefined) delete body[k];
      const r = await shop.test.post('/v1/invoices', body);
      expectError(r, 400, 'validation', param);
      expect(r.body.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ param })]));
    });

    it('checks integer fields on the exact value written: a fraction is refused whatever it parses to, 60.0 is 60, bounds are exact', async () => {
      const post = (fields: string) =>
        shop.test.raw('POST', '/v1/invoices', {
          body: `{"amount":"100.00","orderId":"${orderId()}",${fields}}`,
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json' },
        });
      const notDigits = (param: string) => [{ param, code: 'invalid_type', message: `${param}: ожидается целое число` }];
      // Each of these parses to a number in range (1440, 1, 100, 100): the fraction written is what is refused.
      const refused: [string, string][] = [
        ['"expire":1440.0000000000000001', 'expire'],
        ['"expire":0.99999999999999999', 'expire'],
        ['"customerFeeShare":100.00000000000000001', 'customerFeeShare'],
        ['"customerFeeShare":99.99999999999999999', 'customerFeeShare'],
      ];
      const answers = [];
      for (const [fields] of refused) {
        const r = await post(fields);
        answers.push({ fields, status: r.status, code: r.body?.error?.code, details: r.body?.error?.details });
      }
      expect(answers).toEqual(refused.map(([fields, param]) => ({ fields, status: 400, code: 'validation', details: notDigits(param) })));
      // Out of range as written: the same answer as before.
      expect((await post('"expire":1441')).body.error.details).toEqual([{ param: 'expire', code: 'out_of_range', message: 'expire: от 1 до 1440' }]);
      expect((await post('"customerFeeShare":-1')).body.error.details).toEqual([
        { param: 'customerFeeShare', code: 'out_of_range', message: 'customerFeeShare: от 0 до 100' },
      ]);
      expect((await post('"expire":1.441e3')).body.error.details).toEqual([{ param: 'expire', code: 'out_of_range', message: 'expire: от 1 до 1440' }]);
      // Integers written with a zero fraction or an exponent are the integers they are (JSON Schema's integer).
      const written = await post('"method":"sbp","expire":60.0,"customerFeeShare":5E1');
      expectStatus(written, 201);
      expect(written.body.customerFeeShare).toBe(50);
      expectStatus(await post('"method":"sbp","expire":6e1,"customerFeeShare":-0.0'), 201);
      // Digits at the bounds (and -0, zero as JSON writes it) are taken.
      const taken = await post('"method":"sbp","expire":1440,"customerFeeShare":100');
      expectStatus(taken, 201);
      expect(taken.body.customerFeeShare).toBe(100);
      expectStatus(await post('"method":"sbp","expire":1,"customerFeeShare":-0'), 201);
    });

    it('lists every violation in details when several fields are wrong at once', async () => {
      const r = await shop.test.post('/v1/invoices', {
        amount: 'ten',
        orderId: '',
        method: 'cash',
        expire: 0,
        description: 'x'.repeat(256),
        successUrl: 'nope',
        customer: { email: 'bad', phone: '123' },
        payerEmail: 'also bad',
        customFields: 'x',
      });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('validation');
      expect(r.body.error.message).toMatch(CYRILLIC);
      const expected = ['amount', 'orderId', 'method', 'expire', 'description', 'successUrl', 'customer.email', 'customer.phone', 'payerEmail', 'customFields'];
      const details: { param: string; message: string }[] = r.body.error.details;
      expect(details.map((d) => d.param).sort()).toEqual([...expected].sort());
      for (const d of details) expect(d.message).toMatch(CYRILLIC);
      expect(expected).toContain(r.body.error.param);
    });

    it('refuses a body that is not JSON, not an object, or empty', async () => {
      const raw = (body: string | undefined, contentType = 'application/json') =>
        shop.test.raw('POST', '/v1/invoices', {
          body,
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': contentType },
        });
      // "400 validation: body is not valid JSON, wrong type …; param is present".
      const bodies = ['{"amount": "100.00", "orderId": ', '{amount: 1}', '[1,2,3]', '"text"', 'null', '42', undefined];
      const answers = [];
      for (const body of bodies) {
        const r = await raw(body);
        answers.push({ body, status: r.status, code: r.body?.error?.code, param: r.body?.error?.param, russian: CYRILLIC.test(r.body?.error?.message) });
      }
      expect(answers).toEqual(bodies.map((body) => ({ body, status: 400, code: 'validation', param: 'body', russian: true })));
    });

    it('a refused request creates nothing (the same orderId works afterwards)', async () => {
      const id = orderId();
      expectError(await shop.test.post('/v1/invoices', { amount: '1.234', orderId: id }), 400, 'validation', 'amount');
      expectStatus(await shop.test.post('/v1/invoices', { amount: '1.23', orderId: id, method: 'sbp' }), 422);
      expectStatus(await shop.test.post('/v1/invoices', { amount: '100.00', orderId: id }), 201);
    });
  });

  describe('orderId idempotency', () => {
    it('repeats with the same parameters answer 200 with the same invoice', async () => {
      const body = { amount: '500.00', orderId: orderId(), method: 'card', customerFeePct: 1, description: 'first' };
      const first = await shop.test.post('/v1/invoices', body);
      expectStatus(first, 201);
      const second = await shop.test.post('/v1/invoices', body);
      expectStatus(second, 200);
      expect(second.body).toEqual(first.body);
      // The amount as a number and the percent written otherwise are the same parameters.
      const third = await shop.test.post('/v1/invoices', { ...body, amount: 500, customerFeePct: 1.0 });
      expectStatus(third, 200);
      expect(third.body.id).toBe(first.body.id);
      // Only amount, method and customerFeePct make an invoice different; the first answer stands.
      const fourth = await shop.test.post('/v1/invoices', { ...body, description: 'second', expire: 5 });
      expectStatus(fourth, 200);
      expect(fourth.body).toEqual(first.body);
      expect((await read(first.body.id)).description).toBe('first');
    });

    it('a repeat without a method of an invoice without a method is the same invoice', async () => {
      const body = { amount: '300.00', orderId: orderId() };
      const first = await shop.test.post('/v1/invoices', body);
      expectStatus(first, 201);
      const again = await shop.test.post('/v1/invoices', body);
      expectStatus(again, 200);
      expect(again.body.id).toBe(first.body.id);
    });

    it.each<[string, Record<string, unknown>]>([
      ['another amount', { amount: '500.01' }],
      ['another amount as a number', { amount: 499 }],
      ['another method', { method: 'sbp' }],
      ['no method', { method: undefined }],
      ['another customerFeePct', { customerFeePct: 0.5 }],
      ['customerFeePct 0', { customerFeePct: 0 }],
      ['no customerFeePct (project default: the whole rate)', { customerFeePct: undefined }],
      ['a customerFeeShare giving another percent', { customerFeePct: undefined, customerFeeShare: 0 }],
      ['feePayer customer instead of 1 %', { customerFeePct: undefined, feePayer: 'customer' }],
    ])('a repeat with %s is 409 order_id_conflict', async (_, change) => {
      const body = { amount: '500.00', orderId: orderId(), method: 'card', customerFeePct: 1 };
      expectStatus(await shop.test.post('/v1/invoices', body), 201);
      const repeat: Record<string, unknown> = { ...body, ...change };
      for (const [k, v] of Object.entries(change)) if (v === undefined) delete repeat[k];
      expectError(await shop.test.post('/v1/invoices', repeat), 409, 'order_id_conflict');
    });

    it('a repeat asking a customerFeePct above the rate is not the invoice made at the whole rate: 409, not 200', async () => {
      // The card's 3 % on the buyer; a repeat asking 5 % (refused as too high on its own) once counted as "the whole rate".
      const body = { amount: '500.00', orderId: orderId(), method: 'card', customerFeePct: 3 };
      expectStatus(await shop.test.post('/v1/invoices', body), 201);
      expectError(await shop.test.post('/v1/invoices', { ...body, customerFeePct: 5 }), 409, 'order_id_conflict');
      expectStatus(await shop.test.post('/v1/invoices', body), 200);
    });

    it('50 concurrent identical requests create exactly one invoice', async () => {
      const body = { amount: '777.77', orderId: orderId('burst'), method: 'sbp', customer: { email: 'burst@example.com' } };
      const replies = await Promise.all(Array.from({ length: 50 }, () => shop.test.post('/v1/invoices', body)));
      const statuses = replies.map((r) => r.status);
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 200)).toHaveLength(49);
      const ids = new Set(replies.map((r) => r.body.id));
      expect(ids.size).toBe(1);
      const [id] = [...ids];
      for (const r of replies) expect(r.body).toEqual(replies[0]!.body);

      // Once the list has caught up past a later invoice, it shows the orderId exactly once.
      const sentinel = await create({ amount: '100.00' });
      expectStatus(sentinel, 201);
      await waitForList(shop.test, [sentinel.body.id]);
      const listed = await shop.test.get(`/v1/invoices?orderId=${encodeURIComponent(body.orderId)}`);
      expectStatus(listed, 200);
      expect(listed.body.items.map((i: Json) => i.id)).toEqual([id]);
      expect(listed.body.hasMore).toBe(false);
      // And the invoice's stream holds one InvoiceCreated.
      const stream = await gw.operator.http.get(`/admin/v1/streams/invoice-${id}`);
      expectStatus(stream, 200);
      expect(stream.body.events.map((e: Json) => e.type)).toEqual(['InvoiceCreated']);
    });

    it('20 concurrent requests with two amounts: one invoice, the other amount is refused', async () => {
      const id = orderId('race');
      const replies: Reply[] = await Promise.all(
        Array.from({ length: 20 }, (_, i) => shop.test.post('/v1/invoices', { amount: i % 2 === 0 ? '100.00' : '200.00', orderId: id })),
      );
      const created = replies.filter((r) => r.status === 201);
      expect(created).toHaveLength(1);
      const winner = created[0]!.body;
      for (const r of replies) {
        if (r === created[0]) continue;
        if (r.status === 200) expect(r.body).toEqual(winner);
        else expectError(r, 409, 'order_id_conflict');
      }
      expect(replies.filter((r) => r.status === 200)).toHaveLength(9);
      expect(replies.filter((r) => r.status === 409)).toHaveLength(10);
    });

    it('a repeat without fee parameters stays the same invoice after the operator moves the project slider', async () => {
      // "POST /invoices with the same orderId is always safe to repeat": the merchant sent
      // exactly the same request, so it is the same invoice whatever the project says now.
      const m = await gw.operator.merchant();
      const body = { amount: '1000.00', orderId: orderId(), method: 'card' };
      const first = await m.test.post('/v1/invoices', body);
      expectStatus(first, 201);
      await gw.operator.patchProject(m.projectId, { customerFeeShare: 50 });
      const repeat = await m.test.post('/v1/invoices', body);
      expect({ status: repeat.status, body: repeat.body }).toEqual({ status: 200, body: first.body });
    });
  });

  describe('422 and 403', () => {
    let usdt: Merchant;
    beforeAll(async () => {
      usdt = await gw.operator.merchant({ usdtEnabled: true });
    });

    it.each<[string, 'shop' | 'usdt', string, string | undefined]>([
      ['sbp below 10.00', 'shop', '9.99', 'sbp'],
      ['sbp above 1,000,000.00', 'shop', '1000000.01', 'sbp'],
      ['card below 10.00', 'shop', '9.99', 'card'],
      ['card above 600,000.00', 'shop', '600000.01', 'card'],
      ['crypto below 500.00', 'usdt', '499.99', 'crypto'],
      ['crypto above 5,000,000.00', 'usdt', '5000000.01', 'crypto'],
      ['no method, below every minimum', 'shop', '9.99', undefined],
      ['no method, zero', 'shop', '0.00', undefined],
      ['no method, above every maximum (no USDT)', 'shop', '1000000.01', undefined],
      ['no method, above every maximum (USDT)', 'usdt', '5000000.01', undefined],
    ])('%s → 422 amount_out_of_range', async (_, who, amount, method) => {
      const client = (who === 'shop' ? shop : usdt).test;
      const r = await client.post('/v1/invoices', { amount, orderId: orderId(), ...(method ? { method } : {}) });
      expectError(r, 422, 'amount_out_of_range');
      expect(r.body.error.param).toBe('amount');
    });

    it.each<[string, 'shop' | 'usdt', string, string | undefined]>([
      ['sbp at 10.00', 'shop', '10.00', 'sbp'],
      ['sbp at 1,000,000.00', 'shop', '1000000.00', 'sbp'],
      ['card at 10.00', 'shop', '10.00', 'card'],
      ['card at 600,000.00', 'shop', '600000.00', 'card'],
      ['crypto at 500.00', 'usdt', '500.00', 'crypto'],
      ['crypto at 5,000,000.00', 'usdt', '5000000.00', 'crypto'],
      ['no method at 10.00', 'shop', '10.00', undefined],
      ['no method at 1,000,000.00', 'shop', '1000000.00', undefined],
      ['no method at 5,000,000.00 with USDT', 'usdt', '5000000.00', undefined],
    ])('the limits are inclusive: %s → 201', async (_, who, amount, method) => {
      const client = (who === 'shop' ? shop : usdt).test;
      expectStatus(await client.post('/v1/invoices', { amount, orderId: orderId(), ...(method ? { method } : {}) }), 201);
    });

    it('uses the limits of the project overrides', async () => {
      const m = await gw.operator.merchant({ methods: { card: { min: '100.00', max: '200.00' } } });
      expectError(await m.test.post('/v1/invoices', { amount: '99.99', orderId: orderId(), method: 'card' }), 422, 'amount_out_of_range');
      expectError(await m.test.post('/v1/invoices', { amount: '200.01', orderId: orderId(), method: 'card' }), 422, 'amount_out_of_range');
      expectStatus(await m.test.post('/v1/invoices', { amount: '150.00', orderId: orderId(), method: 'card' }), 201);
      // sbp keeps its defaults.
      expectStatus(await m.test.post('/v1/invoices', { amount: '50.00', orderId: orderId(), method: 'sbp' }), 201);
    });

    it('an amount between the ranges of the enabled methods → 422 amount_out_of_range naming each method’s range, not one range that holds it', async () => {
      const m = await gw.operator.merchant({ usdtEnabled: true, methods: { sbp: { max: '100.00' }, card: { enabled: false }, crypto: { min: '500.00' } } });
      const r = await m.test.post('/v1/invoices', { amount: '200.00', orderId: orderId() });
      expectError(r, 422, 'amount_out_of_range');
      expect(r.body.error).toMatchObject({
        param: 'amount',
        message: 'Ни один включённый способ оплаты не принимает эту сумму: sbp — от 10.00 до 100.00, crypto — от 500.00 до 5000000.00',
      });
      expectStatus(await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() }), 201);
      expectStatus(await m.test.post('/v1/invoices', { amount: '500.00', orderId: orderId() }), 201);
    });

    it('a minimum below 0.01 is not a setting: an invoice of nothing, once paid, could not be posted to the ledger', async () => {
      const accountId = await gw.operator.createAccount();
      const created = await gw.operator.http.post('/admin/v1/projects', { accountId, name: 'Магазин', methods: { sbp: { min: '0.00' } } });
      expectError(created, 400, 'validation');
      expect(created.body.error.details).toEqual([
        { param: 'methods.sbp.min', code: 'out_of_range', message: 'methods.sbp.min: минимальная сумма счёта не меньше 0.01' },
      ]);
      const m = await gw.operator.merchant({ methods: { sbp: { min: '0.01' } } }, accountId);
      const patched = await gw.operator.http.patch(`/admin/v1/projects/${m.projectId}`, { methods: { card: { min: 0 } } });
      expectError(patched, 400, 'validation');
      expect(patched.body.error.param).toBe('methods.card.min');
      expectStatus(await m.test.post('/v1/invoices', { amount: '0.01', orderId: orderId(), method: 'sbp' }), 201);
    });

    it('what the buyer pays above the largest amount of money → 422 amount_out_of_range, not a 500', async () => {
      const m = await gw.operator.merchant({ methods: { card: { max: '1000000000.00' } } });
      // 3 % on top of 1,000,000,000.00 is more than the gateway's largest amount.
      const r = await m.test.post('/v1/invoices', { amount: '1000000000.00', orderId: orderId(), method: 'card' });
      expectError(r, 422, 'amount_out_of_range');
      expect(r.body.error).toMatchObject({
        param: 'amount',
        message: 'Сумма к оплате с комиссией покупателя больше 1000000000.00: уменьшите сумму или долю комиссии покупателя',
      });
      // The whole fee on the merchant: nothing on top, the amount itself is payable.
      expectStatus(await m.test.post('/v1/invoices', { amount: '1000000000.00', orderId: orderId(), method: 'card', customerFeePct: 0 }), 201);
    });

    it('a well-formed amount above the largest one, of any size, string or number → 422 amount_out_of_range, not 400', async () => {
      const post = (amount: string) =>
        shop.test.raw('POST', '/v1/invoices', {
          body: `{"amount":${amount},"orderId":"${orderId()}"}`,
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json' },
        });
      const thirty = '123456789012345678901234567890';
      const answers = [];
      // A number of 400 digits is Infinity to JSON.parse: judged on its literal, it is too much, not a 500.
      for (const amount of ['"1000000000.01"', '1000000000.01', '"9999999999.99"', `"${thirty}.00"`, thirty, `${thirty}.5`, '1' + '0'.repeat(400)]) {
        const r = await post(amount);
        answers.push({ amount: amount.slice(0, 40), status: r.status, code: r.body?.error?.code, param: r.body?.error?.param });
      }
      expect(answers).toEqual(answers.map(({ amount }) => ({ amount, status: 422, code: 'amount_out_of_range', param: 'amount' })));
      // With a method, the same answer as one kopeck past its maximum.
      const card = await shop.test.post('/v1/invoices', { amount: '1000000000.01', orderId: orderId(), method: 'card' });
      expectError(card, 422, 'amount_out_of_range');
      expect(card.body.error).toMatchObject({ param: 'amount', message: 'Сумма для способа card должна быть от 10.00 до 600000.00' });
      // Still the format rules first: too many decimals or an exponent is 400 at any size.
      for (const amount of ['"1000000000.001"', '1000000000.001', '1e10', '"1e10"']) expectError(await post(amount), 400, 'validation', 'amount');
    });

    it('customerFeePct above 100 is above every rate → 422 customer_fee_pct_too_high, as 3.01 on a 3.00 % rate', async () => {
      for (const pct of ['100.0001', '150', '1' + '0'.repeat(400)]) {
        const r = await shop.test.raw('POST', '/v1/invoices', {
          body: `{"amount":"1000.00","orderId":"${orderId()}","method":"card","customerFeePct":${pct}}`,
          headers: { authorization: `Bearer ${shop.keys.test.secretKey}`, 'content-type': 'application/json' },
        });
        expectError(r, 422, 'customer_fee_pct_too_high');
        expect(r.body.error).toMatchObject({ param: 'customerFeePct', message: 'customerFeePct не может быть больше ставки 3.00 %' });
      }
    });

    it('crypto without USDT acceptance → 422 method_unavailable, in both modes', async () => {
      for (const client of [shop.test, shop.live]) {
        const r = await client.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'crypto' });
        expectError(r, 422, 'method_unavailable');
        expect(r.body.error.param).toBe('method');
      }
      expectStatus(await usdt.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'crypto' }), 201);
    });

    it('a method disabled in the project → 422 method_unavailable; without a method it is not offered', async () => {
      const m = await gw.operator.merchant({ methods: { card: { enabled: false } } });
      expectError(await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), method: 'card' }), 422, 'method_unavailable');
      const free = await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() });
      expectStatus(free, 201);
      expect(free.body.feePct).toBe('1.50'); // sbp only, not card's 3.00

      // Disabled later by PATCH: refused at once; enabled again: accepted.
      await gw.operator.patchProject(m.projectId, { methods: { sbp: { enabled: false } } });
      expectError(await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), method: 'sbp' }), 422, 'method_unavailable');
      // No method left at all.
      expectError(await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() }), 422, 'method_unavailable');
      await gw.operator.patchProject(m.projectId, { methods: { sbp: { enabled: true } } });
      expectStatus(await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), method: 'sbp' }), 201);
    });

    it.each<[string, 'shop' | 'usdt', Record<string, unknown>]>([
      ['sbp 1.51 > 1.50', 'shop', { method: 'sbp', customerFeePct: 1.51 }],
      ['card 3.01 > 3.00', 'shop', { method: 'card', customerFeePct: 3.01 }],
      ['card 100 > 3.00', 'shop', { method: 'card', customerFeePct: 100 }],
      ['crypto 2.0001 > 2.00', 'usdt', { method: 'crypto', customerFeePct: 2.0001 }],
      ['no method, 3.01 > the largest rate 3.00', 'usdt', { customerFeePct: 3.01 }],
      ['no method at 700,000.00, 2.5 > the largest rate of sbp and crypto 2.00', 'usdt', { amount: '700000.00', customerFeePct: 2.5 }],
    ])('customerFeePct above the rate, %s → 422 customer_fee_pct_too_high', async (_, who, change) => {
      const client = (who === 'shop' ? shop : usdt).test;
      const r = await client.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), ...change });
      expectError(r, 422, 'customer_fee_pct_too_high');
      expect(r.body.error.param).toBe('customerFeePct');
    });

    it('customerFeePct equal to the rate is accepted', async () => {
      expectStatus(await shop.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'sbp', customerFeePct: 1.5 }), 201);
      expectStatus(await usdt.test.post('/v1/invoices', { amount: '1000.00', orderId: orderId(), method: 'crypto', customerFeePct: 2 }), 201);
    });

    it.each(['pending', 'rejected', 'blocked'] as const)(
      'a %s project: the live key gets 403 project_not_active, the test key still creates invoices',
      async (status) => {
        const m = await gw.operator.merchant({ status });
        expect(m.project.status).toBe(status);
        expectError(await m.live.post('/v1/invoices', { amount: '100.00', orderId: orderId() }), 403, 'project_not_active');
        const test = await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() });
        expectStatus(test, 201);
        // The live key still reads (the project is not active only for creating invoices).
        expectStatus(await m.live.get('/v1/invoices'), 200);
        expect(await listAll(m.live)).toEqual([]);
      },
    );

    it('blocking an active project stops new live invoices at once, not the repeat of one created; activating it again allows them', async () => {
      const m = await gw.operator.merchant();
      const first = { amount: '100.00', orderId: orderId() };
      const created = await m.live.post('/v1/invoices', first);
      expectStatus(created, 201);
      await gw.operator.patchProject(m.projectId, { status: 'blocked' });
      expectError(await m.live.post('/v1/invoices', { amount: '100.00', orderId: orderId() }), 403, 'project_not_active');
      // The invoice exists (and stays payable): its orderId's repeat answers it, as the spec says a repeat always may.
      const repeated = await m.live.post('/v1/invoices', first);
      expectStatus(repeated, 200);
      expect(repeated.body.id).toBe(created.body.id);
      expectError(await m.live.post('/v1/invoices', { ...first, amount: '200.00' }), 409, 'order_id_conflict');
      expectStatus(await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() }), 201);
      await gw.operator.patchProject(m.projectId, { status: 'active' });
      expectStatus(await m.live.post('/v1/invoices', { amount: '100.00', orderId: orderId() }), 201);
    });
  });

  describe('input the database cannot store as text', () => {
    it.each<[string, Record<string, unknown>]>([
      ['a NUL character in description', { description: 'a\u0000b' }],
      ['a NUL character in customFields', { customFields: { note: 'a\u0000b' } }],
      ['a NUL character in orderId', { orderId: `nul-${randomUUID()}\u0000x` }],
      ['a NUL character in customer.name', { customer: { name: 'a\u0000b' } }],
    ])('%s is a 400 validation (or accepted), never a 500', async (_, change) => {
      const r = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), ...change });
      expect({ status: r.status, code: r.body?.error?.code }).toEqual(
        r.status === 201 ? { status: 201, code: undefined } : { status: 400, code: 'validation' },
      );
    });
  });
});

/** `{k: "ccc…"}` whose JSON has exactly `bytes` bytes (for 2-byte chars: an even count). */
function padTo(bytes: number, char: string): { k: string } {
  let value = '';
  while (Buffer.byteLength(JSON.stringify({ k: value })) < bytes) value += char;
  return { k: value };
}
