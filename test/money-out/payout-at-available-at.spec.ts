/**
 * Money is available for a payout from its payment's `availableAt` (the spec: "when the
 * amount becomes available for payout"), not from the hold-release worker's next tick:
 * the payout releases the holds due itself before it reserves, as a refund does. No
 * worker may release the hold first here, whatever the timing: the API runs alone
 * (npm run start:api), and a projector (which holds the workers) runs only until it has
 * recorded the payment in the ledger, before the hold is due. CLOCK=manual moves time to
 * the end of the hold.
 */
import { expectError, expectStatus, InvoiceGateway, Json, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { fromKopecks, liveLedgerKinds, paidInvoice, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { PROJECTOR_PUBLIC_URL, startProcess } from '../support/gateway-process';

describe('a payout at the end of the hold of the money it takes', () => {
  let alone: InvoiceGateway;

  beforeAll(async () => {
    alone = await startInvoiceGateway({ CLOCK: 'manual' }, 'api');
  });
  afterAll(async () => {
    await alone?.close();
  });

  const ledgerKinds = (accountId: string): Promise<string[]> => liveLedgerKinds(alone, accountId);

  it('is refused while the hold lasts and accepted from availableAt, though no worker released the hold', async () => {
    const m = await alone.operator.merchant({ holdHours: 1 });
    const address = await payoutAddress(alone.operator, m.accountId, { method: 'sbp', account: PHONE });
    const invoiceId = await paidInvoice(alone.operator, m.live, '1000.00');
    const projector = startProcess('projector', { DATABASE_URL: alone.db.url, PUBLIC_URL: PROJECTOR_PUBLIC_URL, CLOCK: 'manual' });
    try {
      await poll(
        () => ledgerKinds(m.accountId),
        (kinds) => kinds.includes('payment_recorded'),
        'the payment in the ledger',
        // The projector's start included: slow on a loaded machine.
        60_000,
      );
    } finally {
      await projector.kill();
    }
    const paid = (
      await alone.db.pool.query<{ data: Json }>(`SELECT data FROM events WHERE stream_name = $1 AND event_type = 'InvoicePaid'`, [`invoice-${invoiceId}`])
    ).rows[0]!.data;

    expectError(await m.live.post('/v1/payouts', { amount: '500.00', addressId: address.id, orderId: orderId('held') }), 422, 'insufficient_balance', 'amount');

    // The hold is an hour from the payment: the clock is then at availableAt (plus the second or so since the payment).
    await alone.operator.advance(3600);
    const payout = await m.live.post('/v1/payouts', { amount: '500.00', addressId: address.id, orderId: orderId('available') });
    expectStatus(payout, 201);
    expect(payout.body).toMatchObject({ amount: '500.00', status: 'pending' });
    expect(await ledgerKinds(m.accountId)).toEqual(['payment_recorded', 'reservation_refused', 'hold_released', 'funds_reserved']);
    expect((await m.live.get('/v1/balance')).body).toMatchObject({
      available: fromKopecks((paid.netAmount as number) - 50_000),
      pending: '0.00',
      reserved: '500.00',
    });
  });
});
