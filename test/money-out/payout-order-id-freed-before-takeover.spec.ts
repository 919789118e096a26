/**
 * An abandoned orderId claim is looked at again when it is used (review40): request A
 * (a 900.00 payout over a 300.00 balance) claims the orderId and its PayoutRequested
 * append waits on a lock past the claim's 5 s grace; request B (same orderId, 200.00)
 * finds the claim abandoned, then waits on its address read. A then writes, is refused
 * and frees the orderId. B must not answer with A's refusal (its orderId is free): it
 * claims the orderId anew and gets its own payout.
 *
 * Placed with the real database: a trigger holds A's PayoutRequested (amount 90000) on an
 * advisory lock, and a transaction holds payout_addresses locked while B reads it.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { expectStatus, Operator, poll } from '../support/merchant-fixtures';
import { fund, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { heldWrites, HeldWrites } from '../support/held-writes';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-payout-order-id-freed';
const HOLD_LOCK = 7_420_142;

jest.setTimeout(120_000);

describe('an abandoned orderId claim freed before the retry uses it', () => {
  let db: TestDatabase;
  let gateway: RunningGateway | null = null;
  let held: HeldWrites;
  let tableHolder: Client;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    tableHolder = new Client({ connectionString: db.url });
    await tableHolder.connect();
    held = await heldWrites(db, HOLD_LOCK);
  });
  afterAll(async () => {
    await gateway?.kill();
    await held?.end();
    await tableHolder?.end();
    await db?.drop();
  });

  const waiting = (what: string, sql: string, params: unknown[]): Promise<unknown> =>
    poll(
      async () => (await db.pool.query(sql, params)).rows,
      (rows) => rows.length > 0,
      what,
      30_000,
    );

  it('the retry claims the freed orderId and answers its own payout, not the refusal', async () => {
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    const operator = new Operator(gateway.baseUrl, gateway.adminToken);
    const m = await operator.merchant({ holdHours: 0 });
    await fund(operator, m, 'live', ['300.00']);
    const address = await payoutAddress(operator, m.accountId, { method: 'sbp', account: PHONE });
    const orderId = `freed-${randomUUID()}`;

    await held.hold('BEFORE INSERT ON events', `NEW.event_type = 'PayoutRequested' AND NEW.data->>'amount' = '90000'`);
    const a = m.live.post('/v1/payouts', { amount: '900.00', addressId: address.id, orderId });
    await held.waiting('A writing PayoutRequested');
    await tableHolder.query('BEGIN');
    await tableHolder.query('LOCK TABLE payout_addresses IN ACCESS EXCLUSIVE MODE');
    // B waits in repeatOf until A's claim is 5 s old, takes it as abandoned, then waits on the address read.
    const b = m.live.post('/v1/payouts', { amount: '200.00', addressId: address.id, orderId });
    await waiting(
      'B reading its address, waiting on the table lock',
      `SELECT l.pid FROM pg_locks l WHERE l.locktype = 'relation' AND NOT l.granted AND l.relation = 'payout_addresses'::regclass`,
      [],
    );
    await held.release();
    const ra = await a;
    await tableHolder.query('COMMIT');
    const rb = await b;
    console.log(`A answered ${ra.status} ${JSON.stringify(ra.body)}; B answered ${rb.status} ${JSON.stringify(rb.body)}`);

    expectStatus(ra, 422);
    expectStatus(rb, 201);
    expect(rb.body).toMatchObject({ orderId, amount: '200.00', status: 'pending' });
    const got = await m.live.get(`/v1/payouts?orderId=${encodeURIComponent(orderId)}`);
    expectStatus(got, 200);
    expect(got.body).toEqual(rb.body);
  });
});
