/**
 * An orderId's claim taken over while its request still lives (review40): request A
 * (400.00) claims the orderId, its PayoutRequested append waits on a lock (a live, slow
 * request); request B (same orderId, 500.00) finds the claim older than its 5 s grace and
 * takes it over and writes its payout, waiting on A's append of the same stream. A's
 * append, held past its deadline (a request is dated when decided: docs/finance-reports.md),
 * is rolled back, and so is B's, which waited on it past its own: both are decided again,
 * and the first to land writes the payout. Only the request that wrote the payout is
 * answered 201; the other is a repeat of the orderId (docs/api.md: 200, the same payout).
 *
 * The slow append is placed with the real database: a trigger makes A's PayoutRequested
 * (amount 40000) wait on an advisory lock the test holds.
 */
import { randomUUID } from 'node:crypto';
import { formatMoney } from '#ledger';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { expectStatus, Operator } from '../support/merchant-fixtures';
import { fund, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { heldWrites, HeldWrites } from '../support/held-writes';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-payout-order-id-live-takeover';
const HOLD_LOCK = 7_420_141;
/** Longer than the claim's grace (5 s, docs/api.md), so B takes A's claim over while A still waits. */
const HOLD_A_MS = 7_000;

jest.setTimeout(120_000);

describe('an orderId claim taken over while its request still writes', () => {
  let db: TestDatabase;
  let gateway: RunningGateway | null = null;
  let held: HeldWrites;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    held = await heldWrites(db, HOLD_LOCK);
  });
  afterAll(async () => {
    await gateway?.kill();
    await held?.end();
    await db?.drop();
  });

  it('answers 201 only to the request that wrote the payout, the other 200 with that payout', async () => {
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    const operator = new Operator(gateway.baseUrl, gateway.adminToken);
    const m = await operator.merchant({ holdHours: 0 });
    await fund(operator, m, 'live', ['3000.00']);
    const address = await payoutAddress(operator, m.accountId, { method: 'sbp', account: PHONE });
    const orderId = `live-${randomUUID()}`;

    await held.hold('BEFORE INSERT ON events', `NEW.event_type = 'PayoutRequested' AND NEW.data->>'amount' = '40000'`);
    const a = m.live.post('/v1/payouts', { amount: '400.00', addressId: address.id, orderId });
    await held.waiting('A writing PayoutRequested');
    const b = m.live.post('/v1/payouts', { amount: '500.00', addressId: address.id, orderId });
    await new Promise((r) => setTimeout(r, HOLD_A_MS));
    await held.release();
    const [ra, rb] = await Promise.all([a, b]);

    const written = await db.pool.query<{ amount: string }>(
      `SELECT data->>'amount' AS amount FROM events WHERE event_type = 'PayoutRequested' AND data->>'orderId' = $1`,
      [orderId],
    );
    console.log(`A answered ${ra.status} ${JSON.stringify(ra.body)}; B answered ${rb.status} ${JSON.stringify(rb.body)}`);
    expect(written.rows).toHaveLength(1);
    // The writer is whichever decided again first: it alone is answered 201, with its amount; the other 200, the same payout.
    const [writer, repeat] = written.rows[0]!.amount === '40000' ? [ra, rb] : [rb, ra];
    expect(['40000', '50000']).toContain(written.rows[0]!.amount);
    expectStatus(writer, 201);
    expect(writer.body).toMatchObject({ orderId, amount: formatMoney(Number(written.rows[0]!.amount)), status: 'pending' });
    expectStatus(repeat, 200);
    expect(repeat.body).toEqual(writer.body);
  });
});
