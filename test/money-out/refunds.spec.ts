/**
 * Refunds end to end over HTTP, on one gateway with CLOCK=manual and
 * REFUND_PROCESSING_SECONDS=10: POST /v1/invoices/{id}/refund (full and partial),
 * GET /v1/refunds/{id}, the sandbox processor (succeeded after the processing time),
 * the operator's POST /admin/v1/refunds/{id}/fail, and every refusal of the spec
 * (404 invoice_not_found, 409 conflict, also past 100 refunds of one invoice, 422
 * refund_exceeds_amount and insufficient_balance, 400 validation, 401 unauthorized).
 *
 * The tests share one clock and run in order: each advance moves time for all, so a
 * test that needs a refund to stay pending never advances the clock before its checks.
 * Every merchant is fresh (its own account), so balances never mix.
 */
import {
  api,
  Client,
  expectError,
  expectStatus,
  InvoiceGateway,
  ISO_UTC,
  Json,
  listAll,
  Merchant,
  Mode,
  orderId,
  poll,
  Reply,
  startInvoiceGateway,
} from '../support/merchant-fixtures';
import {
  balanceOf,
  fromKopecks,
  instantMerchant,
  paidInvoice,
  payoutAddress,
  PHONE,
  toKopecks,
  transition,
  waitForBalance,
} from '../support/money-out-fixtures';

const REFUND_ID = /^rf_[0-9a-z]{24}$/;
const PROCESSING_SECONDS = 10;

