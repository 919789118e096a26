/**
 * A payout when a backlog of holds fell due at once (a clock jump, a projector that was
 * down, a busy merchant's day of payments): the payout releases the due holds it needs
 * before it reserves, and it does so in a few appends to the ledger, not one append per
 * hold (500 serial appends made the request take many seconds, with every other command
 * of the account queued behind them).
 *
 * The API runs alone (npm run start:api), as in payout-at-available-at.spec.ts: a
 * projector holds the hold-release worker, which would release the holds one per append
 * by itself once they are due. A projector runs only until the payments are in the
 * ledger (before the holds are due), and again at the end to bring the read model up to
 * the log for ledger:verify. CLOCK=manual moves time past the holds. The rate limit is
 * lifted: the test pays its 500 invoices in a few seconds.
 */
import { expectStatus, InvoiceGateway, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { fromKopecks, paidInvoice, payoutAddress, PHONE, toKopecks } from '../support/money-out-fixtures';
import { PROJECTOR_PUBLIC_URL, startProcess } from '../support/gateway-process';

const HOLDS = 500;
const LANES = 8;

describe('a payout after a backlog of holds due at once', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway({ CLOCK: 'manual', RATE_LIMIT_PER_SECOND: '1000000' }, 'api');
  });
  afterAll(async () => {
    await gw?.close();
  });

  const countOf = async (sql: string, params: unknown[]): Promise<number> => (await gw.db.pool.query<{ n: number }>(sql, params)).rows[0]!.n;

  it(`releases the ${HOLDS} due holds it needs in a few appends to the ledger, not one each, and ledger:verify passes`, async () => {
    const m = await gw.operator.merchant({ holdHours: 1 });
    const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
    const stream = `ledger-live_${m.accountId}`;
    await Promise.all(
      Array.from({ length: LANES }, async (_, lane) => {
        for (let i = lane; i < HOLDS; i += LANES) await paidInvoice(gw.operator, m.live, '100.00');
      }),
    );

    const projector = startProcess('projector', { DATABASE_URL: gw.db.url, PUBLIC_URL: PROJECTOR_PUBLIC_URL, CLOCK: 'manual' });
    try {
      await poll(
        () => countOf(`SELECT count(*)::int AS n FROM events WHERE stream_name = $1 AND data->>'kind' = 'payment_recorded'`, [stream]),
        (n) => n === HOLDS,
        `the ${HOLDS} payments in the ledger`,
        240_000,
      );
    } finally {
      await projector.kill();
    }
    const held = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
    expectStatus(held, 200);
    expect(held.body).toMatchObject({ available: '0.00', reserved: '0.00' });
    const pending = toKopecks(held.body.pending);

    // Every hold is due; no worker runs. The payout takes 90% of what they hold: most of the holds.
    await gw.operator.advance(2 * 3600);
    const amount = Math.floor((pending * 0.9) / 100) * 100;
    const payout = await m.live.post('/v1/payouts', { amount: fromKopecks(amount), addressId: address.id, orderId: orderId('backlog') });
    expectStatus(payout, 201);
    expect(payout.body).toMatchObject({ amount: fromKopecks(amount), status: 'pending' });

    const releases = (
      await gw.db.pool.query<{ released: number; appends: number; cover: string }>(
        `SELECT count(*)::int AS released, count(DISTINCT transaction_id)::int AS appends, sum(-(data->'postings'->0->>'amount')::bigint)::text AS cover
           FROM events WHERE stream_name = $1 AND data->>'kind' = 'hold_released'`,
        [stream],
      )
    ).rows[0]!;
    // As many holds as the amount needs, the earliest first: at least 90% of them at 100.00 each.
    expect(releases.released).toBeGreaterThanOrEqual(HOLDS * 0.9 - 1);
    expect(Number(releases.cover)).toBeGreaterThanOrEqual(amount);
    // One append releases them all (a few at most, should a concurrent writer make it decide again): not one per hold.
    expect({ released: releases.released, appends: releases.appends, few: releases.appends <= 3 }).toEqual({
      released: releases.released,
      appends: releases.appends,
      few: true,
    });
    const after = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live`);
    expectStatus(after, 200);
    expect(toKopecks(after.body.reserved)).toBe(amount);
    expect(toKopecks(after.body.pending) + toKopecks(after.body.available) + toKopecks(after.body.reserved)).toBe(pending);

    // The read model brought up to the log, then every ledger replayed from the log agrees with it.
    const catchUp = startProcess('projector', { DATABASE_URL: gw.db.url, PUBLIC_URL: PROJECTOR_PUBLIC_URL, CLOCK: 'manual' });
    try {
      await poll(
        async () => [
          await countOf(`SELECT count(*)::int AS n FROM events WHERE stream_name = $1`, [stream]),
          await countOf(`SELECT count(*)::int AS n FROM ledger_entries WHERE account_id = $1 AND mode = 'live'`, [m.accountId]),
        ],
        ([logged, projected]) => logged === projected,
        'the ledger read model up to the log',
        120_000,
      );
    } finally {
      await catchUp.kill();
    }
    const verify = startProcess('ledger-verify', { DATABASE_URL: gw.db.url });
    const code = await verify.exited;
    if (code !== 0) throw new Error(`ledger:verify exited ${code}:\n${verify.output()}`);
    expect(verify.output()).toContain('OK: every entry balances');
  }, 600_000);
});
