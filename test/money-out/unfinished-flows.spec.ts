/**
 * Refunds and payouts answered (202, 201) before the ledger reserved their money: the
 * flow is held half-done for real, by holding the ledger's append lock and cancelling
 * the gateway session that waits for it (test/support/append-lock.ts), and the manual
 * clock keeps the recovery worker (5 s) away until a test moves it.
 */
import { expectStatus, InvoiceGateway, Json, Merchant, Mode, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { fund, instantMerchant, paidInvoice } from '../support/money-out-fixtures';
import { withAppendBroken } from '../support/append-lock';

/** The recovery worker takes over a request left half-done for this long (RECOVERY_GRACE_SECONDS), on the gateway clock. */
const RECOVERY_GRACE_SECONDS = 5;

jest.setTimeout(120_000);

describe('refunds and payouts whose flow is not finished', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      CLOCK: 'manual',
      // Refunds stay pending while the tests move the clock for the recovery worker.
      REFUND_PROCESSING_SECONDS: '3600',
      POLL_INTERVAL_SECONDS: '0',
    });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const ledgerStream = (m: Merchant, mode: Mode) => `ledger-${mode}_${m.accountId}`;

  const eventsOf = async (stream: string): Promise<Json[]> =>
    (await gw.db.pool.query('SELECT event_type AS type, data FROM events WHERE stream_name = $1 ORDER BY stream_revision', [stream])).rows;

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
  });
});