describe('refunds (CLOCK=manual, REFUND_PROCESSING_SECONDS=10)', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      CLOCK: 'manual',
      REFUND_PROCESSING_SECONDS: String(PROCESSING_SECONDS),
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const refund = (client: Client, invoiceId: string, body?: unknown): Promise<Reply> => client.post(`/v1/invoices/${invoiceId}/refund`, body);

  /** A refund that must be accepted: its body (202). */
  const accepted = async (client: Client, invoiceId: string, body?: unknown): Promise<Json> => {
    const r = await refund(client, invoiceId, body);
    expectStatus(r, 202);
    return r.body;
  };

  /**
   * A paid invoice of `amount` in the mode whose net amount (the buyer pays the fee by
   * default, so all of it) is available once the call returns: its id.
   */
  const paidAndAvailable = async (m: Merchant, mode: Mode, amount: string): Promise<string> => {
    const before = await balanceOf(m[mode]);
    const id = await paidInvoice(gw.operator, m[mode], amount);
    await waitForBalance(m[mode], { available: fromKopecks(toKopecks(before.available) + toKopecks(amount)) });
    return id;
  };

  const invoice = async (client: Client, id: string): Promise<Json> => {
    const r = await client.get(`/v1/invoices/${id}`);
    expectStatus(r, 200);
    return r.body;
  };
  /** The refund's outcome on the invoice is settled asynchronously (a process manager): poll the invoice. */
  const waitForInvoice = (client: Client, id: string, expected: { status: string; refundedAmount: string }) =>
    poll(
      () => invoice(client, id),
      (i) => i.status === expected.status && i.refundedAmount === expected.refundedAmount,
      `invoice ${id} ${JSON.stringify(expected)}`,
    );

  const getRefund = async (client: Client, id: string): Promise<Json> => {
    const r = await client.get(`/v1/refunds/${id}`);
    expectStatus(r, 200);
    return r.body;
  };
  const waitForRefund = (client: Client, id: string, status: string) =>
    poll(
      () => getRefund(client, id),
      (r) => r.status === status,
      `refund ${id} to be ${status}`,
    );

  /** The invoice's own stream (admin): its event types. */
  const invoiceEvents = async (id: string): Promise<Json[]> => {
    const r = await gw.operator.http.get(`/admin/v1/streams/invoice-${id}`);
    expectStatus(r, 200);
    return r.body.events as Json[];
  };
  /** A failed refund's amount is back in the invoice's remainder once the invoice recorded the release. */
  const waitForRelease = (invoiceId: string, refundId: string) =>
    poll(
      () => invoiceEvents(invoiceId),
      (events) => events.some((e) => e.type === 'InvoiceRefundReleased' && e.data.refundId === refundId),
      `invoice ${invoiceId} to release refund ${refundId}`,
    );

  /** The journal entries (admin ledger read model) caused by the refund, oldest first. */
  const journalOf = async (accountId: string, mode: Mode, refundId: string): Promise<Json[]> => {
    const items: Json[] = [];
    let cursor: string | null = null;
    do {
      const r: Reply = await gw.operator.http.get(
        `/admin/v1/accounts/${accountId}/ledger?mode=${mode}&limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expectStatus(r, 200);
      items.push(...r.body.items);
      cursor = r.body.nextCursor;
    } while (cursor);
    return items.filter((e) => typeof e.cause === 'string' && e.cause.endsWith(`:${refundId}`));
  };

  const fail = (refundId: string, body?: unknown) => gw.operator.http.post(`/admin/v1/refunds/${refundId}/fail`, body);

  describe('POST /v1/invoices/{id}/refund: accepted', () => {
    it('a full refund without a body: 202 with the Refund, pending, and the amount moves available → reserved at once', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');

      const before = await gw.operator.advance(0);
      const r = await refund(m.live, invoiceId);
      const after = await gw.operator.advance(0);
      expectStatus(r, 202);
      expect(r.body).toEqual({
        id: expect.stringMatching(REFUND_ID),
        invoiceId,
        amount: '1000.00',
        currency: 'RUB',
        status: 'pending',
        createdAt: expect.stringMatching(ISO_UTC),
        completedAt: null,
      });
      const createdAt = Date.parse(r.body.createdAt);
      expect(createdAt).toBeGreaterThanOrEqual(before.getTime());
      expect(createdAt).toBeLessThanOrEqual(after.getTime());

      expect(await waitForBalance(m.live, { available: '0.00', reserved: '1000.00' })).toEqual({
        available: '0.00',
        pending: '0.00',
        reserved: '1000.00',
        currency: 'RUB',
      });
      // The reservation is in the ledger itself, not only in the read model.
      const ledger = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
      expectStatus(ledger, 200);
      expect(ledger.body).toMatchObject({ available: '0.00', reserved: '1000.00' });

      // GET /refunds/{id} answers the same refund; the invoice is still paid until the refund succeeds.
      expect(await getRefund(m.live, r.body.id)).toEqual(r.body);
      expect(await invoice(m.live, invoiceId)).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
    });

    it('a full refund with an empty object `{}` refunds the whole amount too', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '750.00');
      const body = await accepted(m.live, invoiceId, {});
      expect(body).toMatchObject({ invoiceId, amount: '750.00', currency: 'RUB', status: 'pending', completedAt: null });
      expect(body.id).toMatch(REFUND_ID);
      await waitForBalance(m.live, { available: '0.00', reserved: '750.00' });
    });

    it('partial refunds with the amount as a string or a JSON number: each its own refund id, each reserved', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');

      const asString = await accepted(m.live, invoiceId, { amount: '300.00' });
      expect(asString).toMatchObject({ invoiceId, amount: '300.00', status: 'pending', completedAt: null, currency: 'RUB' });
      await waitForBalance(m.live, { available: '700.00', reserved: '300.00' });

      const asNumber = await accepted(m.live, invoiceId, { amount: 250.5 });
      expect(asNumber).toMatchObject({ invoiceId, amount: '250.50', status: 'pending' });
      const whole = await accepted(m.live, invoiceId, { amount: 100 });
      expect(whole).toMatchObject({ invoiceId, amount: '100.00', status: 'pending' });

      const ids = [asString.id, asNumber.id, whole.id];
      for (const id of ids) expect(id).toMatch(REFUND_ID);
      expect(new Set(ids).size).toBe(3);
      expect(await waitForBalance(m.live, { available: '349.50', reserved: '650.50' })).toMatchObject({ pending: '0.00' });
      for (const body of [asString, asNumber, whole]) expect(await getRefund(m.live, body.id)).toEqual(body);
      // Nothing has succeeded yet: the invoice is paid, nothing refunded.
      expect(await invoice(m.live, invoiceId)).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
    });
  });

  describe('GET /v1/refunds/{id}', () => {
    it('answers its own refund; 404 invoice_not_found for unknown and malformed ids, another project, and the other mode', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '500.00');
      const own = await accepted(m.live, invoiceId, { amount: '200.00' });
      expect(await getRefund(m.live, own.id)).toEqual(own);

      // Unknown (well-formed) and malformed ids.
      for (const id of ['rf_000000000000000000000000', 'rf_zzzzzzzzzzzzzzzzzzzzzzzz', 'rf_ABC', 'nope', '00000000-0000-4000-8000-000000000000', `${own.id}x`]) {
        expectError(await m.live.get(`/v1/refunds/${encodeURIComponent(id)}`), 404, 'invoice_not_found');
      }
      // Another account's project, and another project of the same account.
      const stranger = await instantMerchant(gw.operator);
      expectError(await stranger.live.get(`/v1/refunds/${own.id}`), 404, 'invoice_not_found');
      const sibling = await instantMerchant(gw.operator, m.accountId);
      expectError(await sibling.live.get(`/v1/refunds/${own.id}`), 404, 'invoice_not_found');
      // The same project's refund read with the test key.
      expectError(await m.test.get(`/v1/refunds/${own.id}`), 404, 'invoice_not_found');

      // And a test refund read with the live key.
      const testInvoice = await paidAndAvailable(m, 'test', '100.00');
      const testRefund = await accepted(m.test, testInvoice);
      expect(await getRefund(m.test, testRefund.id)).toEqual(testRefund);
      expectError(await m.live.get(`/v1/refunds/${testRefund.id}`), 404, 'invoice_not_found');
      // Without a key.
      expectError(await api(gw.baseUrl).get(`/v1/refunds/${own.id}`), 401, 'unauthorized');
    });
  });

  describe('the refund processor', () => {
    it('after REFUND_PROCESSING_SECONDS: succeeded with completedAt, reserved drops, the invoice partially_refunded then refunded', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');

      const first = await accepted(m.live, invoiceId, { amount: '400.00' });
      await waitForBalance(m.live, { available: '600.00', reserved: '400.00' });

      await gw.operator.advance(PROCESSING_SECONDS + 1);
      const done = await waitForRefund(m.live, first.id, 'succeeded');
      const now = await gw.operator.advance(0);
      expect(done).toEqual({ ...first, status: 'succeeded', completedAt: expect.stringMatching(ISO_UTC) });
      expect(Date.parse(done.completedAt)).toBeGreaterThanOrEqual(Date.parse(first.createdAt) + PROCESSING_SECONDS * 1000);
      expect(Date.parse(done.completedAt)).toBeLessThanOrEqual(now.getTime());
      // The money has left: nothing reserved, the rest still available.
      expect(await waitForBalance(m.live, { reserved: '0.00' })).toEqual({ available: '600.00', pending: '0.00', reserved: '0.00', currency: 'RUB' });
      expect(await waitForInvoice(m.live, invoiceId, { status: 'partially_refunded', refundedAmount: '400.00' })).toMatchObject({
        amount: '1000.00',
        paidAt: expect.stringMatching(ISO_UTC),
      });
      // The list (read model) finds it by its new status.
      await poll(
        () => listAll(m.live, 'status=partially_refunded'),
        (items) => items.some((i) => i.id === invoiceId && i.refundedAmount === '400.00'),
        'the list of partially_refunded invoices',
      );

      // A partially refunded invoice accepts refunds within what is left: 600.00.
      expectError(await refund(m.live, invoiceId, { amount: '600.01' }), 422, 'refund_exceeds_amount', 'amount');
      const rest = await accepted(m.live, invoiceId);
      expect(rest).toMatchObject({ invoiceId, amount: '600.00', status: 'pending' });
      await waitForBalance(m.live, { available: '0.00', reserved: '600.00' });

      await gw.operator.advance(PROCESSING_SECONDS + 1);
      expect(await waitForRefund(m.live, rest.id, 'succeeded')).toMatchObject({ amount: '600.00', completedAt: expect.stringMatching(ISO_UTC) });
      expect(await waitForBalance(m.live, { reserved: '0.00' })).toEqual({ available: '0.00', pending: '0.00', reserved: '0.00', currency: 'RUB' });
      await waitForInvoice(m.live, invoiceId, { status: 'refunded', refundedAmount: '1000.00' });
      await poll(
        async () => ({
          refunded: await listAll(m.live, 'status=refunded'),
          partially: await listAll(m.live, 'status=partially_refunded'),
        }),
        ({ refunded, partially }) => refunded.some((i) => i.id === invoiceId && i.refundedAmount === '1000.00') && !partially.some((i) => i.id === invoiceId),
        'the invoice to move from partially_refunded to refunded in the list',
      );
      // The earlier refund stays as it was.
      expect(await getRefund(m.live, first.id)).toEqual(done);

      // A fully refunded invoice: 409 conflict (status refunded), with or without an amount.
      expectError(await refund(m.live, invoiceId), 409, 'conflict');
      expectError(await refund(m.live, invoiceId, { amount: '1.00' }), 409, 'conflict');
      // The bank cannot refuse a refund that has succeeded.
      expectError(await fail(first.id, { reason: 'поздно' }), 409, 'conflict');
      expect(await getRefund(m.live, first.id)).toMatchObject({ status: 'succeeded' });

      // The journal: reserved, then settled, each exactly once per refund.
      for (const [r, amount] of [
        [first, '400.00'],
        [rest, '600.00'],
      ] as const) {
        const entries = await poll(
          () => journalOf(m.accountId, 'live', r.id),
          (e) => e.some((x) => x.kind === 'reservation_settled'),
          `the journal entries of refund ${r.id}`,
        );
        expect(entries.map((e) => ({ kind: e.kind, cause: e.cause, postings: e.postings }))).toEqual([
          {
            kind: 'funds_reserved',
            cause: `reserve:${r.id}`,
            postings: [
              { account: 'available', amount: `-${amount}` },
              { account: 'reserved', amount },
            ],
          },
          {
            kind: 'reservation_settled',
            cause: `settle:${r.id}`,
            postings: [
              { account: 'reserved', amount: `-${amount}` },
              { account: 'refunds_paid', amount },
            ],
          },
        ]);
      }
      // The ledger itself agrees with the read model.
      const ledger = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
      expect(ledger.body).toMatchObject({ available: '0.00', pending: '0.00', reserved: '0.00', system: { refunds_paid: '1000.00' } });
    });
  });

  describe('POST /admin/v1/refunds/{id}/fail', () => {
    it('before processing: 200 failed, the money back to available, the remainder restored; failing again is 200', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');
      const asked = await accepted(m.live, invoiceId, { amount: '600.00' });
      await waitForBalance(m.live, { available: '400.00', reserved: '600.00' });

      const failed = await fail(asked.id, { reason: 'Банк отклонил возврат' });
      expectStatus(failed, 200);
      expect(failed.body).toEqual({ ...asked, status: 'failed', completedAt: expect.stringMatching(ISO_UTC) });
      expect(await getRefund(m.live, asked.id)).toEqual(failed.body);
      expect(await waitForBalance(m.live, { available: '1000.00', reserved: '0.00' })).toMatchObject({ pending: '0.00' });

      // Failing it again changes nothing: 200, the same refund.
      const again = await fail(asked.id);
      expectStatus(again, 200);
      expect(again.body).toEqual(failed.body);

      // The whole amount may be refunded again: the failed refund no longer counts.
      await waitForRelease(invoiceId, asked.id);
      expect(await invoice(m.live, invoiceId)).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
      const whole = await accepted(m.live, invoiceId);
      expect(whole).toMatchObject({ invoiceId, amount: '1000.00', status: 'pending' });
      expect(whole.id).not.toBe(asked.id);
      await waitForBalance(m.live, { available: '0.00', reserved: '1000.00' });

      // The processor completes the new one and leaves the failed one failed.
      await gw.operator.advance(PROCESSING_SECONDS + 1);
      await waitForRefund(m.live, whole.id, 'succeeded');
      await waitForInvoice(m.live, invoiceId, { status: 'refunded', refundedAmount: '1000.00' });
      expect(await getRefund(m.live, asked.id)).toEqual(failed.body);
      await waitForBalance(m.live, { available: '0.00', reserved: '0.00' });

      // The journal of the failed refund: reserved, then released, each once; never settled.
      const entries = await poll(
        () => journalOf(m.accountId, 'live', asked.id),
        (e) => e.some((x) => x.kind === 'reservation_released'),
        `the journal entries of refund ${asked.id}`,
      );
      expect(entries.map((e) => ({ kind: e.kind, cause: e.cause, postings: e.postings }))).toEqual([
        {
          kind: 'funds_reserved',
          cause: `reserve:${asked.id}`,
          postings: [
            { account: 'available', amount: '-600.00' },
            { account: 'reserved', amount: '600.00' },
          ],
        },
        {
          kind: 'reservation_released',
          cause: `release:${asked.id}`,
          postings: [
            { account: 'reserved', amount: '-600.00' },
            { account: 'available', amount: '600.00' },
          ],
        },
      ]);
    });

    it('a failed partial refund of a partially refunded invoice restores just its part', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');
      const kept = await accepted(m.live, invoiceId, { amount: '300.00' });
      await gw.operator.advance(PROCESSING_SECONDS + 1);
      await waitForRefund(m.live, kept.id, 'succeeded');
      await waitForInvoice(m.live, invoiceId, { status: 'partially_refunded', refundedAmount: '300.00' });

      const lost = await accepted(m.live, invoiceId, { amount: '700.00' });
      expectError(await refund(m.live, invoiceId, { amount: '0.01' }), 422, 'refund_exceeds_amount', 'amount');
      expectStatus(await fail(lost.id), 200);
      await waitForRelease(invoiceId, lost.id);
      expect(await invoice(m.live, invoiceId)).toMatchObject({ status: 'partially_refunded', refundedAmount: '300.00' });
      expect(await waitForBalance(m.live, { available: '700.00', reserved: '0.00' })).toMatchObject({ pending: '0.00' });
      // 700.00 may be refunded again, not a kopeck more.
      expectError(await refund(m.live, invoiceId, { amount: '700.01' }), 422, 'refund_exceeds_amount', 'amount');
      expect(await accepted(m.live, invoiceId)).toMatchObject({ amount: '700.00', status: 'pending' });
    });

    it('404 invoice_not_found for an unknown or malformed refund id', async () => {
      expectError(await fail('rf_000000000000000000000000'), 404, 'invoice_not_found');
      expectError(await fail('nope', { reason: 'нет такого' }), 404, 'invoice_not_found');
    });
  });

  describe('409 conflict: only a paid or partially refunded invoice is refunded', () => {
    it('created, pending, failed and expired invoices', async () => {
      const m = await instantMerchant(gw.operator);
      // Some money on the balance, so that nothing but the status refuses the refunds.
      await paidAndAvailable(m, 'live', '1000.00');
      const create = async (body: Record<string, unknown>) => {
        const r = await m.live.post('/v1/invoices', { amount: '100.00', orderId: orderId('refund'), ...body });
        expectStatus(r, 201);
        return r.body.id as string;
      };

      const created = await create({ method: 'sbp' });
      expect((await invoice(m.live, created)).status).toBe('created');

      // pending: the buyer chose a method on the payment page.
      const pending = await create({});
      const chosen = await api(gw.baseUrl).raw('POST', `/pay/${pending}/method`, {
        body: 'method=sbp',
        // The page's own form: the gateway accepts its POSTs from its own origin (CSRF guard).
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(gw.baseUrl).origin },
      });
      expect(chosen.status).toBeLessThan(400);
      expect((await invoice(m.live, pending)).status).toBe('pending');

      const failed = await create({ method: 'card' });
      expectStatus(await gw.operator.payment(failed, 'failed'), 200);
      expect((await invoice(m.live, failed)).status).toBe('failed');

      for (const id of [created, pending, failed]) {
        expectError(await refund(m.live, id), 409, 'conflict');
        expectError(await refund(m.live, id, { amount: '50.00' }), 409, 'conflict');
      }

      const expiring = await create({ method: 'sbp', expire: 1 });
      await gw.operator.advance(61);
      await poll(
        () => invoice(m.live, expiring),
        (i) => i.status === 'expired',
        'the invoice to expire',
      );
      expectError(await refund(m.live, expiring), 409, 'conflict');
      expectError(await refund(m.live, expiring, { amount: '50.00' }), 409, 'conflict');

      // None of them touched the balance.
      expect(await balanceOf(m.live)).toMatchObject({ available: '1000.00', reserved: '0.00' });
    });
  });

  describe('422 refund_exceeds_amount', () => {
    it('above the amount; pending refunds count toward the remainder; nothing left for a full refund', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');
      // Plenty of balance besides, so only the invoice's remainder refuses.
      await paidAndAvailable(m, 'live', '5000.00');

      expectError(await refund(m.live, invoiceId, { amount: '1000.01' }), 422, 'refund_exceeds_amount', 'amount');
      expectError(await refund(m.live, invoiceId, { amount: 1500 }), 422, 'refund_exceeds_amount', 'amount');
      // Above the largest amount of money, of any size, is still more than the remainder (not 400, not a 500); 1e20 is sent as 21 digits.
      for (const amount of ['1000000000.01', 1000000000.01, '123456789012345678901234567890.00', 1e20]) {
        expectError(await refund(m.live, invoiceId, { amount }), 422, 'refund_exceeds_amount', 'amount');
      }

      await accepted(m.live, invoiceId, { amount: '600.00' });
      // 400.00 left while the first is pending.
      expectError(await refund(m.live, invoiceId, { amount: '500.00' }), 422, 'refund_exceeds_amount', 'amount');
      expectError(await refund(m.live, invoiceId, { amount: '400.01' }), 422, 'refund_exceeds_amount', 'amount');
      const second = await accepted(m.live, invoiceId, { amount: '400.00' });
      expect(second.amount).toBe('400.00');

      // Everything is pending: nothing left, not even for a full refund.
      expectError(await refund(m.live, invoiceId), 422, 'refund_exceeds_amount');
      expectError(await refund(m.live, invoiceId, {}), 422, 'refund_exceeds_amount');
      expectError(await refund(m.live, invoiceId, { amount: '0.01' }), 422, 'refund_exceeds_amount', 'amount');
      // Only the two accepted refunds are reserved.
      await waitForBalance(m.live, { available: '5000.00', reserved: '1000.00' });
    });
  });

  describe('409 conflict: at most 100 refunds per invoice', () => {
    it('the 101st refund of an invoice is refused, full or partial, and nothing is reserved for it; another invoice still refunds', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');
      const other = await paidAndAvailable(m, 'live', '10.00');
      for (let i = 1; i <= 100; i++) {
        // The key's rate window (60 a second) runs on the gateway clock: move it on a second now and then.
        if (i % 50 === 0) await gw.operator.advance(1);
        await accepted(m.live, invoiceId, { amount: '0.01' });
      }
      await waitForBalance(m.live, { available: '1009.00', reserved: '1.00' });

      const refused = await refund(m.live, invoiceId, { amount: '0.01' });
      expectError(refused, 409, 'conflict');
      expect(refused.body.error.message).toContain('100 возвратов');
      expectError(await refund(m.live, invoiceId), 409, 'conflict');
      // Nothing was asked of the invoice or the ledger for them.
      const stream = await gw.operator.http.get(`/admin/v1/streams/invoice-${invoiceId}?limit=1000`);
      expectStatus(stream, 200);
      expect((stream.body.events as Json[]).filter((e) => e.type === 'InvoiceRefundRequested')).toHaveLength(100);
      expect(await balanceOf(m.live)).toMatchObject({ available: '1009.00', reserved: '1.00' });
      expect(await invoice(m.live, invoiceId)).toMatchObject({ status: 'paid', amount: '1000.00' });

      // The limit is the invoice's: another invoice of the merchant refunds as before.
      expect((await accepted(m.live, other, { amount: '0.01' })).status).toBe('pending');
    });
  });

  describe('422 insufficient_balance: refunds are funded from available', () => {
    it('the default 24 h hold: the paid money is still pending; the remainder stays untouched until funded', async () => {
      const m = await gw.operator.merchant();
      expect(m.project.holdHours).toBe(24);
      const invoiceId = await paidInvoice(gw.operator, m.live, '1000.00');
      await waitForBalance(m.live, { available: '0.00', pending: '1000.00' });

      expectError(await refund(m.live, invoiceId), 422, 'insufficient_balance');
      expectError(await refund(m.live, invoiceId, { amount: '1.00' }), 422, 'insufficient_balance');
      expect(await invoice(m.live, invoiceId)).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
      // Refused refunds hold nothing on the balance.
      const ledger = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
      expect(ledger.body).toMatchObject({ available: '0.00', pending: '1000.00', reserved: '0.00' });

      // Fund `available` with another payment, released at once.
      await gw.operator.patchProject(m.projectId, { holdHours: 0 });
      await paidAndAvailable(m, 'live', '1000.00');
      // The whole amount of the first invoice is still refundable: the refusals kept nothing.
      const whole = await accepted(m.live, invoiceId);
      expect(whole).toMatchObject({ invoiceId, amount: '1000.00', status: 'pending' });
      await waitForBalance(m.live, { available: '0.00', pending: '1000.00', reserved: '1000.00' });
    });

    it('a payout that drained available; once the payout is rejected the refund goes through', async () => {
      const m = await instantMerchant(gw.operator);
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
      const payout = await m.live.post('/v1/payouts', { amount: '1000.00', addressId: address.id });
      expectStatus(payout, 201);
      await waitForBalance(m.live, { available: '0.00', reserved: '1000.00' });

      expectError(await refund(m.live, invoiceId, { amount: '0.01' }), 422, 'insufficient_balance');
      expectError(await refund(m.live, invoiceId), 422, 'insufficient_balance');

      expectStatus(await transition(gw.operator, payout.body.id, 'reject', { reason: 'Проверка не пройдена' }), 200);
      await waitForBalance(m.live, { available: '1000.00', reserved: '0.00' });
      const whole = await accepted(m.live, invoiceId);
      expect(whole).toMatchObject({ invoiceId, amount: '1000.00', status: 'pending' });
      await waitForBalance(m.live, { available: '0.00', reserved: '1000.00' });
    });

    it('a partial refund within available is accepted while the full one is not', async () => {
      const m = await gw.operator.merchant({ holdHours: 0 });
      const invoiceId = await paidAndAvailable(m, 'live', '1000.00');
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      expectStatus(await m.live.post('/v1/payouts', { amount: '700.00', addressId: address.id }), 201);
      await waitForBalance(m.live, { available: '300.00', reserved: '700.00' });

      expectError(await refund(m.live, invoiceId), 422, 'insufficient_balance');
      expectError(await refund(m.live, invoiceId, { amount: '300.01' }), 422, 'insufficient_balance');
      expect(await accepted(m.live, invoiceId, { amount: '300.00' })).toMatchObject({ amount: '300.00', status: 'pending' });
      await waitForBalance(m.live, { available: '0.00', reserved: '1000.00' });
    });
  });

  describe('400 validation, 401, 404 invoice_not_found', () => {
    let m: Merchant;
    let invoiceId: string;

    beforeAll(async () => {
      m = await instantMerchant(gw.operator);
      invoiceId = await paidAndAvailable(m, 'live', '1000.00');
    });

    it.each<[string, unknown, string]>([
      ['amount "0.00"', { amount: '0.00' }, 'amount'],
      ['amount 0', { amount: 0 }, 'amount'],
      ['a negative amount (string)', { amount: '-10.00' }, 'amount'],
      ['a negative amount (number)', { amount: -10 }, 'amount'],
      ['three decimals (string)', { amount: '10.001' }, 'amount'],
      ['three decimals (number)', { amount: 10.001 }, 'amount'],
      ['one decimal in a string', { amount: '10.5' }, 'amount'],
      ['a non-numeric string', { amount: 'десять' }, 'amount'],
      ['an empty string', { amount: '' }, 'amount'],
      ['a boolean', { amount: true }, 'amount'],
      ['an object', { amount: { value: '10.00' } }, 'amount'],
      ['null', { amount: null }, 'amount'],
      ['an exponent', { amount: '1e3' }, 'amount'],
      ['an unknown field', { amount: '10.00', reason: 'брак' }, 'reason'],
      ['an unknown field alone', { invoiceId: 'x' }, 'invoiceId'],
      ['an array body', [{ amount: '10.00' }], 'body'],
      ['a string body', '10.00', 'body'],
      ['a number body', 10, 'body'],
      ['a null body', null, 'body'],
    ])('400 validation: %s', async (_what, body, param) => {
      expectError(await refund(m.live, invoiceId, body), 400, 'validation', param);
    });

    it('a JSON body that does not parse: 400', async () => {
      const r = await api(gw.baseUrl).raw('POST', `/v1/invoices/${invoiceId}/refund`, {
        body: '{"amount": ',
        headers: { authorization: `Bearer ${m.keys.live.secretKey}`, 'content-type': 'application/json' },
      });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/[А-Яа-яЁё]/);
    });

    it('401 unauthorized without a key or with a wrong one', async () => {
      expectError(await refund(api(gw.baseUrl), invoiceId), 401, 'unauthorized');
      expectError(await refund(api(gw.baseUrl), invoiceId, { amount: '10.00' }), 401, 'unauthorized');
      expectError(await refund(api(gw.baseUrl, 'sk_live_not_a_real_key_000000000000'), invoiceId), 401, 'unauthorized');
    });

    it('404 invoice_not_found: unknown, malformed, another project, the other mode', async () => {
      expectError(await refund(m.live, '00000000-0000-4000-8000-000000000000'), 404, 'invoice_not_found');
      expectError(await refund(m.live, 'not-an-invoice', { amount: '10.00' }), 404, 'invoice_not_found');
      // Another account's merchant, and another project of the same account.
      const stranger = await instantMerchant(gw.operator);
      await paidAndAvailable(stranger, 'live', '1000.00');
      expectError(await refund(stranger.live, invoiceId), 404, 'invoice_not_found');
      expectError(await refund(stranger.live, invoiceId, { amount: '10.00' }), 404, 'invoice_not_found');
      const sibling = await instantMerchant(gw.operator, m.accountId);
      expectError(await refund(sibling.live, invoiceId), 404, 'invoice_not_found');
      // The same project's invoice with the key of the other mode, both ways.
      expectError(await refund(m.test, invoiceId), 404, 'invoice_not_found');
      const testInvoice = await paidAndAvailable(m, 'test', '100.00');
      expectError(await refund(m.live, testInvoice), 404, 'invoice_not_found');
      expectError(await refund(m.live, testInvoice, { amount: '10.00' }), 404, 'invoice_not_found');
    });

    it('none of the refused requests reserved anything: the whole amount is still refundable', async () => {
      expect(await balanceOf(m.live)).toMatchObject({ available: '1000.00', reserved: '0.00' });
      expect(await accepted(m.live, invoiceId)).toMatchObject({ invoiceId, amount: '1000.00', status: 'pending' });
      await waitForBalance(m.live, { available: '0.00', reserved: '1000.00' });
    });
  });

  describe('test mode', () => {
    it('a test invoice refunded with the test key is funded from the test ledger; the live one never moves', async () => {
      const m = await instantMerchant(gw.operator);
      const liveInvoice = await paidAndAvailable(m, 'live', '300.00');
      const testInvoice = await paidAndAvailable(m, 'test', '1000.00');

      const r = await accepted(m.test, testInvoice, { amount: '400.00' });
      expect(r).toMatchObject({ invoiceId: testInvoice, amount: '400.00', currency: 'RUB', status: 'pending', completedAt: null });
      expect(r.id).toMatch(REFUND_ID);
      await waitForBalance(m.test, { available: '600.00', reserved: '400.00' });
      expect(await balanceOf(m.live)).toMatchObject({ available: '300.00', reserved: '0.00' });

      await gw.operator.advance(PROCESSING_SECONDS + 1);
      expect(await waitForRefund(m.test, r.id, 'succeeded')).toMatchObject({ completedAt: expect.stringMatching(ISO_UTC) });
      await waitForBalance(m.test, { available: '600.00', reserved: '0.00' });
      await waitForInvoice(m.test, testInvoice, { status: 'partially_refunded', refundedAmount: '400.00' });
      await poll(
        () => listAll(m.test, 'status=partially_refunded'),
        (items) => items.some((i) => i.id === testInvoice),
        'the test list of partially_refunded invoices',
      );

      // The test ledger has the entries; the live one has none of them, and its invoice is untouched.
      const entries = await poll(
        () => journalOf(m.accountId, 'test', r.id),
        (e) => e.some((x) => x.kind === 'reservation_settled'),
        `the test journal entries of refund ${r.id}`,
      );
      expect(entries.map((e) => e.kind)).toEqual(['funds_reserved', 'reservation_settled']);
      expect(await journalOf(m.accountId, 'live', r.id)).toEqual([]);
      expect(await balanceOf(m.live)).toMatchObject({ available: '300.00', reserved: '0.00' });
      expect(await invoice(m.live, liveInvoice)).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
      expect(await listAll(m.live, 'status=partially_refunded')).toEqual([]);
    });

    it('a test refund fails like a live one: its money back to the test available', async () => {
      const m = await instantMerchant(gw.operator);
      const testInvoice = await paidAndAvailable(m, 'test', '500.00');
      const r = await accepted(m.test, testInvoice);
      await waitForBalance(m.test, { available: '0.00', reserved: '500.00' });
      const failed = await fail(r.id, { reason: 'Тестовый отказ' });
      expectStatus(failed, 200);
      expect(failed.body).toMatchObject({ id: r.id, status: 'failed', amount: '500.00' });
      await waitForBalance(m.test, { available: '500.00', reserved: '0.00' });
      await waitForRelease(testInvoice, r.id);
      expect(await accepted(m.test, testInvoice)).toMatchObject({ amount: '500.00', status: 'pending' });
    });
  });
});
