/**
 * Read-your-writes for an outcome the operator records. The money of a refund's or a
 * payout's outcome is moved by its reactor (refund_outcomes, payout_outcomes), the one
 * driver of that step; the operator's answer comes once the reactor has moved it, so a
 * request sent right after the answer (no polling) sees the money back: the same amount
 * is granted again at once, never refused for a reservation already released.
 */
import { STREAM_APPEND_LOCK_NAMESPACE } from '#event-store/postgres';
import { expectStatus, InvoiceGateway, orderId, poll, sleep, startInvoiceGateway } from '../support/merchant-fixtures';
import { fund, instantMerchant, liveLedgerKinds, paidInvoice, PHONE, payoutAddress, transition, waitForBalance } from '../support/money-out-fixtures';
import { startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';

/** The gateway's warnings and errors (pino levels 40 and up): why an answer came before the money moved. */
const troubles = (gw: InvoiceGateway): string =>
  gw.gateway
    .output()
    .split('\n')
    .filter((line) => /"level":(4|5|6)\d/.test(line))
    .join('\n');

describe('an outcome recorded by the operator: its money moved before the answer', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway();
  });
  afterAll(async () => {
    await gw?.close();
  });

  it.each([
    ['rejected', 'reject'],
    ['cancelled', 'cancel'],
  ])('a payout %s: the whole balance can be paid out again at once', async (_, outcome) => {
    const m = await instantMerchant(gw.operator);
    await fund(gw.operator, m, 'live', ['1000.00']);
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });

    for (let round = 0; round < 5; round++) {
      // A different amount each round: the duplicate rule (same amount within a minute) stays out of it.
      const amount = `${1000 - round}.00`;
      const first = await m.live.post('/v1/payouts', { amount: '1000.00', addressId: address.id, orderId: orderId(`whole-${round}`) });
      expectStatus(first, 201);
      expectStatus(await transition(gw.operator, first.body.id as number, outcome, { reason: 'Проверка' }), 200);
      const again = await m.live.post('/v1/payouts', { amount, addressId: address.id, orderId: orderId(`again-${round}`) });
      if (again.status !== 201) throw new Error(`round ${round}: ${again.status} ${JSON.stringify(again.body)}\n${troubles(gw)}`);
      expectStatus(await transition(gw.operator, again.body.id as number, outcome, { reason: 'Проверка' }), 200);
    }
    await waitForBalance(m.live, { available: '1000.00', reserved: '0.00' });
  });

  it('a payout rejected while its reactor is held up past 3 s: the answer waits for the money', async () => {
    const m = await instantMerchant(gw.operator);
    await fund(gw.operator, m, 'live', ['1000.00']);
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
    const first = await m.live.post('/v1/payouts', { amount: '1000.00', addressId: address.id, orderId: orderId('held-up') });
    expectStatus(first, 201);

    // A loaded database, made exact: the reactor's release waits 4.5 s for the ledger
    // stream's append lock, held here. The reactor runs and holds its lease all along,
    // so the answer waits for it rather than answering after the bound for no projector.
    const holder = await gw.db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STREAM_APPEND_LOCK_NAMESPACE, `ledger-live_${m.accountId}`]);
    const letGo = sleep(4_500)
      .then(() => holder.query('COMMIT'))
      .finally(() => holder.release());
    try {
      expectStatus(await transition(gw.operator, first.body.id as number, 'reject', { reason: 'Проверка' }), 200);
    } finally {
      await letGo;
    }
    const again = await m.live.post('/v1/payouts', { amount: '999.00', addressId: address.id, orderId: orderId('held-up-again') });
    if (again.status !== 201) throw new Error(`${again.status} ${JSON.stringify(again.body)}\n${troubles(gw)}`);
    expect(gw.gateway.output()).not.toMatch(/has not moved the outcome's money/);
  });

  it('a refund failed: the whole invoice can be refunded again at once', async () => {
    const m = await instantMerchant(gw.operator);
    const invoiceId = await paidInvoice(gw.operator, m.live, '1000.00');
    await waitForBalance(m.live, { available: '1000.00' });

    for (let round = 0; round < 5; round++) {
      const asked = await m.live.post(`/v1/invoices/${invoiceId}/refund`, {});
      expectStatus(asked, 202);
      expect(asked.body).toMatchObject({ amount: '1000.00', status: 'pending' });
      const failed = await gw.operator.http.post(`/admin/v1/refunds/${asked.body.id as string}/fail`, { reason: 'Банк отклонил возврат' });
      expectStatus(failed, 200);
      expect(failed.body).toMatchObject({ status: 'failed' });
    }
    await waitForBalance(m.live, { available: '1000.00', reserved: '0.00' });
  });
});

