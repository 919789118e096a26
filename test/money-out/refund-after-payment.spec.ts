/**
 * A refund right after the payment, before the projector has recorded the payment in
 * the merchant's ledger: the refund posts the payment's entry itself (by its cause, so
 * the process manager's post is a repeat later) and is accepted. The API runs alone
 * here, with no projector at all, so nothing else records the payment.
 */
import type { TestDatabase } from '../support/test-database';
import { expectStatus, InvoiceGateway, Operator, startInvoiceGateway } from '../support/merchant-fixtures';
import { instantMerchant, paidInvoice } from '../support/money-out-fixtures';

describe('a refund right after the payment', () => {
  let alone: InvoiceGateway;
  let db: TestDatabase;
  let operator: Operator;

  beforeAll(async () => {
    // The API process alone (npm run start:api): no process manager records payments, no worker releases holds.
    // CLOCK=manual: the last test moves time past a hold.
    alone = await startInvoiceGateway({ CLOCK: 'manual' }, 'api');
    ({ db, operator } = alone);
  });
  afterAll(async () => {
    await alone?.close();
  });

  it('is accepted (202) when the hold is over, though no projector recorded the payment yet', async () => {
    const merchant = await instantMerchant(operator);
    const invoiceId = await paidInvoice(operator, merchant.test, '1000.00');
    const refund = await merchant.test.post(`/v1/invoices/${invoiceId}/refund`, { amount: '400.00' });
    expectStatus(refund, 202);
    expect(refund.body).toMatchObject({ invoiceId, amount: '400.00', status: 'pending' });
    // The merchant's ledger holds the payment's entry once, then the refund's reservation.
    const entries = await db.pool.query<{ kind: string }>(`SELECT data->>'kind' AS kind FROM events WHERE stream_name = $1 ORDER BY stream_revision`, [
      `ledger-test_${merchant.accountId}`,
    ]);
    expect(entries.rows.map((r) => r.kind)).toEqual(['payment_recorded', 'funds_reserved']);
  });

  it('is refused as before while the hold lasts: the money is pending, not available', async () => {
    const merchant = await operator.merchant({ holdHours: 24 });
    const invoiceId = await paidInvoice(operator, merchant.test, '1000.00');
    const refund = await merchant.test.post(`/v1/invoices/${invoiceId}/refund`, { amount: '400.00' });
    expectStatus(refund, 422);
    expect(refund.body.error.code).toBe('insufficient_balance');
  });

  it('is accepted once the hold is over, though no worker released it yet', async () => {
    const merchant = await operator.merchant({ holdHours: 1 });
    const invoiceId = await paidInvoice(operator, merchant.test, '1000.00');
    await operator.advance(3600);
    const refund = await merchant.test.post(`/v1/invoices/${invoiceId}/refund`, { amount: '400.00' });
    expectStatus(refund, 202);
    const entries = await db.pool.query<{ kind: string }>(`SELECT data->>'kind' AS kind FROM events WHERE stream_name = $1 ORDER BY stream_revision`, [
      `ledger-test_${merchant.accountId}`,
    ]);
    expect(entries.rows.map((r) => r.kind)).toEqual(['payment_recorded', 'hold_released', 'funds_reserved']);
  });

  it("releases another invoice's due hold that it needs, as a payout does, though no worker released it yet", async () => {
    // Before, a refund released only its own invoice's hold: with A's hold due and
    // unreleased (the worker lagging), a refund of B was refused 422 for good under its
    // key, while a payout of the same amount at the same moment was accepted.
    const merchant = await operator.merchant({ holdHours: 1 });
    const a = await paidInvoice(operator, merchant.test, '1000.00');
    // A's payment in the ledger (no projector here): a refund of A, refused while A is held.
    expectStatus(await merchant.test.post(`/v1/invoices/${a}/refund`, { amount: '1.00' }), 422);
    await operator.advance(3600);
    const b = await paidInvoice(operator, merchant.test, '1000.00');
    const refund = await merchant.test.post(`/v1/invoices/${b}/refund`, { amount: '400.00' });
    expectStatus(refund, 202);
    const entries = await db.pool.query<{ kind: string; cause: string }>(
      `SELECT data->>'kind' AS kind, data->>'cause' AS cause FROM events WHERE stream_name = $1 ORDER BY stream_revision`,
      [`ledger-test_${merchant.accountId}`],
    );
    expect(entries.rows.map((r) => r.kind)).toEqual(['payment_recorded', 'reservation_refused', 'payment_recorded', 'hold_released', 'funds_reserved']);
    expect(entries.rows[3]!.cause).toBe(`hold_release:${a}`);
  });
});
