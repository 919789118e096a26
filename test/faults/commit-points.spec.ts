/**
 * A 5xx means nothing happened. Each POST that writes in more than one step answers
 * what its first committed step made (the refund, the payout, the transition) however
 * a later step fails; the recovery worker or the reactors finish that step.
 * A client that follows the spec's retry guidance (500 and 503 are retried) therefore
 * never creates a second refund or payout by retrying.
 *
 * The later step is made to fail for real: the test holds the ledger stream's append
 * lock and cancels (as the statement timeout does) or terminates (as a database
 * restart does) the gateway session that waits for it (test/support/append-lock.ts).
 */
import { expectError, expectStatus, ISO_UTC, InvoiceGateway, Json, Merchant, Mode, poll, Reply, sleep } from '../support/merchant-fixtures';
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
import { AppendBreak, withAppendBroken } from '../support/append-lock';
import { randomUUID } from 'node:crypto';
import { Client as PgClient } from 'pg';

jest.setTimeout(120_000);

describe('a 5xx means nothing happened: answers after the first commit', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startRecoveryGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  const eventsOf = (stream: string): Promise<Json[]> => streamEvents(gw, stream);

  /** The causes of the ledger's reservation entries (reserved or refused), oldest first. */
  const reservationsOf = async (m: Merchant, mode: Mode): Promise<{ cause: string; kind: string }[]> =>
    (await eventsOf(ledgerStream(m, mode)))
      .filter((e) => e.type === 'LedgerEntryPosted' && String(e.data.cause).startsWith('reserve:'))
      .map((e) => ({ cause: e.data.cause as string, kind: e.data.kind as string }));

  /** The ids of the payouts the account's requests wrote, oldest first. */
  const payoutsRequestedBy = async (m: Merchant): Promise<number[]> =>
    (
      await gw.db.pool.query<{ id: number }>(
        `SELECT (data->>'payoutId')::int AS id FROM events WHERE event_type = 'PayoutRequested' AND data->>'accountId' = $1 ORDER BY global_position`,
        [m.accountId],
      )
    ).rows.map((r) => r.id);

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

  /** What a client that follows the spec does: 500 and 503 are sent again, after 250 ms growing, at most 4 times. */
  const followingTheSpec = async (first: Reply, send: () => Promise<Reply>): Promise<Reply[]> => {
    const replies = [first];
    for (let retry = 0, delay = 250; retry < 4 && (replies.at(-1)!.status === 500 || replies.at(-1)!.status === 503); retry++, delay *= 2) {
      await sleep(delay);
      replies.push(await send());
    }
    return replies;
  };

  const ledgerBalance = async (m: Merchant, mode: Mode): Promise<Json> => {
    const r = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=${mode}`);
    expectStatus(r, 200);
    return r.body;
  };

  /** Moves the clock past the recovery worker's grace period. */
  const letRecoveryRun = () => gw.operator.advance(RECOVERY_GRACE_SECONDS + 1);

  describe.each<AppendBreak>(['cancel', 'terminate'])('the ledger append broken (%s)', (how) => {
    it('POST /v1/invoices/{id}/refund: 202 with the refund the invoice granted; a retry by the spec never makes a second one', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'test', ['1000.00']);
      const invoiceId = await paidAndPosted(m, 'test', '1000.00');
      const path = `/v1/invoices/${invoiceId}/refund`;
      const send = () => m.test.post(path, { amount: '100.00' });

      const first = await withAppendBroken(gw.db.url, ledgerStream(m, 'test'), how, send);
      const replies = await followingTheSpec(first, send);

      const granted = (await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundRequested');
      expect({
        answers: replies.map((r) => r.status),
        granted: granted.map((e) => ({ refundId: e.data.refundId, amount: e.data.amount })),
      }).toEqual({
        answers: [202],
        granted: [{ refundId: first.body.id, amount: 10_000 }],
      });
      expect(first.body).toMatchObject({ invoiceId, amount: '100.00', currency: 'RUB', status: 'pending', completedAt: null });

      // The refund is there for the client at once, pending, before the recovery funds it.
      const shown = await poll(
        () => m.test.get(`/v1/refunds/${first.body.id}`),
        (r) => r.status === 200,
        'GET /v1/refunds/{id} of the answered refund',
      );
      expect(shown.body).toEqual(first.body);

      await letRecoveryRun();
      await poll(
        () => reservationsOf(m, 'test'),
        (r) => r.length === 1,
        'the recovery to reserve the refund',
      );
      expect(await reservationsOf(m, 'test')).toEqual([{ cause: `reserve:${first.body.id}`, kind: 'funds_reserved' }]);
      expect((await ledgerBalance(m, 'test')).reserved).toBe('100.00');
      const after = await m.test.get(`/v1/refunds/${first.body.id}`);
      expect(after.body).toEqual(first.body);
    });

    it('POST /v1/payouts: 201 with the payout it wrote; a retry by the spec never makes a second one', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const order = `payout-${how}-${Date.now()}`;
      const send = () => m.live.post('/v1/payouts', { amount: '300.00', addressId: address.id, orderId: order });
      // Another amount: without an orderId, the same amount and detail within a minute is a duplicate_request.
      const sendWithout = () => m.live.post('/v1/payouts', { amount: '350.00', addressId: address.id });

      for (const [label, request] of [
        ['with orderId', send],
        ['without orderId', sendWithout],
      ] as const) {
        const first = await withAppendBroken(gw.db.url, ledgerStream(m, 'live'), how, request);
        const replies = await followingTheSpec(first, request);
        expect({ label, answers: replies.map((r) => r.status) }).toEqual({ label, answers: [201] });
        expect(first.body).toMatchObject({ status: 'pending', addressId: address.id, processedAt: null });
        expect((await m.live.get(`/v1/payouts/${first.body.id}`)).body).toEqual(first.body);
      }
      const written = await payoutsRequestedBy(m);
      expect(written).toHaveLength(2);
      // The orderId names the payout the first answer gave.
      const byOrder = await m.live.get(`/v1/payouts?orderId=${order}`);
      expect(byOrder.body.id).toBe(written[0]);

      await letRecoveryRun();
      await poll(
        () => reservationsOf(m, 'live'),
        (r) => r.length === 2,
        'the recovery to reserve both payouts',
      );
      expect(await reservationsOf(m, 'live')).toEqual(written.map((id) => ({ cause: `reserve:po_${id}`, kind: 'funds_reserved' })));
      expect((await ledgerBalance(m, 'live')).reserved).toBe('650.00');
      for (const id of written) expect((await m.live.get(`/v1/payouts/${id}`)).body.status).toBe('pending');
    });

    it('a refund answered 202 that the ledger then refuses fails, shown, and its amount is back in the remainder', async () => {
      // The merchant pays the fee: 1000.00 paid nets 985.00, less than the invoice can refund.
      const m = await gw.operator.merchant({ holdHours: 0, customerFeeShare: 0 });
      const invoiceId = await paidAndPosted(m, 'test', '1000.00');
      const path = `/v1/invoices/${invoiceId}/refund`;

      const answered = await withAppendBroken(gw.db.url, ledgerStream(m, 'test'), how, () => m.test.post(path, { amount: '100.00' }));
      expectStatus(answered, 202);
      // Before the recovery funds it, the rest of the invoice is refunded: 900.00 of the 985.00.
      const rest = await m.test.post(path, {});
      expectStatus(rest, 202);
      expect(rest.body.amount).toBe('900.00');

      await letRecoveryRun();
      const failed = await poll(
        () => m.test.get(`/v1/refunds/${answered.body.id}`),
        (r) => r.body.status === 'failed',
        'the answered refund to fail',
      );
      expect(failed.body).toEqual({ ...answered.body, status: 'failed', completedAt: expect.stringMatching(ISO_UTC) });
      expect((await eventsOf(`refund-${answered.body.id}`)).map((e) => e.type)).toEqual(['RefundCreated', 'RefundFailed']);
      expect(await reservationsOf(m, 'test')).toEqual([
        { cause: `reserve:${rest.body.id}`, kind: 'funds_reserved' },
        { cause: `reserve:${answered.body.id}`, kind: 'reservation_refused' },
      ]);
      const released = (await eventsOf(`invoice-${invoiceId}`)).filter((e) => e.type === 'InvoiceRefundReleased');
      expect(released.map((e) => ({ refundId: e.data.refundId, reason: e.data.reason }))).toEqual([{ refundId: answered.body.id, reason: 'failed' }]);
      // 100.00 is refundable again, as far as the balance (85.00) goes.
      expectError(await m.test.post(path, { amount: '100.00' }), 422, 'insufficient_balance');
    });

    it('a payout answered 201 that the ledger then refuses is rejected, shown, with the reason', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['1000.00']);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });

      const answered = await withAppendBroken(gw.db.url, ledgerStream(m, 'live'), how, () =>
        m.live.post('/v1/payouts', { amount: '600.00', addressId: address.id }),
      );
      expectStatus(answered, 201);
      const other = await m.live.post('/v1/payouts', { amount: '500.00', addressId: address.id });
      expectStatus(other, 201);

      await letRecoveryRun();
      const rejected = await poll(
        () => m.live.get(`/v1/payouts/${answered.body.id}`),
        (r) => r.body.status === 'rejected',
        'the answered payout to be rejected',
      );
      expect(rejected.body).toEqual({
        ...answered.body,
        status: 'rejected',
        statusReason: expect.stringMatching(/недостаточно средств/),
        processedAt: expect.stringMatching(ISO_UTC),
      });
      expect(await reservationsOf(m, 'live')).toEqual([
        { cause: `reserve:po_${other.body.id}`, kind: 'funds_reserved' },
        { cause: `reserve:po_${answered.body.id}`, kind: 'reservation_refused' },
      ]);
      expect((await ledgerBalance(m, 'live')).available).toBe('500.00');
    });

    it('operator transitions that move money (pay, reject, cancel) and the refund failure: 200 with what they recorded', async () => {
      const m = await instantMerchant(gw.operator);
      await fund(gw.operator, m, 'live', ['3000.00']);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const payout = async (amount: string): Promise<number> => {
        const r = await m.live.post('/v1/payouts', { amount, addressId: address.id, orderId: `${how}-${amount}-${Date.now()}` });
        expectStatus(r, 201);
        return r.body.id as number;
      };
      const toPay = await payout('400.00');
      for (const step of ['approve', 'process']) expectStatus(await transition(gw.operator, toPay, step), 200);
      const toReject = await payout('300.00');
      const toCancel = await payout('200.00');

      const cases: [number, string, unknown, string][] = [
        [toPay, 'pay', { externalId: 'bank-1' }, 'paid'],
        [toReject, 'reject', { reason: 'реквизиты закрыты' }, 'rejected'],
        [toCancel, 'cancel', { reason: 'по просьбе мерчанта' }, 'cancelled'],
      ];
      // The payout_outcomes reactor moves the money; the answer waits for it (3 s at most),
      // and, while the ledger's append is broken, answers without it.
      for (const [id, name, body, status] of cases) {
        const reply = await withAppendBroken(gw.db.url, ledgerStream(m, 'live'), how, () => transition(gw.operator, id, name, body), 'reactor');
        expect({ name, status: reply.status, payout: reply.body.status }).toEqual({ name, status: 200, payout: status });
      }

      const invoiceId = await paidAndPosted(m, 'test', '500.00');
      const refund = await m.test.post(`/v1/invoices/${invoiceId}/refund`, { amount: '50.00' });
      expectStatus(refund, 202);
      const failed = await withAppendBroken(
        gw.db.url,
        ledgerStream(m, 'test'),
        how,
        () => gw.operator.http.post(`/admin/v1/refunds/${refund.body.id}/fail`, {}),
        'reactor',
      );
      expect({ status: failed.status, refund: failed.body.status }).toEqual({ status: 200, refund: 'failed' });

      // The reactors move the money once the ledger takes appends again.
      const closes = (events: Json[]) => events.filter((e) => /^(settle|release):/.test(String(e.data.cause))).map((e) => e.data.cause as string);
      await poll(
        () => eventsOf(ledgerStream(m, 'live')),
        (e) => closes(e).length === 3,
        'the payouts settled and released',
      );
      expect(closes(await eventsOf(ledgerStream(m, 'live'))).sort()).toEqual([`release:po_${toCancel}`, `release:po_${toReject}`, `settle:po_${toPay}`].sort());
      await poll(
        () => eventsOf(ledgerStream(m, 'test')),
        (e) => closes(e).length === 1,
        'the refund released',
      );
      const live = await ledgerBalance(m, 'live');
      expect(live.reserved).toBe('0.00');
    });
  });

  it('enabling a webhook endpoint is one commit: its resend cancelled, the 503 left the endpoint disabled; the retry does both', async () => {
    // With a webhook URL: a resend has somewhere to go (a project without one is refused, 409).
    const m = await gw.operator.merchant({ webhookUrl: 'https://shop.example/hooks' } as never);
    const project = () => gw.operator.http.get(`/admin/v1/projects/${m.projectId}`);
    // Disabled for failing, with one delivery owed (as endpoint health and the outbox leave them).
    await gw.db.pool.query('UPDATE projects SET webhook_disabled_at = $2 WHERE id = $1', [m.projectId, new Date('2025-01-01T00:00:00Z')]);
    const delivery = randomUUID();
    await gw.db.pool.query(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, 'https://shop.example/hooks', '{}', true, 'failed', 1, now())`,
      [delivery, randomUUID(), m.projectId],
    );
    const disabledAt = (await project()).body.webhookDisabledAt;
    expect(disabledAt).toMatch(ISO_UTC);

    // The resend's step fails for real: the test holds the delivery's row, and the gateway session that waits for
    // it is cancelled (as the statement timeout does).
    const holder = new PgClient({ connectionString: gw.db.url, application_name: 'delivery-lock-holder' });
    await holder.connect();
    let reply: Reply;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [delivery]);
      let answered = false;
      const sent = gw.operator.http.post(`/admin/v1/projects/${m.projectId}/webhook-endpoint/enable`, {}).finally(() => (answered = true));
      let cancelled = 0;
      while (!answered) {
        const waiting = await holder.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))');
        for (const { pid } of waiting.rows) cancelled += (await holder.query('SELECT pg_cancel_backend($1)', [pid])).rowCount ?? 0;
        await sleep(10);
      }
      reply = await sent;
      expect(cancelled).toBeGreaterThan(0);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }

    // A 5xx means nothing was written: the endpoint is still disabled, the delivery still owed.
    expectStatus(reply, 503);
    expect(reply.body.error.message).not.toMatch(/могло быть сделано/);
    expect((await project()).body.webhookDisabledAt).toBe(disabledAt);
    const owed = await gw.db.pool.query('SELECT status FROM webhook_deliveries WHERE id = $1', [delivery]);
    expect(owed.rows).toEqual([{ status: 'failed' }]);
    // The spec's retry enables it and resends what is owed.
    const retried = await gw.operator.http.post(`/admin/v1/projects/${m.projectId}/webhook-endpoint/enable`, {});
    expectStatus(retried, 202);
    expect(retried.body).toEqual({ projectId: m.projectId, resent: 1 });
    expect((await project()).body.webhookDisabledAt).toBeNull();
  });
});