describe('an outcome recorded while no projector runs (the API alone)', () => {
  let alone: InvoiceGateway;

  beforeAll(async () => {
    // npm run start:api with no projector: nothing moves an outcome's money until one starts.
    alone = await startInvoiceGateway({}, 'api');
  });
  afterAll(async () => {
    await alone?.close();
  });

  const ledgerKinds = (accountId: string): Promise<string[]> => liveLedgerKinds(alone, accountId);

  it('GET /v1/balance right after a 202 refund shows its reservation, though the ledger read model has applied nothing', async () => {
    const m = await instantMerchant(alone.operator);
    const invoiceId = await paidInvoice(alone.operator, m.live, '1000.00');
    expect((await m.live.get('/v1/balance')).body).toMatchObject({ available: '0.00', pending: '0.00', reserved: '0.00' });
    const asked = await m.live.post(`/v1/invoices/${invoiceId}/refund`, { amount: '400.00' });
    expectStatus(asked, 202);
    // The spec: on 202 "the amount is debited from the merchant balance".
    expect((await m.live.get('/v1/balance')).body).toMatchObject({ available: '600.00', pending: '0.00', reserved: '400.00' });
    expect((await alone.db.pool.query('SELECT count(*)::int AS n FROM ledger_entries WHERE account_id = $1', [m.accountId])).rows[0].n).toBe(0);
  });

  it('answers with the outcome after the bound, says so, and the projector moves the money when it starts', async () => {
    const m = await instantMerchant(alone.operator);
    const invoiceId = await paidInvoice(alone.operator, m.live, '1000.00');
    // The refund posts the payment's entry itself (no projector has), then reserves.
    const asked = await m.live.post(`/v1/invoices/${invoiceId}/refund`, {});
    expectStatus(asked, 202);

    const failed = await alone.operator.http.post(`/admin/v1/refunds/${asked.body.id as string}/fail`, { reason: 'Банк отклонил возврат' });
    expectStatus(failed, 200);
    expect(failed.body).toMatchObject({ id: asked.body.id, status: 'failed' });
    await alone.gateway.waitForOutput(/refund_outcomes has not moved the outcome's money within \d+ ms/);
    expect(await ledgerKinds(m.accountId)).toEqual(['payment_recorded', 'funds_reserved']);

    const projector = startProcess('projector', { DATABASE_URL: alone.db.url, PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    try {
      expect(
        await poll(
          () => ledgerKinds(m.accountId),
          (kinds) => kinds.length === 3,
          'the reservation released',
        ),
      ).toEqual(['payment_recorded', 'funds_reserved', 'reservation_released']);
      const invoice = await m.live.get(`/v1/invoices/${invoiceId}`);
      expect(invoice.body).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
    } finally {
      await projector.kill();
    }
  });

  it('the database failing after the outcome is written: 200 with the outcome, not a 5xx (a 5xx says nothing was done)', async () => {
    const m = await instantMerchant(alone.operator);
    const invoiceId = await paidInvoice(alone.operator, m.live, '1000.00');
    const asked = await m.live.post(`/v1/invoices/${invoiceId}/refund`, {});
    expectStatus(asked, 202);
    // The wait for the reactor's checkpoint fails, as on a full disk or a lost connection: the outcome is already in the log.
    await alone.db.pool.query('ALTER TABLE projection_checkpoints RENAME TO projection_checkpoints_away');
    let failed;
    try {
      failed = await alone.operator.http.post(`/admin/v1/refunds/${asked.body.id as string}/fail`, { reason: 'Банк отклонил возврат' });
    } finally {
      await alone.db.pool.query('ALTER TABLE projection_checkpoints_away RENAME TO projection_checkpoints');
    }
    expectStatus(failed, 200);
    expect(failed.body).toMatchObject({ id: asked.body.id, status: 'failed' });
    // Said in the log, with the database's error.
    await alone.gateway.waitForOutput(
      /projection_checkpoints.*does not exist.*a step after the first commit is not done|a step after the first commit is not done.*projection_checkpoints.*does not exist/,
    );
  });
});
