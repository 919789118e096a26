/**
 * Who sees what: merchant keys (missing, malformed, unknown, revoked), test and live
 * data kept apart, projects kept apart, the operator API closed to merchant keys;
 * the reads: GET /invoices/{id} (read-your-writes), GET /invoices (filters, cursor
 * pages, paging while invoices are created) and GET /methods.
 */
import { randomUUID } from 'node:crypto';
import {
  api,
  expectError,
  expectStatus,
  InvoiceGateway,
  ISO_UTC,
  Json,
  listAll,
  Merchant,
  MONEY,
  orderId,
  poll,
  Reply,
  sleep,
  startInvoiceGateway,
  UUID,
  waitForList,
} from '../support/merchant-fixtures';

describe('merchant API access, modes and reads', () => {
  let gw: InvoiceGateway;
  let shop: Merchant;
  let other: Merchant;

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      // Asserts the 401 of dozens of bad keys from this one address; the failure limits have their own suite.
      AUTH_FAILURE_LIMIT_PER_ADDRESS: '1000000',
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
      // Sends more than 60 requests a second with one key; the rate limit has its own suite (rate-limits.spec.ts).
      RATE_LIMIT_PER_SECOND: '1000000',
    });
    shop = await gw.operator.merchant();
    other = await gw.operator.merchant();
  });
  afterAll(async () => {
    await gw?.close();
  });

  describe('set-up on the operator API', () => {
    it('creates an account and a project with a test and a live key pair', async () => {
      expect(shop.accountId).toMatch(UUID);
      expect(shop.project).toMatchObject({ id: expect.stringMatching(UUID), accountId: shop.accountId, status: 'active', usdtEnabled: false, holdHours: 24 });
      expect(shop.keys.test.secretKey).toMatch(/^sk_test_/);
      expect(shop.keys.test.publicKey).toMatch(/^pk_test_/);
      expect(shop.keys.live.secretKey).toMatch(/^sk_live_/);
      expect(shop.keys.live.publicKey).toMatch(/^pk_live_/);
      // Secret keys are shown once: GET of the project has none.
      const got = await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`);
      expectStatus(got, 200);
      expect(got.body.id).toBe(shop.projectId);
      expect(JSON.stringify(got.body)).not.toContain(shop.keys.test.secretKey);
      expect(got.body.keys).toBeUndefined();
    });
  });

  describe('401 unauthorized', () => {
    const body = () => ({ amount: '100.00', orderId: orderId() });

    it.each([
      ['no Authorization header', undefined],
      ['another scheme', 'Basic c2tfdGVzdF94eHg6'],
      ['Bearer without a key', 'Bearer '],
      ['a malformed key', 'Bearer not-a-key'],
      ['an unknown test key', `Bearer sk_test_${'A'.repeat(32)}`],
      ['an unknown live key', `Bearer sk_live_${'B'.repeat(32)}`],
    ])('refuses %s on every merchant endpoint', async (_, header) => {
      const headers: Record<string, string> = header === undefined ? {} : { authorization: header };
      const client = api(gw.baseUrl);
      for (const [method, path, payload] of [
        ['POST', '/v1/invoices', JSON.stringify(body())],
        ['GET', '/v1/invoices', undefined],
        ['GET', `/v1/invoices/${randomUUID()}`, undefined],
        ['GET', '/v1/methods', undefined],
        ['GET', '/v1/balance', undefined],
      ] as const) {
        const r = await client.raw(method, path, {
          body: payload,
          headers: { ...headers, ...(payload ? { 'content-type': 'application/json' } : {}) },
        });
        expectError(r, 401, 'unauthorized');
      }
    });

    it('refuses a public key used as a secret key', async () => {
      expectError(await api(gw.baseUrl, shop.keys.test.publicKey).get('/v1/invoices'), 401, 'unauthorized');
    });

    it('refuses the old key at once after a rotation, and the new key works', async () => {
      const m = await gw.operator.merchant();
      expectStatus(await m.test.post('/v1/invoices', body()), 201);

      const rotated = await gw.operator.http.post(`/admin/v1/projects/${m.projectId}/keys/rotate`, { mode: 'test' });
      expectStatus(rotated, 201);
      expect(rotated.body.secretKey).toMatch(/^sk_test_/);
      expect(rotated.body.publicKey).toMatch(/^pk_test_/);
      expect(rotated.body.secretKey).not.toBe(m.keys.test.secretKey);

      expectError(await m.test.post('/v1/invoices', body()), 401, 'unauthorized');
      expectError(await m.test.get('/v1/invoices'), 401, 'unauthorized');
      const fresh = api(gw.baseUrl, rotated.body.secretKey);
      expectStatus(await fresh.post('/v1/invoices', body()), 201);
      // Only that mode's pair was replaced.
      expectStatus(await m.live.get('/v1/invoices'), 200);

      const again = await gw.operator.http.post(`/admin/v1/projects/${m.projectId}/keys/rotate`, { mode: 'test' });
      expectStatus(again, 201);
      expectError(await fresh.get('/v1/balance'), 401, 'unauthorized');
      expectStatus(await api(gw.baseUrl, again.body.secretKey).get('/v1/balance'), 200);
    });
  });

  describe('test and live data never meet; projects never meet', () => {
    let testInvoice: string;
    let liveInvoice: string;
    let otherInvoice: string;
    const sharedOrderId = orderId('shared');

    beforeAll(async () => {
      const t = await shop.test.post('/v1/invoices', { amount: '150.00', orderId: sharedOrderId });
      const l = await shop.live.post('/v1/invoices', { amount: '150.00', orderId: sharedOrderId });
      const o = await other.test.post('/v1/invoices', { amount: '150.00', orderId: sharedOrderId });
      for (const r of [t, l, o]) expectStatus(r, 201);
      [testInvoice, liveInvoice, otherInvoice] = [t.body.id, l.body.id, o.body.id];
    });

    it('one orderId in each mode and project makes different invoices', () => {
      expect(new Set([testInvoice, liveInvoice, otherInvoice]).size).toBe(3);
    });

    it('GET by id with the key of the other mode or another project is 404 invoice_not_found', async () => {
      expectStatus(await shop.test.get(`/v1/invoices/${testInvoice}`), 200);
      expectStatus(await shop.live.get(`/v1/invoices/${liveInvoice}`), 200);
      expectError(await shop.live.get(`/v1/invoices/${testInvoice}`), 404, 'invoice_not_found');
      expectError(await shop.test.get(`/v1/invoices/${liveInvoice}`), 404, 'invoice_not_found');
      expectError(await other.test.get(`/v1/invoices/${testInvoice}`), 404, 'invoice_not_found');
      expectError(await other.live.get(`/v1/invoices/${liveInvoice}`), 404, 'invoice_not_found');
      expectError(await shop.test.get(`/v1/invoices/${otherInvoice}`), 404, 'invoice_not_found');
    });

    it('lists are separate per mode and per project', async () => {
      const testItems = await waitForList(shop.test, [testInvoice]);
      const liveItems = await waitForList(shop.live, [liveInvoice]);
      await waitForList(other.test, [otherInvoice]);

      expect(testItems.every((i) => i.isTest === true)).toBe(true);
      expect(liveItems.every((i) => i.isTest === false)).toBe(true);
      expect(testItems.map((i) => i.id)).not.toContain(liveInvoice);
      expect(liveItems.map((i) => i.id)).not.toContain(testInvoice);
      expect(testItems.map((i) => i.id)).not.toContain(otherInvoice);
      expect((await listAll(other.test)).map((i) => i.id)).not.toContain(testInvoice);
      expect(await listAll(other.live)).toEqual([]);
      // The orderId filter stays inside the key's project and mode.
      const byOrder = await shop.live.get(`/v1/invoices?orderId=${encodeURIComponent(sharedOrderId)}`);
      expect(byOrder.body.items.map((i: { id: string }) => i.id)).toEqual([liveInvoice]);
    });

    it('the live invoice says isTest false, the test one isTest true', async () => {
      expect((await shop.live.get(`/v1/invoices/${liveInvoice}`)).body.isTest).toBe(false);
      expect((await shop.test.get(`/v1/invoices/${testInvoice}`)).body.isTest).toBe(true);
    });
  });

  describe('the operator API', () => {
    it('refuses merchant keys and a missing or wrong token with 401', async () => {
      for (const token of [shop.keys.test.secretKey, shop.keys.live.secretKey, 'operator-token-but-wrong-00000', undefined]) {
        const client = api(gw.baseUrl, token);
        expectError(await client.post('/admin/v1/accounts', { name: 'x', email: 'x@example.com' }), 401, 'unauthorized');
        expectError(await client.get(`/admin/v1/projects/${shop.projectId}`), 401, 'unauthorized');
        expectError(await client.post(`/admin/v1/projects/${shop.projectId}/keys/rotate`, { mode: 'test' }), 401, 'unauthorized');
        expectError(await client.post(`/admin/v1/invoices/${randomUUID()}/payment`, { outcome: 'paid' }), 401, 'unauthorized');
      }
      // Nothing was rotated by those attempts.
      expectStatus(await shop.test.get('/v1/balance'), 200);
    });

    it.each([
      ['POST /admin/v1/accounts without a name', 'POST', '/admin/v1/accounts', { email: 'a@example.com' }, 'name'],
      ['POST /admin/v1/accounts with a bad e-mail', 'POST', '/admin/v1/accounts', { name: 'A', email: 'not-an-email' }, 'email'],
      ['POST /admin/v1/accounts with a non-object body', 'POST', '/admin/v1/accounts', [1, 2], 'body'],
      ['POST /admin/v1/projects without accountId', 'POST', '/admin/v1/projects', { name: 'P' }, 'accountId'],
      ['POST /admin/v1/projects with a non-UUID accountId', 'POST', '/admin/v1/projects', { accountId: 'acc-1', name: 'P' }, 'accountId'],
      ['POST /admin/v1/projects with an unknown status', 'POST', '/admin/v1/projects', { accountId: '@account', name: 'P', status: 'live' }, 'status'],
      ['POST /admin/v1/projects with holdHours -1', 'POST', '/admin/v1/projects', { accountId: '@account', name: 'P', holdHours: -1 }, 'holdHours'],
      ['POST /admin/v1/projects with usdtEnabled "yes"', 'POST', '/admin/v1/projects', { accountId: '@account', name: 'P', usdtEnabled: 'yes' }, 'usdtEnabled'],
      [
        'POST /admin/v1/projects with customerFeeShare 101',
        'POST',
        '/admin/v1/projects',
        { accountId: '@account', name: 'P', customerFeeShare: 101 },
        'customerFeeShare',
      ],
      [
        'POST /admin/v1/projects with a bad method rate',
        'POST',
        '/admin/v1/projects',
        { accountId: '@account', name: 'P', methods: { card: { feePct: 'three' } } },
        'methods.card.feePct',
      ],
      [
        'POST /admin/v1/projects with min above max',
        'POST',
        '/admin/v1/projects',
        { accountId: '@account', name: 'P', methods: { sbp: { min: '500.00', max: '100.00' } } },
        'methods.sbp',
      ],
      ['PATCH /admin/v1/projects/{id} with an unknown status', 'PATCH', '/admin/v1/projects/@project', { status: 'sleeping' }, 'status'],
      ['POST .../keys/rotate with mode prod', 'POST', '/admin/v1/projects/@project/keys/rotate', { mode: 'prod' }, 'mode'],
      ['POST .../keys/rotate without mode', 'POST', '/admin/v1/projects/@project/keys/rotate', {}, 'mode'],
      ['POST .../keys/rotate with a body that is an array', 'POST', '/admin/v1/projects/@project/keys/rotate', [{ mode: 'test' }], 'body'],
      ['POST /admin/v1/invoices/{id}/payment with outcome maybe', 'POST', '/admin/v1/invoices/@invoice/payment', { outcome: 'maybe' }, 'outcome'],
      ['POST /admin/v1/invoices/{id}/payment with method cash', 'POST', '/admin/v1/invoices/@invoice/payment', { outcome: 'paid', method: 'cash' }, 'method'],
    ])('%s → 400 validation with its param', async (_, method, path, body, param) => {
      const invoice = await shop.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() });
      const fill = (s: string) =>
        s
          .replace('@account', shop.accountId)
          .replace('@project', shop.projectId)
          .replace('@invoice', invoice.body.id as string);
      const payload = Array.isArray(body) ? body : Object.fromEntries(Object.entries(body).map(([k, v]) => [k, typeof v === 'string' ? fill(v) : v]));
      const r = method === 'PATCH' ? await gw.operator.http.patch(fill(path), payload) : await gw.operator.http.post(fill(path), payload);
      expectError(r, 400, 'validation', param);
      expect(r.body.error.details).toEqual(expect.arrayContaining([expect.objectContaining({ param })]));
    });

    it('a refused rotation leaves the keys working', async () => {
      expectError(await gw.operator.http.post(`/admin/v1/projects/${shop.projectId}/keys/rotate`, { mode: 'prod' }), 400, 'validation', 'mode');
      expectStatus(await shop.test.get('/v1/balance'), 200);
      expectStatus(await shop.live.get('/v1/balance'), 200);
    });
  });

  describe('GET /invoices/{id}', () => {
    it('answers the full Invoice right after the 201, without waiting', async () => {
      const request = {
        amount: '1234.56',
        orderId: orderId(),
        description: 'Заказ №42',
        method: 'card',
        customerFeePct: 1.25,
        successUrl: 'https://shop.example/ok',
        failUrl: 'https://shop.example/fail',
        expire: 30,
        customer: { email: 'buyer@example.com', phone: '+79991234567', userId: 'u-17', name: 'Иван Петров' },
        customFields: { cart: [{ sku: 'A-1', qty: 2 }], gift: true, note: null },
      };
      const created = await shop.test.post('/v1/invoices', request);
      expectStatus(created, 201);
      const got = await shop.test.get(`/v1/invoices/${created.body.id}`);
      expectStatus(got, 200);
      expect(got.body).toEqual({
        id: created.body.id,
        url: created.body.url,
        orderId: request.orderId,
        status: 'created',
        amount: '1234.56',
        feePct: '3.00',
        feeAmount: '37.04', // 1234.56 × 3 % = 37.0368
        customerFeePct: '1.25',
        customerFeeShare: 42, // 1.25 / 3.00 = 41.67 %
        customerFeeAmount: '15.43', // 1234.56 × 1.25 % = 15.432
        payableAmount: '1249.99',
        netAmount: '1212.95', // 1234.56 − (37.04 − 15.43)
        refundedAmount: '0.00',
        currency: 'RUB',
        method: 'card',
        feePayer: 'customer',
        description: 'Заказ №42',
        customer: request.customer,
        customFields: request.customFields,
        isTest: true,
        createdAt: expect.stringMatching(ISO_UTC),
        expiresAt: created.body.expiresAt,
        paidAt: null,
        availableAt: null,
      });
      // Everything InvoiceCreated said is what GET says.
      for (const [key, value] of Object.entries(created.body)) expect({ key, value: got.body[key] }).toEqual({ key, value });
      expect(Date.parse(got.body.expiresAt) - Date.parse(got.body.createdAt)).toBe(30 * 60_000);
    });

    it('reads each of 20 invoices at once after its 201', async () => {
      const created = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const c = await shop.test.post('/v1/invoices', { amount: `${100 + i}.00`, orderId: orderId('ryw') });
          expectStatus(c, 201);
          const g = await shop.test.get(`/v1/invoices/${c.body.id}`);
          return { c, g };
        }),
      );
      for (const { c, g } of created) {
        expectStatus(g, 200);
        expect(g.body.amount).toBe(c.body.amount);
      }
    });

    it('is 404 invoice_not_found for an unknown UUID and for a non-UUID id', async () => {
      for (const id of [randomUUID(), 'not-a-uuid', '12345', 'order-1', `${randomUUID()}x`]) {
        expectError(await shop.test.get(`/v1/invoices/${encodeURIComponent(id)}`), 404, 'invoice_not_found');
      }
    });
  });

  describe('GET /invoices', () => {
    let lister: Merchant;
    /** Six invoices created one after another (oldest first), with their Invoice from GET. */
    let six: Json[] = [];

    const ids = (items: Json[]) => items.map((i) => i.id as string);
    const q = (value: string) => encodeURIComponent(value);

    beforeAll(async () => {
      lister = await gw.operator.merchant();
      for (let i = 0; i < 6; i++) {
        const r = await lister.test.post('/v1/invoices', { amount: `${100 + i}.00`, orderId: orderId(`list-${i}`), method: 'sbp' });
        expectStatus(r, 201);
        six.push(r.body);
        await sleep(15); // distinct createdAt values
      }
      // #1 and #4 paid, #2 failed; the rest stay created.
      expectStatus(await gw.operator.payment(six[1].id, 'paid'), 200);
      expectStatus(await gw.operator.payment(six[4].id, 'paid'), 200);
      expectStatus(await gw.operator.payment(six[2].id, 'failed'), 200);
      six = await Promise.all(six.map(async (c) => (await lister.test.get(`/v1/invoices/${c.id}`)).body));
      await poll(
        () => listAll(lister.test),
        (items) => items.length === 6 && items.filter((i: Json) => i.status === 'paid').length === 2 && items.some((i: Json) => i.status === 'failed'),
        'the list to show six invoices with their payments',
      );
    });

    it('lists full Invoice objects, newest first', async () => {
      const r = await lister.test.get('/v1/invoices');
      expectStatus(r, 200);
      expect(r.body).toEqual({ items: expect.any(Array), nextCursor: null, hasMore: false });
      expect(ids(r.body.items)).toEqual(ids([...six].reverse()));
      // Each item is the Invoice that GET /invoices/{id} answers.
      for (const item of r.body.items) expect(item).toEqual(six.find((s) => s.id === item.id));
      const createdAts = r.body.items.map((i: Json) => Date.parse(i.createdAt));
      expect(createdAts).toEqual([...createdAts].sort((a, b) => b - a));
    });

    it('filters by orderId: 0 or 1 item', async () => {
      const one = await lister.test.get(`/v1/invoices?orderId=${q(six[3].orderId)}`);
      expectStatus(one, 200);
      expect(ids(one.body.items)).toEqual([six[3].id]);
      expect(one.body.hasMore).toBe(false);
      const none = await lister.test.get(`/v1/invoices?orderId=${q(orderId('missing'))}`);
      expect(none.body).toEqual({ items: [], nextCursor: null, hasMore: false });
      // Another project's orderId is not found here.
      const foreign = await shop.test.get(`/v1/invoices?orderId=${q(six[3].orderId)}`);
      expect(foreign.body.items).toEqual([]);
    });

    it('filters by status', async () => {
      const by = async (status: string) => ids((await lister.test.get(`/v1/invoices?status=${status}`)).body.items);
      expect(await by('paid')).toEqual([six[4].id, six[1].id]);
      expect(await by('failed')).toEqual([six[2].id]);
      expect(await by('created')).toEqual([six[5].id, six[3].id, six[0].id]);
      expect(await by('expired')).toEqual([]);
      expect(await by('refunded')).toEqual([]);
    });

    it('filters by from (inclusive) and to (exclusive) on createdAt', async () => {
      const range = async (query: string) => ids((await lister.test.get(`/v1/invoices?${query}`)).body.items);
      const at = (i: number) => q(six[i].createdAt);
      expect(await range(`from=${at(3)}`)).toEqual([six[5].id, six[4].id, six[3].id]);
      expect(await range(`to=${at(3)}`)).toEqual([six[2].id, six[1].id, six[0].id]);
      expect(await range(`from=${at(1)}&to=${at(4)}`)).toEqual([six[3].id, six[2].id, six[1].id]);
      expect(await range(`from=${at(2)}&to=${at(2)}`)).toEqual([]);
      expect(await range(`from=${at(1)}&status=paid`)).toEqual([six[4].id, six[1].id]);
      expect(await range(`from=${at(2)}&status=paid`)).toEqual([six[4].id]);
      // One millisecond after #5: nothing; one millisecond after #0 as `to`: only #0.
      expect(await range(`from=${q(new Date(Date.parse(six[5].createdAt) + 1).toISOString())}`)).toEqual([]);
      expect(await range(`to=${q(new Date(Date.parse(six[0].createdAt) + 1).toISOString())}`)).toEqual([six[0].id]);
      // Microseconds past #3's millisecond: #3 was created before that instant (from excludes it, to includes it).
      const past3 = q(six[3].createdAt.replace('Z', '500Z'));
      expect(await range(`from=${past3}`)).toEqual([six[5].id, six[4].id]);
      expect(await range(`to=${past3}`)).toEqual([six[3].id, six[2].id, six[1].id, six[0].id]);
      expect(await range(`from=${q(six[3].createdAt.replace('Z', '000Z'))}`)).toEqual([six[5].id, six[4].id, six[3].id]);
      // The same instant as #3 written in Moscow time.
      const moscow = new Date(Date.parse(six[3].createdAt) + 3 * 3_600_000).toISOString().replace('Z', '+03:00');
      expect(await range(`from=${q(moscow)}`)).toEqual([six[5].id, six[4].id, six[3].id]);
    });

    it('takes from and to with 7 and 9 fraction digits (.NET, Go, Java), to the last digit written', async () => {
      const range = async (query: string) => {
        const r = await lister.test.get(`/v1/invoices?${query}`);
        expectStatus(r, 200);
        return ids(r.body.items);
      };
      // #3 at …ss.mmmZ; `digits` appended to its milliseconds, and the millisecond before it.
      expect(six[3].createdAt).toMatch(/\.\d{3}Z$/);
      const at3 = (digits: string) => q(six[3].createdAt.replace('Z', `${digits}Z`));
      const before3 = (digits: string) => q(new Date(Date.parse(six[3].createdAt) - 1).toISOString().replace('Z', `${digits}Z`));
      const from3 = [six[5].id, six[4].id, six[3].id];
      const before = [six[2].id, six[1].id, six[0].id];
      for (const zeros of ['0000', '000000']) {
        // Exactly #3's instant: from takes it in, to leaves it out.
        expect(await range(`from=${at3(zeros)}`)).toEqual(from3);
        expect(await range(`to=${at3(zeros)}`)).toEqual(before);
        // One unit of the 7th or 9th digit past it: #3 happened before it.
        const past = at3(`${zeros.slice(1)}1`);
        expect(await range(`from=${past}`)).toEqual([six[5].id, six[4].id]);
        expect(await range(`to=${past}`)).toEqual([six[3].id, ...before]);
        // One unit before it: #3 happened after it.
        const short = before3(zeros.replace(/0/g, '9'));
        expect(await range(`from=${short}`)).toEqual(from3);
        expect(await range(`to=${short}`)).toEqual(before);
        // A reversed period by that last digit is refused; the same instant, however written, is an empty one.
        const reversed = await lister.test.get(`/v1/invoices?from=${at3(`${zeros.slice(1)}2`)}&to=${past}`);
        expectError(reversed, 400, 'validation', 'to');
        expect(reversed.body.error.details).toEqual([expect.objectContaining({ param: 'to', code: 'invalid_range' })]);
        expect(await range(`from=${past}&to=${at3(`${zeros.slice(1)}2`)}`)).toEqual([]);
      }
      // Ten digits: Node's Date would misread them (.0999999999 as .999), so they are refused.
      expectError(await lister.test.get(`/v1/invoices?from=${q(six[3].createdAt.replace(/\.\d{3}Z$/, '.0999999999Z'))}`), 400, 'validation', 'from');
      // 9 digits with an offset: #3's instant in Moscow time.
      const moscow = new Date(Date.parse(six[3].createdAt) + 3 * 3_600_000).toISOString().replace('Z', '000001+03:00');
      expect(await range(`from=${q(moscow)}`)).toEqual([six[5].id, six[4].id]);
    });

    it('pages with limit and an opaque cursor', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r: Reply = await lister.test.get(`/v1/invoices?limit=4${cursor ? `&cursor=${q(cursor)}` : ''}`);
        expectStatus(r, 200);
        expect(r.body.hasMore).toBe(r.body.nextCursor !== null);
        if (r.body.nextCursor !== null) expect(typeof r.body.nextCursor).toBe('string');
        seen.push(...ids(r.body.items));
        cursor = r.body.nextCursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(2);
      expect(seen).toEqual(ids([...six].reverse()));
      const one = await lister.test.get('/v1/invoices?limit=1');
      expect(ids(one.body.items)).toEqual([six[5].id]);
      expect(one.body.hasMore).toBe(true);
      // A cursor keeps the filters of the query it is used with.
      const paid1 = await lister.test.get('/v1/invoices?status=paid&limit=1');
      const paid2 = await lister.test.get(`/v1/invoices?status=paid&limit=1&cursor=${q(paid1.body.nextCursor)}`);
      expect([...ids(paid1.body.items), ...ids(paid2.body.items)]).toEqual([six[4].id, six[1].id]);
      expect(paid2.body).toMatchObject({ hasMore: false, nextCursor: null });
      expectStatus(await lister.test.get('/v1/invoices?limit=100'), 200);
    });

    it.each<[string, string, string]>([
      ['limit 0', 'limit=0', 'limit'],
      ['limit 101', 'limit=101', 'limit'],
      ['limit -1', 'limit=-1', 'limit'],
      ['limit abc', 'limit=abc', 'limit'],
      ['limit 1.5', 'limit=1.5', 'limit'],
      ['a garbage cursor', 'cursor=garbage!!', 'cursor'],
      ['a base64 cursor that is not ours', `cursor=${Buffer.from('{"page":2}').toString('base64url')}`, 'cursor'],
      ['a base64 non-JSON cursor', `cursor=${Buffer.from('hello').toString('base64url')}`, 'cursor'],
      ['an empty cursor', 'cursor=', 'cursor'],
      ['an unknown status', 'status=archived', 'status'],
      ['from not a datetime', 'from=yesterday', 'from'],
      ['from a date only', 'from=2026-01-01', 'from'],
      ['to an impossible date', 'to=2026-13-45T00:00:00Z', 'to'],
      ['from 30 February (not 2 March)', 'from=2026-02-30T00:00:00Z', 'from'],
      ['to 29 February of a common year', 'to=2026-02-29T12:00:00Z', 'to'],
      ['to 29 February of 0100, a common year', 'to=0100-02-29T12:00:00Z', 'to'],
      ['to 24:00 (not the next midnight)', 'to=2026-03-01T24:00:00Z', 'to'],
      ['to before from (invalid_range, as the reports answer it)', 'from=2026-03-02T00:00:00Z&to=2026-03-01T23:59:59.999Z', 'to'],
      ['to before from by less than a millisecond', 'from=2026-03-01T00:00:00.0009Z&to=2026-03-01T00:00:00.0001Z', 'to'],
      ['orderId of 129 characters', `orderId=${'x'.repeat(129)}`, 'orderId'],
    ])('%s → 400 validation', async (_, query, param) => {
      const r = await lister.test.get(`/v1/invoices?${query}`);
      expectError(r, 400, 'validation', param);
    });

    it('refuses an instant outside the years 0000..9999 in UTC (its echo would be no valid input); the bounds are read', async () => {
      // 0000-01-01T00:00+03:00 is -000001-12-31T21:00:00.000Z in UTC, 9999-12-31T23:00-03:00 is +010000-01-01T02:00:00.000Z.
      for (const [param, value] of [
        ['from', '0000-01-01T00:00:00+03:00'],
        ['to', '9999-12-31T23:00:00-03:00'],
        ['from', '0000-01-01T00:00:59.999+00:01'],
      ]) {
        const r = await lister.test.get(`/v1/invoices?${param}=${q(value!)}`);
        expectError(r, 400, 'validation', param);
        expect(r.body.error.details).toEqual([{ param, code: 'invalid_datetime', message: expect.stringContaining('0000-01-01T00:00:00Z') }]);
      }
      expectStatus(await lister.test.get(`/v1/invoices?from=${q('0000-01-01T00:00:00Z')}&to=${q('9999-12-31T23:59:59.999Z')}`), 200);
      expectStatus(await lister.test.get(`/v1/invoices?from=${q('0000-01-01T03:00:00+03:00')}&to=${q('9999-12-31T20:59:59.999-03:00')}`), 200);
      // Leap days of years 0..99 by the Gregorian rule (Date.UTC would read 0000 as 1900, a common year).
      expectStatus(await lister.test.get(`/v1/invoices?from=${q('0000-02-29T00:00:00Z')}&to=${q('0004-02-29T00:00:00Z')}`), 200);
    });

    it('defaults to 20 items a page', async () => {
      const m = await gw.operator.merchant();
      const created: string[] = [];
      for (let i = 0; i < 23; i++) created.push((await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId() })).body.id);
      await waitForList(m.test, created);
      const first = await m.test.get('/v1/invoices');
      expect(first.body.items).toHaveLength(20);
      expect(first.body.hasMore).toBe(true);
      const second = await m.test.get(`/v1/invoices?cursor=${q(first.body.nextCursor)}`);
      expect(second.body.items).toHaveLength(3);
      expect(second.body).toMatchObject({ hasMore: false, nextCursor: null });
      expect([...ids(first.body.items), ...ids(second.body.items)]).toEqual([...created].reverse());
    });

    it('paging never repeats or skips an invoice while new ones are created', async () => {
      const m = await gw.operator.merchant();
      const before: string[] = [];
      for (let i = 0; i < 45; i++) {
        const r = await m.test.post('/v1/invoices', { amount: `${10 + i}.00`, orderId: orderId(`page-${i}`) });
        expectStatus(r, 201);
        before.push(r.body.id);
      }
      await waitForList(m.test, before);

      // Writers keep creating invoices while the reader pages with limit 7.
      const during: string[] = [];
      let writing = true;
      const writer = async () => {
        while (writing) {
          const r = await m.test.post('/v1/invoices', { amount: '55.55', orderId: orderId('during') });
          expectStatus(r, 201);
          during.push(r.body.id);
        }
      };
      const writers = [writer(), writer()];
      const pages: string[][] = [];
      try {
        let cursor: string | null = null;
        do {
          const r: Reply = await m.test.get(`/v1/invoices?limit=7${cursor ? `&cursor=${q(cursor)}` : ''}`);
          expectStatus(r, 200);
          expect(r.body.items.length).toBeLessThanOrEqual(7);
          expect(r.body.hasMore).toBe(r.body.nextCursor !== null);
          pages.push(ids(r.body.items));
          cursor = r.body.nextCursor;
          await sleep(40); // let the writers land invoices between pages
        } while (cursor);
      } finally {
        writing = false;
        await Promise.all(writers);
      }
      const seen = pages.flat();
      expect(during.length).toBeGreaterThan(0);
      expect(new Set(seen).size).toBe(seen.length); // no duplicates
      expect(before.filter((id) => !seen.includes(id))).toEqual([]); // nothing that existed was skipped
      expect(seen.filter((id) => !before.includes(id) && !during.includes(id))).toEqual([]);
      // The invoices created one after another come newest first.
      expect(seen.filter((id) => before.includes(id))).toEqual([...before].reverse());
      expect(pages.length).toBeGreaterThanOrEqual(7);

      // Once the list caught up: every invoice exactly once.
      const all = await waitForList(m.test, [...before, ...during]);
      expect(ids(all).sort()).toEqual([...before, ...during].sort());
    });
  });

  describe('GET /methods', () => {
    const DEFAULTS = {
      sbp: { feePct: '1.50', min: '10.00', max: '1000000.00' },
      card: { feePct: '3.00', min: '10.00', max: '600000.00' },
      crypto: { feePct: '2.00', min: '500.00', max: '5000000.00' },
    };

    const byCode = (methods: { code: string }[]) => Object.fromEntries(methods.map((m) => [m.code, m]));

    it('lists the three methods with the defaults; crypto disabled without USDT', async () => {
      const r = await shop.test.get('/v1/methods');
      expectStatus(r, 200);
      expect(r.body.methods.map((m: { code: string }) => m.code).sort()).toEqual(['card', 'crypto', 'sbp']);
      for (const m of r.body.methods) {
        expect(m).toEqual({
          code: m.code,
          title: expect.any(String),
          feePct: expect.stringMatching(/^\d+\.\d{2,4}$/),
          min: expect.stringMatching(MONEY),
          max: expect.stringMatching(MONEY),
          currency: 'RUB',
          enabled: expect.any(Boolean),
        });
        expect(m.title.length).toBeGreaterThan(0);
      }
      const methods = byCode(r.body.methods);
      expect(methods).toMatchObject({
        sbp: { ...DEFAULTS.sbp, enabled: true },
        card: { ...DEFAULTS.card, enabled: true },
        crypto: { ...DEFAULTS.crypto, enabled: false },
      });
      // The same in both modes.
      expect(byCode((await shop.live.get('/v1/methods')).body.methods)).toEqual(methods);
    });

    it('shows crypto enabled with USDT, and the project overrides', async () => {
      const m = await gw.operator.merchant({
        usdtEnabled: true,
        methods: { card: { feePct: 2.75, min: '100.00', max: 50000 }, sbp: { enabled: false } },
      });
      const methods = byCode((await m.test.get('/v1/methods')).body.methods);
      expect(methods).toMatchObject({
        sbp: { ...DEFAULTS.sbp, enabled: false },
        card: { feePct: '2.75', min: '100.00', max: '50000.00', enabled: true, currency: 'RUB' },
        crypto: { ...DEFAULTS.crypto, enabled: true },
      });

      // A PATCH shows at once.
      await gw.operator.patchProject(m.projectId, { usdtEnabled: false, methods: { sbp: { enabled: true, feePct: '1.2345' } } });
      expect(byCode((await m.test.get('/v1/methods')).body.methods)).toMatchObject({
        sbp: { feePct: '1.2345', enabled: true },
        card: { feePct: '2.75', min: '100.00', max: '50000.00', enabled: true },
        crypto: { enabled: false },
      });
    });
  });
});
