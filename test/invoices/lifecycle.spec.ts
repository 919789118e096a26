/**
 * The life of an invoice on a gateway with CLOCK=manual: paid (with the project's
 * hold), failed, expired; what may follow each; and GET /balance per mode as the
 * ledger (fed asynchronously) records payments and releases holds.
 *
 * The tests share one clock and run in order: each advance moves time for all.
 */
import { Client, expectError, expectStatus, InvoiceGateway, ISO_UTC, Json, Merchant, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';

const HOUR = 3_600_000;

describe('invoice lifecycle and balance (CLOCK=manual)', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      CLOCK: 'manual',
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const balance = async (client: Client): Promise<Json> => {
    const r = await client.get('/v1/balance');
    expectStatus(r, 200);
    return r.body;
  };
  const waitForBalance = (client: Client, expected: { available: string; pending: string }, what: string) =>
    poll(
      () => balance(client),
      (b) => b.available === expected.available && b.pending === expected.pending,
      `balance ${JSON.stringify(expected)} (${what})`,
    );
  const createInvoice = async (client: Client, body: Record<string, unknown>) => {
    const r = await client.post('/v1/invoices', { orderId: orderId(), ...body });
    expectStatus(r, 201);
    return r.body;
  };
  /** Pays through the operator API; answers the invoice and the clock readings around the call. */
  const pay = async (invoiceId: string, method?: string) => {
    const before = await gw.operator.advance(0);
    const r = await gw.operator.payment(invoiceId, 'paid', method);
    const after = await gw.operator.advance(0);
    expectStatus(r, 200);
    return { invoice: r.body, before, after };
  };
  /** Polls the list (not GET by id, which the spec rate-limits per invoice) until the invoice has the status. */
  const waitForStatus = (client: Client, invoice: Json, status: string) =>
    poll(
      async () => (await client.get(`/v1/invoices?orderId=${encodeURIComponent(invoice.orderId)}`)).body.items[0],
      (item) => item?.status === status,
      `invoice ${invoice.id} to be ${status}`,
    );

  let day: Merchant; // holdHours 24 (default)
  let twoHours: Merchant; // holdHours 2
  let noHold: Merchant; // holdHours 0
  let chooser: Merchant; // holdHours 24, the buyer chooses the method

  describe('paid', () => {
    it('starts from a zero balance in both modes', async () => {
      day = await gw.operator.merchant();
      expect(day.project.holdHours).toBe(24);
      for (const client of [day.test, day.live]) {
        expect(await balance(client)).toEqual({ available: '0.00', pending: '0.00', reserved: '0.00', currency: 'RUB' });
      }
    });

    it('holdHours 24: paid, paidAt now, availableAt = paidAt + 24 h, the net amount pending', async () => {
      const created = await createInvoice(day.test, { amount: '1000.00', method: 'sbp', customerFeePct: 0 });
      expect(created.netAmount).toBe('985.00');
      const { invoice, before, after } = await pay(created.id);
      expect(invoice).toMatchObject({ id: created.id, status: 'paid', method: 'sbp', netAmount: '985.00' });
      expect(invoice.paidAt).toMatch(ISO_UTC);
      const paidAt = Date.parse(invoice.paidAt);
      expect(paidAt).toBeGreaterThanOrEqual(before.getTime());
      expect(paidAt).toBeLessThanOrEqual(after.getTime());
      expect(Date.parse(invoice.availableAt)).toBe(paidAt + 24 * HOUR);

      const got = await day.test.get(`/v1/invoices/${created.id}`);
      expect(got.body).toMatchObject({ status: 'paid', paidAt: invoice.paidAt, availableAt: invoice.availableAt });
      await waitForStatus(day.test, got.body, 'paid');
      expect(await waitForBalance(day.test, { available: '0.00', pending: '985.00' }, 'after the payment')).toMatchObject({
        reserved: '0.00',
        currency: 'RUB',
      });
    });

    it('holdHours 2: availableAt = paidAt + 2 h', async () => {
      twoHours = await gw.operator.merchant({ holdHours: 2 });
      const created = await createInvoice(twoHours.test, { amount: '1000.00', method: 'card', customerFeePct: 1 });
      expect(created.netAmount).toBe('980.00');
      const { invoice } = await pay(created.id);
      expect(Date.parse(invoice.availableAt)).toBe(Date.parse(invoice.paidAt) + 2 * HOUR);
      await waitForBalance(twoHours.test, { available: '0.00', pending: '980.00' }, 'after the payment');
    });

    it('holdHours 0: availableAt null and the net amount goes straight to available', async () => {
      noHold = await gw.operator.merchant({ holdHours: 0 });
      const created = await createInvoice(noHold.test, { amount: '500.00', method: 'sbp' });
      expect(created.netAmount).toBe('500.00');
      const { invoice } = await pay(created.id);
      expect(invoice.paidAt).toMatch(ISO_UTC);
      expect(invoice.availableAt).toBeNull();
      await waitForBalance(noHold.test, { available: '500.00', pending: '0.00' }, 'a payment without a hold');
    });

    it('the hold in force at payment time counts (holdHours changed after the invoice was created)', async () => {
      const m = await gw.operator.merchant({ holdHours: 24 });
      const created = await createInvoice(m.test, { amount: '100.00', method: 'sbp' });
      await gw.operator.patchProject(m.projectId, { holdHours: 0 });
      const { invoice } = await pay(created.id);
      expect(invoice.availableAt).toBeNull();
      await waitForBalance(m.test, { available: '100.00', pending: '0.00' }, 'hold 0 at payment time');
    });

    it('an invoice without a method is paid with the method the buyer used, at that method’s rate', async () => {
      chooser = await gw.operator.merchant({ usdtEnabled: false });
      const created = await createInvoice(chooser.test, { amount: '1000.00', customerFeeShare: 50 });
      expect(created).toMatchObject({ feePct: '3.00', customerFeePct: null });

      // The acquirer must say which method was used.
      expectError(await gw.operator.payment(created.id, 'paid'), 400, 'validation', 'method');
      // Not a method the buyer could have chosen.
      expectError(await gw.operator.payment(created.id, 'paid', 'crypto'), 422, 'method_unavailable');

      const { invoice } = await pay(created.id, 'sbp');
      // sbp 1.50 %, half on the buyer: 0.75 %.
      expect(invoice).toMatchObject({
        status: 'paid',
        method: 'sbp',
        feePct: '1.50',
        feeAmount: '15.00',
        customerFeePct: '0.75',
        customerFeeShare: 50,
        customerFeeAmount: '7.50',
        payableAmount: '1007.50',
        netAmount: '992.50',
        feePayer: 'customer',
      });
      expect((await chooser.test.get(`/v1/invoices/${created.id}`)).body).toMatchObject({ method: 'sbp', netAmount: '992.50' });
      await waitForBalance(chooser.test, { available: '0.00', pending: '992.50' }, 'after the payment');
    });

    it('an invoice with a method cannot be paid with another one', async () => {
      const created = await createInvoice(chooser.test, { amount: '100.00', method: 'card' });
      expectError(await gw.operator.payment(created.id, 'paid', 'sbp'), 422, 'method_unavailable');
      expect((await chooser.test.get(`/v1/invoices/${created.id}`)).body.status).toBe('created');
    });

    it('a paid invoice cannot be paid or failed again (409 conflict), and the money is counted once', async () => {
      const created = await createInvoice(chooser.test, { amount: '200.00', method: 'sbp', customerFeePct: 0 });
      await pay(created.id);
      expectError(await gw.operator.payment(created.id, 'paid'), 409, 'conflict');
      expectError(await gw.operator.payment(created.id, 'failed'), 409, 'conflict');
      // 992.50 + (200.00 − 3.00)
      await waitForBalance(chooser.test, { available: '0.00', pending: '1189.50' }, 'two payments');
      const stream = await gw.operator.http.get(`/admin/v1/streams/invoice-${created.id}`);
      expect(stream.body.events.map((e: Json) => e.type)).toEqual(['InvoiceCreated', 'InvoicePaid']);
    });

    it('the operator gets 404 invoice_not_found for an unknown invoice', async () => {
      expectError(await gw.operator.payment('00000000-0000-4000-8000-000000000000', 'paid', 'sbp'), 404, 'invoice_not_found');
    });
  });

  describe('failed', () => {
    it('a failed payment: status failed, no paidAt, no money; paying it afterwards is 409 conflict', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      const created = await createInvoice(m.test, { amount: '300.00', method: 'card' });
      const failed = await gw.operator.payment(created.id, 'failed');
      expectStatus(failed, 200);
      expect(failed.body).toMatchObject({ id: created.id, status: 'failed', paidAt: null, availableAt: null });
      expect((await m.test.get(`/v1/invoices/${created.id}`)).body.status).toBe('failed');
      await waitForStatus(m.test, failed.body, 'failed');

      expectError(await gw.operator.payment(created.id, 'paid'), 409, 'conflict');
      expectError(await gw.operator.payment(created.id, 'failed'), 409, 'conflict');
      expect((await m.test.get(`/v1/invoices/${created.id}`)).body.status).toBe('failed');

      // A later paid invoice of the same project shows alone on the balance.
      const other = await createInvoice(m.test, { amount: '100.00', method: 'sbp', customerFeePct: 0 });
      await pay(other.id);
      await waitForBalance(m.test, { available: '98.50', pending: '0.00' }, 'only the paid invoice');
    });
  });

  describe('failed with the method the acquirer reports', () => {
    it('an invoice whose buyer chose no method: the failure records the method reported, as a payment does', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      const created = await createInvoice(m.test, { amount: '300.00' });
      expect((await m.test.get(`/v1/invoices/${created.id}`)).body.method).toBeNull();
      const failed = await gw.operator.payment(created.id, 'failed', 'sbp');
      expectStatus(failed, 200);
      expect(failed.body).toMatchObject({ id: created.id, status: 'failed', method: 'sbp', paidAt: null });
      expect((await m.test.get(`/v1/invoices/${created.id}`)).body).toMatchObject({ status: 'failed', method: 'sbp' });
    });

    it('a failure reported with a method the invoice refuses (its method fixed at creation) is recorded all the same, the method kept', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      const created = await createInvoice(m.test, { amount: '300.00', method: 'card' });
      const failed = await gw.operator.payment(created.id, 'failed', 'sbp');
      expectStatus(failed, 200);
      expect(failed.body).toMatchObject({ id: created.id, status: 'failed', method: 'card' });
    });
  });

  describe('balances per mode', () => {
    it('a test-mode payment never shows on the live balance, nor a live one on the test balance', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      const t = await createInvoice(m.test, { amount: '1000.00', method: 'sbp', customerFeePct: 0 });
      await pay(t.id);
      await waitForBalance(m.test, { available: '985.00', pending: '0.00' }, 'test payment');

      const l = await createInvoice(m.live, { amount: '2000.00', method: 'card', customerFeePct: 0 });
      expect((await m.live.get(`/v1/invoices/${l.id}`)).body.isTest).toBe(false);
      await pay(l.id);
      await waitForBalance(m.live, { available: '1940.00', pending: '0.00' }, 'live payment');
      // The test balance did not move, and the live one never had the test money.
      expect(await balance(m.test)).toMatchObject({ available: '985.00', pending: '0.00' });
      expect(await balance(m.live)).toMatchObject({ available: '1940.00', pending: '0.00' });
    });

    it('two projects of one account share its balance in each mode', async () => {
      const accountId = await gw.operator.createAccount();
      const a = await gw.operator.merchant({ holdHours: 0 }, accountId);
      const b = await gw.operator.merchant({ holdHours: 0 }, accountId);
      await pay((await createInvoice(a.test, { amount: '100.00', method: 'sbp', customerFeePct: 0 })).id);
      await pay((await createInvoice(b.test, { amount: '200.00', method: 'sbp', customerFeePct: 0 })).id);
      // 98.50 + 197.00
      await waitForBalance(a.test, { available: '295.50', pending: '0.00' }, 'both projects');
      expect(await balance(b.test)).toMatchObject({ available: '295.50' });
      expect(await balance(b.live)).toMatchObject({ available: '0.00', pending: '0.00' });
    });
  });

  describe('expired', () => {
    it('an unpaid invoice expires once expire minutes pass on the clock; paying it then is 409 conflict', async () => {
      const m = await gw.operator.merchant();
      const short = await createInvoice(m.test, { amount: '100.00', method: 'sbp', expire: 1 });
      const longer = await createInvoice(m.test, { amount: '100.00', method: 'sbp', expire: 2 });
      const shortInvoice = (await m.test.get(`/v1/invoices/${short.id}`)).body;
      const longerInvoice = (await m.test.get(`/v1/invoices/${longer.id}`)).body;

      await gw.operator.advance(61);
      await waitForStatus(m.test, shortInvoice, 'expired');
      expect((await m.test.get(`/v1/invoices/${short.id}`)).body.status).toBe('expired');
      expectError(await gw.operator.payment(short.id, 'paid'), 409, 'conflict');
      expectError(await gw.operator.payment(short.id, 'failed'), 409, 'conflict');
      // Its neighbour with two minutes still waits.
      expect((await m.test.get(`/v1/invoices/${longer.id}`)).body.status).toBe('created');
      expect((await m.test.get(`/v1/invoices?status=expired`)).body.items.map((i: Json) => i.id)).toEqual([short.id]);

      await gw.operator.advance(60);
      await waitForStatus(m.test, longerInvoice, 'expired');
      expect(await balance(m.test)).toMatchObject({ available: '0.00', pending: '0.00' });
    });

    it('a payment that arrives after expiresAt is refused even before the expiry worker ran', async () => {
      const m = await gw.operator.merchant();
      const created = await createInvoice(m.test, { amount: '100.00', method: 'sbp', expire: 1 });
      await gw.operator.advance(60);
      expectError(await gw.operator.payment(created.id, 'paid'), 409, 'conflict');
      await waitForStatus(m.test, (await m.test.get(`/v1/invoices/${created.id}`)).body, 'expired');
    });

    it('GET by id is current at expiresAt: the invoice reads expired at once, before the expiry worker records it', async () => {
      const m = await gw.operator.merchant();
      // Three rounds: the worker (every 500 ms) would seldom run between an advance and the read that follows it.
      for (let round = 0; round < 3; round++) {
        const order = orderId('expiring');
        const created = await createInvoice(m.test, { amount: '100.00', method: 'sbp', expire: 1, orderId: order });
        await gw.operator.advance(60);
        expect((await m.test.get(`/v1/invoices/${created.id}`)).body.status).toBe('expired');
        expectError(await gw.operator.payment(created.id, 'paid'), 409, 'conflict');
        // A repeat of the create with its orderId (always safe to send again) says the same.
        const repeat = await m.test.post('/v1/invoices', { amount: '100.00', method: 'sbp', expire: 1, orderId: order });
        expect({ status: repeat.status, invoice: repeat.body.status }).toEqual({ status: 200, invoice: 'expired' });
      }
    });

    it('a paid invoice does not expire', async () => {
      const m = await gw.operator.merchant();
      const created = await createInvoice(m.test, { amount: '100.00', method: 'sbp', expire: 1 });
      await pay(created.id);
      await gw.operator.advance(120);
      const marker = await createInvoice(m.test, { amount: '100.00', method: 'sbp', expire: 1 });
      await gw.operator.advance(61);
      // Once the newer invoice has expired, the worker has passed the paid one too.
      await waitForStatus(m.test, (await m.test.get(`/v1/invoices/${marker.id}`)).body, 'expired');
      expect((await m.test.get(`/v1/invoices/${created.id}`)).body.status).toBe('paid');
    });
  });

  describe('holds released on the clock', () => {
    it('after 2 h the 2-hour hold is available while the 24-hour one is still pending; after 24 h both', async () => {
      await gw.operator.advance(2 * 3600 + 1);
      await waitForBalance(twoHours.test, { available: '980.00', pending: '0.00' }, 'the 2-hour hold released');
      expect(await balance(day.test)).toMatchObject({ available: '0.00', pending: '985.00' });

      await gw.operator.advance(22 * 3600);
      await waitForBalance(day.test, { available: '985.00', pending: '0.00' }, 'the 24-hour hold released');
      await waitForBalance(chooser.test, { available: '1189.50', pending: '0.00' }, 'the 24-hour holds released');
      // Releasing does not change the invoice.
      const paid = await day.test.get(`/v1/invoices?status=paid`);
      expect(paid.body.items).toHaveLength(1);
      expect(await balance(noHold.test)).toMatchObject({ available: '500.00', pending: '0.00' });
      expect(await balance(day.live)).toMatchObject({ available: '0.00', pending: '0.00' });
    });
  });
});
