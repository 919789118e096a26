/**
 * Refunds and payouts answered (202, 201) before the ledger reserved their money: the
 * flow is held half-done for real, by holding the ledger's append lock and cancelling
 * the gateway session that waits for it (test/support/append-lock.ts). The recovery
 * worker takes such a request over only 5 s after it on the gateway clock (real time
 * plus what the tests advance): each test acts well before that, and checks from the
 * events that its own request finished the flow.
 */
import { expectError, expectStatus, InvoiceGateway, ISO_UTC, Json, Merchant, Mode, orderId, poll, Reply } from '../support/merchant-fixtures';
import {
  fund,
  instantMerchant,
  ledgerStream,
  paidInvoice,
  payoutAddress,
  PHONE,
  RECOVERY_GRACE_SECONDS,
  startRecoveryGateway,
  streamEvents,
  transition,
} from '../support/money-out-fixtures';
import { Client as PgClient } from 'pg';
import { withAppendBroken } from '../support/append-lock';

jest.setTimeout(120_000);

describe('refunds and payouts whose flow is not finished', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startRecoveryGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  const eventsOf = (stream: string): Promise<Json[]> => streamEvents(gw, stream);

  /** The ledger's reservation entries (reserved or refused), oldest first. */
  const reservationsOf = async (m: Merchant, mode: Mode): Promise<Json[]> =>
    (await eventsOf(ledgerStream(m, mode))).filter((e) => e.type === 'LedgerEntryPosted' && String(e.data.cause).startsWith('reserve:')).map((e) => e.data);

  /** A paid invoice whose payment is already in the ledger (so nothing else appends to it during a test). */
  const paidAndPosted = async (m: Merchant, mode: Mode, amount: string): Promise<string> => {
    const id = await paidInvoice(gw.operator, m[mode], amount);
    await poll(
      () => eventsOf(ledgerStream(m, mode)),
      (events) => events.some((e) => e.data.cause === `payment:${id}`),
      `the payment of ${id} in the ledger`,
    );
    return id;
  };

  /** A refund answered 202 while the ledger's append fails: granted by the invoice, not yet reserved. */
  const unfundedRefund = async (m: Merchant, amount: string): Promise<Json> => {
    await fund(gw.operator, m, 'test', ['1000.00']);
    const invoiceId = await paidAndPosted(m, 'test', '1000.00');
    const answered = await withAppendBroken(gw.db.url, ledgerStream(m, 'test'), 'cancel', () => m.test.post(`/v1/invoices/${invoiceId}/refund`, { amount }));
    expectStatus(answered, 202);
    expect(await reservationsOf(m, 'test')).toEqual([]);
    return answered.body;
  };

  it('a refund reserved by the recovery worker is dated with its request, not with the recovery', async () => {
    const m = await instantMerchant(gw.operator);
    const refund = await unfundedRefund(m, '100.00');

    await gw.operator.advance(RECOVERY_GRACE_SECONDS + 1);
    const [reserved] = await poll(
      () => reservationsOf(m, 'test'),
      (r) => r.length === 1,
      'the recovery to reserve the refund',
    );
    expect({ cause: reserved.cause, kind: reserved.kind, occurredAt: reserved.occurredAt }).toEqual({
      cause: `reserve:${refund.id}`,
      kind: 'funds_reserved',
      occurredAt: refund.createdAt,
    });
    // A balance as of the 202 shows the money reserved.
    const asOf = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=test&asOf=${encodeURIComponent(refund.createdAt)}`);
    expectStatus(asOf, 200);
    expect(asOf.body.reserved).toBe('100.00');
    // Processed the processing time (3600 s here) after its request, as a refund reserved at once is, not after the recovery.
    const [created] = await poll(
      () => eventsOf(`refund-${refund.id}`),
      (events) => events.length > 0,
      'the refund created',
    );
    expect({ type: created!.type, processAt: created!.data.processAt }).toEqual({
      type: 'RefundCreated',
      processAt: new Date(Date.parse(refund.createdAt) + 3600_000).toISOString(),
    });
  });

  /** The causes of the ledger's entries that close a reservation (settled or released). */
  const closesOf = async (m: Merchant, mode: Mode): Promise<string[]> =>
    (await eventsOf(ledgerStream(m, mode))).map((e) => String(e.data.cause)).filter((cause) => /^(settle|release):/.test(cause));

  /** A 503 that says when to try again. */
  const expectRetryLater = (reply: Reply) => {
    expectError(reply, 503, 'provider_unavailable');
    expect(reply.headers.get('retry-after')).toMatch(/^\d+$/);
  };

  /** A payout answered 201 while the ledger's append fails: written, not yet reserved. */
  const unreservedPayout = async (m: Merchant, amount: string): Promise<Json> => {
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
    const send = () => m.live.post('/v1/payouts', { amount, addressId: address.id, orderId: orderId('unreserved') });
    const answered = await withAppendBroken(gw.db.url, ledgerStream(m, 'live'), 'cancel', send);
    expectStatus(answered, 201);
    expect(answered.body.status).toBe('pending');
    expect((await eventsOf(`payout-${answered.body.id}`)).map((e) => e.type)).toEqual(['PayoutRequested']);
    return answered.body;
  };

  describe('GET /v1/payouts/{id} and ?orderId= of a payout answered 201 before the ledger reserved it', () => {
    it('the read has the ledger reserve it first, once, and shows it pending', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const payout = await unreservedPayout(m, '300.00');

      expect((await m.live.get(`/v1/payouts?orderId=${payout.orderId}`)).body).toEqual(payout);
      expect((await eventsOf(`payout-${payout.id}`)).map((e) => e.type)).toEqual(['PayoutRequested', 'PayoutReserved']);
      expect((await reservationsOf(m, 'live')).map((e) => ({ cause: e.cause, kind: e.kind, occurredAt: e.occurredAt }))).toEqual([
        { cause: `reserve:po_${payout.id}`, kind: 'funds_reserved', occurredAt: payout.createdAt },
      ]);
      expect((await m.live.get(`/v1/payouts/${payout.id}`)).body).toEqual(payout);
      expect(await reservationsOf(m, 'live')).toHaveLength(1);
    });

    it('refused by the ledger: shown rejected with the reason, with its payout.rejected, never pending', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const payout = await unreservedPayout(m, '600.00');
      // Meanwhile another payout takes most of the balance.
      expectStatus(await m.live.post('/v1/payouts', { amount: '500.00', addressId: payout.addressId, orderId: orderId('other') }), 201);

      const shown = await m.live.get(`/v1/payouts/${payout.id}`);
      expectStatus(shown, 200);
      expect(shown.body).toEqual({
        ...payout,
        status: 'rejected',
        statusReason: expect.stringMatching(/недостаточно средств/),
        processedAt: expect.stringMatching(ISO_UTC),
      });
      expect((await eventsOf(`payout-${payout.id}`)).map((e) => e.type)).toEqual(['PayoutRequested', 'PayoutRejected']);
      expect((await reservationsOf(m, 'live')).map((e) => e.kind)).toEqual(['funds_reserved', 'reservation_refused']);
      expect((await m.live.get(`/v1/payouts?orderId=${payout.orderId}`)).body).toEqual(shown.body);
      const notice = await poll(
        () => m.live.get('/v1/events?type=payout.rejected'),
        (r) => r.status === 200 && r.body.items.length > 0,
        'the payout.rejected event',
      );
      expect(notice.body.items.map((e: Json) => ({ type: e.type, id: e.data.payout.id, status: e.data.payout.status }))).toEqual([
        { type: 'payout.rejected', id: payout.id, status: 'rejected' },
      ]);
    });

    it('the ledger busy: 503 with Retry-After and nothing written; once it is free, the payout', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const payout = await unreservedPayout(m, '300.00');

      for (const path of [`/v1/payouts/${payout.id}`, `/v1/payouts?orderId=${payout.orderId}`]) {
        expectRetryLater(await withAppendBroken(gw.db.url, ledgerStream(m, 'live'), 'cancel', () => m.live.get(path)));
      }
      expect((await eventsOf(`payout-${payout.id}`)).map((e) => e.type)).toEqual(['PayoutRequested']);
      expect(await reservationsOf(m, 'live')).toEqual([]);

      expect((await m.live.get(`/v1/payouts/${payout.id}`)).body).toEqual(payout);
    });

    it('refused by its own request before any read: 404 not_found, by id and by orderId', async () => {
      const m = await instantMerchant(gw.operator);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const order = orderId('refused');
      expectError(await m.live.post('/v1/payouts', { amount: '300.00', addressId: address.id, orderId: order }), 422, 'insufficient_balance');
      const id = (
        await gw.db.pool.query<{ id: number }>(
          `SELECT (data->>'payoutId')::int AS id FROM events WHERE event_type = 'PayoutRequested' AND data->>'accountId' = $1`,
          [m.accountId],
        )
      ).rows[0]!.id;
      expectError(await m.live.get(`/v1/payouts/${id}`), 404, 'not_found');
      expectError(await m.live.get(`/v1/payouts?orderId=${order}`), 404, 'not_found');
      expect((await eventsOf(`payout-${id}`)).map((e) => e.type)).toEqual(['PayoutRequested', 'PayoutRefused']);
    });
  });

  describe('operator actions on a payout answered 201 before the ledger reserved it', () => {
    it.each([
      ['approve', undefined, 'approved'],
      ['reject', { reason: 'реквизиты закрыты' }, 'rejected'],
      ['cancel', { reason: 'по просьбе мерчанта' }, 'cancelled'],
    ])('%s: the ledger reserves it first, once; then the transition (200)', async (name, body, status) => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const payout = await unreservedPayout(m, '300.00');

      const reply = await transition(gw.operator, payout.id, name, body);
      expectStatus(reply, 200);
      expect(reply.body).toMatchObject({ id: payout.id, status });
      const events = await eventsOf(`payout-${payout.id}`);
      expect(events.map((e) => e.type)).toEqual([
        'PayoutRequested',
        'PayoutReserved',
        { approve: 'PayoutApproved', reject: 'PayoutRejected', cancel: 'PayoutCancelled' }[name],
      ]);
      // The transition recorded the ledger's decision itself (at its own time), not the recovery worker.
      expect(events[1].data.at).toBe(events[2].data.at);
      expect((await reservationsOf(m, 'live')).map((e) => ({ cause: e.cause, kind: e.kind, occurredAt: e.occurredAt }))).toEqual([
        { cause: `reserve:po_${payout.id}`, kind: 'funds_reserved', occurredAt: payout.createdAt },
      ]);
      // The recovery worker, come later, finds nothing to do.
      await gw.operator.advance(RECOVERY_GRACE_SECONDS + 1);
      const closes = name === 'approve' ? [] : [`release:po_${payout.id}`];
      await poll(
        () => closesOf(m, 'live'),
        (c) => c.length === closes.length,
        'the reservation closed as the transition says',
      );
      const balance = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
      expect({ reserved: balance.body.reserved, reservations: (await reservationsOf(m, 'live')).length, closes: await closesOf(m, 'live') }).toEqual({
        reserved: name === 'approve' ? '300.00' : '0.00',
        reservations: 1,
        closes,
      });
    });

    it('the ledger still busy: 503 with Retry-After and nothing written; once it is free, the transition', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const payout = await unreservedPayout(m, '300.00');

      const busy = await withAppendBroken(gw.db.url, ledgerStream(m, 'live'), 'cancel', () =>
        transition(gw.operator, payout.id, 'cancel', { reason: 'дубль' }),
      );
      expectRetryLater(busy);
      expect((await eventsOf(`payout-${payout.id}`)).map((e) => e.type)).toEqual(['PayoutRequested']);
      expect(await reservationsOf(m, 'live')).toEqual([]);

      const cancelled = await transition(gw.operator, payout.id, 'cancel', { reason: 'дубль' });
      expectStatus(cancelled, 200);
      expect(cancelled.body.status).toBe('cancelled');
    });

    it('refused by the ledger when the operator finishes it: rejected with the reason, shown; the transition 409', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const payout = await unreservedPayout(m, '600.00');
      // Meanwhile another payout takes most of the balance.
      expectStatus(await m.live.post('/v1/payouts', { amount: '500.00', addressId: payout.addressId, orderId: orderId('other') }), 201);

      expectError(await transition(gw.operator, payout.id, 'approve'), 409, 'conflict');
      const shown = await m.live.get(`/v1/payouts/${payout.id}`);
      expect(shown.body).toMatchObject({ id: payout.id, status: 'rejected', statusReason: expect.stringMatching(/недостаточно средств/) });
      expect((await reservationsOf(m, 'live')).map((e) => e.kind)).toEqual(['funds_reserved', 'reservation_refused']);
    });

    it('refused before it was ever shown: still 404 not_found', async () => {
      const m = await instantMerchant(gw.operator);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const refused = await m.live.post('/v1/payouts', { amount: '300.00', addressId: address.id });
      expectError(refused, 422, 'insufficient_balance');
      const [id] = (
        await gw.db.pool.query<{ id: number }>(
          `SELECT (data->>'payoutId')::int AS id FROM events WHERE event_type = 'PayoutRequested' AND data->>'accountId' = $1`,
          [m.accountId],
        )
      ).rows.map((r) => r.id);
      expectError(await transition(gw.operator, id!, 'cancel', { reason: 'нет' }), 404, 'not_found');
    });
  });

  describe('POST /admin/v1/refunds/{id}/fail on a refund answered 202 before the ledger reserved it', () => {
    it('the ledger reserves it first, once; then it fails (200) and the money is back', async () => {
      const m = await instantMerchant(gw.operator);
      const refund = await unfundedRefund(m, '100.00');
      // Not created yet (the clock stands: the recovery worker waits 5 s of it), so the failing request creates it.
      expect(await eventsOf(`refund-${refund.id}`)).toEqual([]);

      const failed = await gw.operator.http.post(`/admin/v1/refunds/${refund.id}/fail`, { reason: 'банк отказал' });
      expectStatus(failed, 200);
      expect(failed.body).toEqual({ ...refund, status: 'failed', completedAt: expect.any(String) });
      expect((await reservationsOf(m, 'test')).map((e) => ({ cause: e.cause, kind: e.kind, occurredAt: e.occurredAt }))).toEqual([
        { cause: `reserve:${refund.id}`, kind: 'funds_reserved', occurredAt: refund.createdAt },
      ]);
      expect(await closesOf(m, 'test')).toEqual([`release:${refund.id}`]);
      const events = await eventsOf(`refund-${refund.id}`);
      expect(events.map((e) => e.type)).toEqual(['RefundCreated', 'RefundFailed']);
      // Due 3600 s after the refund's request.
      expect(Date.parse(events[0].data.processAt) - Date.parse(refund.createdAt)).toBe(3600_000);
      // Again: 200, the same refund.
      expect((await gw.operator.http.post(`/admin/v1/refunds/${refund.id}/fail`, {})).body).toEqual(failed.body);
    });

    it('found while the refunds read model has not applied its request yet (GET 200, then /fail 200)', async () => {
      const m = await instantMerchant(gw.operator);
      // The refunds read model held back from before the request: the test's table lock keeps
      // the projector from adding its row. EXCLUSIVE (plain reads go on) stops the projector's
      // batch at its first statement, before it holds a transaction id, so the log's readers
      // (on the whole shared server) go on; a client of its own, without the pool's idle bound.
      const holder = new PgClient({ connectionString: gw.db.url, application_name: 'refunds-read-model-holder' });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE refunds IN EXCLUSIVE MODE');
        const refund = await unfundedRefund(m, '100.00');
        expect((await holder.query('SELECT 1 FROM refunds WHERE id = $1', [refund.id])).rows).toEqual([]);
        const shown = await m.test.get(`/v1/refunds/${refund.id}`);
        expectStatus(shown, 200);
        expect(shown.body).toEqual(refund);
        const failed = await gw.operator.http.post(`/admin/v1/refunds/${refund.id}/fail`, { reason: 'банк отказал' });
        expectStatus(failed, 200);
        expect(failed.body).toEqual({ ...refund, status: 'failed', completedAt: expect.any(String) });
        expect((await eventsOf(`refund-${refund.id}`)).map((e) => e.type)).toEqual(['RefundCreated', 'RefundFailed']);
      } finally {
        await holder.end().catch(() => undefined);
      }
    });

    it('the ledger still busy: 503 with Retry-After and nothing written', async () => {
      const m = await instantMerchant(gw.operator);
      const refund = await unfundedRefund(m, '100.00');

      const busy = await withAppendBroken(gw.db.url, ledgerStream(m, 'test'), 'cancel', () => gw.operator.http.post(`/admin/v1/refunds/${refund.id}/fail`, {}));
      expectRetryLater(busy);
      expect(await eventsOf(`refund-${refund.id}`)).toEqual([]);
      expect(await reservationsOf(m, 'test')).toEqual([]);
      expectStatus(await gw.operator.http.post(`/admin/v1/refunds/${refund.id}/fail`, {}), 200);
    });
  });
});
