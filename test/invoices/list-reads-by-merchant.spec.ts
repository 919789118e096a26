/**
 * A merchant's invoice list reads the merchant's own rows, however many invoices the
 * other merchants have. A unique index on `seq` alone would let PostgreSQL answer a
 * filtered first page (a window of creation times far back, a rare status) by walking
 * every merchant's newer rows down that index: on a 1,000,000-event log 221,182 rows
 * read for 21. Measured here as rows read in the plan that PostgreSQL runs (EXPLAIN
 * ANALYZE of the list's own statement), never as a time.
 */
import { listInvoices } from '#payments/invoices';
import { listPayouts } from '#payments/payouts';
import { measuringPool } from '../support/rows-read';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const MERCHANT = '00000000-0000-4000-8000-000000000000';
const MERCHANTS = 21;
const ROWS = 21_000; // a row a minute from 2025-01-01, the merchants' in turn
const OWN_ROWS = ROWS / MERCHANTS;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  const owner = `('00000000-0000-4000-8000-' || lpad((n % ${MERCHANTS})::text, 12, '0'))::uuid`;
  const createdAt = `'2025-01-01T00:00:00Z'::timestamptz + n * interval '1 minute'`;
  // The merchant's three oldest invoices were refunded; the other merchants' one in twenty.
  const rare = `CASE WHEN n % ${MERCHANTS} = 0 THEN (CASE WHEN n <= ${3 * MERCHANTS} THEN $1 ELSE 'paid' END)
                     WHEN n % 20 = 1 THEN $1 ELSE 'paid' END`;
  await db.pool.query(
    `INSERT INTO invoices (id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at,
                           last_revision, net_amount, fee_amount, item)
     SELECT gen_random_uuid(), ${owner}, ${owner}, 'live', 'order-' || n, ${rare}, 100000, 'sbp', ${createdAt},
            ${createdAt} + interval '1 hour', 1, 98500, 1500, json_build_object('orderId', 'order-' || n)
     FROM generate_series(1, ${ROWS}) AS n`,
    ['refunded'],
  );
  await db.pool.query('ANALYZE invoices');
});
afterAll(async () => {
  await db?.drop();
});

const invoiceFilter = { projectId: MERCHANT, mode: 'live' as const, before: null, limit: 20 };

it('a window of creation times far back reads the rows of that window, not every newer invoice of the gateway', async () => {
  const measured = measuringPool(db.pool, 'invoices');
  const page = await listInvoices(measured.pool, { ...invoiceFilter, from: new Date('2025-01-01T00:00:00Z'), to: new Date('2025-01-02T00:00:00Z') });
  // The first day holds the merchant's invoices 21, 42, …, 1428 (68 of them), newest first.
  expect(page.items.map((i) => (i as unknown as { orderId: string }).orderId)).toEqual(Array.from({ length: 20 }, (_, k) => `order-${(68 - k) * MERCHANTS}`));
  expect(page.hasMore).toBe(true);
  expect(measured.rowsRead()).toBeLessThanOrEqual(OWN_ROWS);
});

it('a status few invoices have reads the merchant’s invoices only', async () => {
  const measured = measuringPool(db.pool, 'invoices');
  const page = await listInvoices(measured.pool, { ...invoiceFilter, status: 'refunded' });
  expect(page.items.map((i) => (i as unknown as { orderId: string }).orderId)).toEqual(['order-63', 'order-42', 'order-21']);
  expect(page.hasMore).toBe(false);
  expect(measured.rowsRead()).toBeLessThanOrEqual(OWN_ROWS);
});

describe('a cursor that names an item of another list as its last one', () => {
  const orderIds = (page: { items: readonly unknown[] }) => page.items.map((i) => (i as { orderId: string }).orderId);
  const invoiceAt = async (orderId: string, mode = 'live') =>
    (await db.pool.query<{ id: string; seq: string }>(`SELECT id, seq FROM invoices WHERE order_id = $1 AND mode = $2`, [orderId, mode])).rows[0]!;

  it('pages the invoices below the cursor’s seq: another merchant’s invoice or the other mode’s does not say where it stands', async () => {
    const own = await invoiceAt('order-210');
    // A test-mode invoice of the same merchant, newer than every live one.
    await db.pool.query(
      `INSERT INTO invoices (id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at,
                             last_revision, net_amount, fee_amount, item)
       VALUES (gen_random_uuid(), $1, $1, 'test', 'order-t', 'paid', 100000, 'sbp', now(), now(), 1, 98500, 1500, '{"orderId":"order-t"}')`,
      [MERCHANT],
    );
    const below210 = ['order-189', 'order-168', 'order-147'];
    for (const anchor of [(await invoiceAt('order-10')).id, (await invoiceAt('order-t', 'test')).id, own.id]) {
      const page = await listInvoices(db.pool, { ...invoiceFilter, limit: 3, before: Number(own.seq), beforeId: anchor });
      expect({ anchor, page: orderIds(page) }).toEqual({ anchor, page: below210 });
    }
  });

  it('pages the payouts below the cursor’s seq: another account’s payout does not say where it stands', async () => {
    const other = '00000000-0000-4000-8000-000000000001';
    // Payouts 1..9 of the two accounts in turn: the merchant's are the odd ones.
    await db.pool.query(
      `INSERT INTO payouts (id, account_id, project_id, order_id, status, created_at, last_revision, amount, fee_amount, item)
       SELECT n, a, a, 'payout-' || n, 'pending', now(), 1, 10000, 100, json_build_object('orderId', 'payout-' || n)
       FROM generate_series(1, 9) AS n, LATERAL (SELECT CASE WHEN n % 2 = 1 THEN $1 ELSE $2 END::uuid AS a) AS owner`,
      [MERCHANT, other],
    );
    const seq7 = Number((await db.pool.query<{ seq: string }>(`SELECT seq FROM payouts WHERE id = 7`)).rows[0]!.seq);
    for (const anchor of ['2', '8', '7']) {
      const page = await listPayouts(db.pool, { accountId: MERCHANT, statuses: ['pending'], before: seq7, beforeId: anchor, limit: 10 });
      expect({ anchor, page: orderIds(page) }).toEqual({ anchor, page: ['payout-5', 'payout-3', 'payout-1'] });
    }
  });
});
