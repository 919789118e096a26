/**
 * A payout finished in its own stream (here cancelled) is no longer unfinished, even
 * while the payout_outcomes reactor has not yet moved its reservation: the limit of
 * three unfinished payouts counts pending, approved and processing payouts only. The
 * reactor is held back as operations.md describes ("When the visible event log trails":
 * a transaction of the cluster holding a transaction id), only as long as the test
 * needs; the limit stays exact for payouts requested at once.
 */
import { Client } from 'pg';
import { expectError, expectStatus, InvoiceGateway, orderId, poll, Reply, startInvoiceGateway } from '../support/merchant-fixtures';
import {
  fromKopecks,
  fund,
  instantMerchant,
  liveLedgerKinds,
  PHONE,
  payoutAddress,
  streamEvents,
  toKopecks,
  transition,
  waitForBalance,
} from '../support/money-out-fixtures';

describe('payouts cancelled while payout_outcomes trails the log', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    // The hold below is on the cluster's horizon: on a server of its own (test/support/test-database.ts says why).
    gw = await startInvoiceGateway({}, 'gateway', { serverOfItsOwn: true });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('no longer count as unfinished: of four new payouts requested at once, three are accepted', async () => {
    const m = await instantMerchant(gw.operator);
    const funded = await fund(gw.operator, m, 'live', ['5000.00']);
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
    const first: number[] = [];
    for (const amount of ['101.00', '102.00', '103.00']) {
      const created = await m.live.post('/v1/payouts', { amount, addressId: address.id, orderId: orderId('first') });
      expectStatus(created, 201);
      first.push(created.body.id as number);
    }
    expectError(await m.live.post('/v1/payouts', { amount: '104.00', addressId: address.id, orderId: orderId('over') }), 409, 'too_many_pending');

    const holder = new Client({ connectionString: gw.db.adminUrl, application_name: 'payout-outcomes-held-back' });
    await holder.connect();
    let cancels: Promise<Reply[]> | null = null;
    let replies: Reply[];
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT txid_current()');
      // The answers wait for the reactor, which sees nothing until the holder ends: they are collected after.
      cancels = Promise.all(first.map((id) => transition(gw.operator, id, 'cancel', { reason: 'Проверка' })));
      for (const id of first) {
        await poll(
          () => streamEvents(gw, `payout-${id}`),
          (events) => events.some((e) => e.type === 'PayoutCancelled'),
          `payout ${id} cancelled in its stream`,
        );
      }
      expect((await liveLedgerKinds(gw, m.accountId)).filter((k) => k === 'reservation_released')).toHaveLength(0);

      replies = await Promise.all(
        ['111.00', '112.00', '113.00', '114.00'].map((amount) => m.live.post('/v1/payouts', { amount, addressId: address.id, orderId: orderId('next') })),
      );
    } finally {
      await holder.query('COMMIT').catch(() => undefined);
      await holder.end();
      await cancels?.catch(() => undefined);
    }
    for (const reply of await cancels!) {
      expectStatus(reply, 200);
      expect(reply.body.status).toBe('cancelled');
    }

    const accepted = replies.filter((r) => r.status === 201);
    const refused = replies.filter((r) => r.status !== 201);
    expect(accepted).toHaveLength(3);
    expect(refused).toHaveLength(1);
    expectError(refused[0]!, 409, 'too_many_pending');
    for (const reply of accepted) expect(reply.body.status).toBe('pending');

    // Each cancelled reservation released once, by whichever came first (this request or the reactor).
    const kinds = await liveLedgerKinds(gw, m.accountId);
    expect(kinds.filter((k) => k === 'reservation_released')).toHaveLength(3);
    expect(kinds.filter((k) => k === 'funds_reserved')).toHaveLength(6);
    const reserved = accepted.reduce((sum, r) => sum + toKopecks(r.body.amount as string), 0);
    await waitForBalance(m.live, { available: fromKopecks(toKopecks(funded.available) - reserved), reserved: fromKopecks(reserved) });
  });
});
