/**
 * A statement's opening balances (GET /admin/v1/accounts/{id}/statement, GET
 * /v1/balance/statement) are found from the ledger's own entries after `from`, not by
 * summing the postings of every ledger of the gateway: measured as rows of
 * ledger_postings read by the statement's own queries, never as a time.
 */
import { openAccountStatement } from '#payments/audit';
import { ledgerEntriesPage } from '#payments/ledger';
import { measuringPool } from '../support/rows-read';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const LEDGER = { accountId: 'acc-statement', mode: 'live' as const };
const ENTRIES = 2_000; // of this ledger, one a minute from 2025-01-01, two postings each
const OTHER_ENTRIES = 20_000; // of 100 other ledgers, three postings each
const START = Date.parse('2025-01-01T00:00:00Z');
const uuid = (prefix: string, n: string) => `('${prefix}' || lpad(${n}::text, 12, '0'))::uuid`;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
  await db.pool.query(
    `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
     SELECT ${uuid('10000000-0000-4000-8000-', 'n')}, 'acc-statement', 'live', n, 'payment_recorded', 'payment:inv-' || n,
            '2025-01-01T00:00:00Z'::timestamptz + n * interval '1 minute', '0/' || n
     FROM generate_series(1, ${ENTRIES}) AS n`,
  );
  await db.pool.query(
    `INSERT INTO ledger_postings (entry_id, ordinal, account, amount)
     SELECT ${uuid('10000000-0000-4000-8000-', 'n')}, o, CASE o WHEN 0 THEN 'available' ELSE 'acquiring_clearing' END, CASE o WHEN 0 THEN n ELSE -n END
     FROM generate_series(1, ${ENTRIES}) AS n, generate_series(0, 1) AS o`,
  );
  await db.pool.query(
    `INSERT INTO ledger_balances (account_id, mode, account, balance)
     VALUES ('acc-statement', 'live', 'available', ${(ENTRIES * (ENTRIES + 1)) / 2}), ('acc-statement', 'live', 'acquiring_clearing', ${(-ENTRIES * (ENTRIES + 1)) / 2})`,
  );
  await db.pool.query(
    `INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
     SELECT ${uuid('20000000-0000-4000-8000-', 'n')}, 'acc-other-' || (n % 100), 'live', n, 'payment_recorded', 'payment:other-' || n,
            '2025-01-01T00:00:00Z'::timestamptz + n * interval '6 seconds', '1/' || n
     FROM generate_series(1, ${OTHER_ENTRIES}) AS n`,
  );
  await db.pool.query(
    `INSERT INTO ledger_postings (entry_id, ordinal, account, amount)
     SELECT ${uuid('20000000-0000-4000-8000-', 'n')}, o, (ARRAY['available', 'fees', 'acquiring_clearing'])[o + 1], CASE o WHEN 2 THEN -2 ELSE 1 END
     FROM generate_series(1, ${OTHER_ENTRIES}) AS n, generate_series(0, 2) AS o`,
  );
  await db.pool.query('ANALYZE ledger_entries; ANALYZE ledger_postings; ANALYZE ledger_balances');
});
afterAll(async () => {
  await db?.drop();
});

it('the opening of a statement of the last ten minutes reads the postings of those entries only', async () => {
  const measured = measuringPool(db.pool, 'ledger_postings');
  const from = new Date(START + (ENTRIES - 10) * 60_000);
  const statement = await openAccountStatement(measured.pool, LEDGER, from, new Date(START + ENTRIES * 60_000));
  // Entries 1 … 1,990 occurred at or before `from`: available holds 1 + 2 + … + 1,990.
  const opening = (1_990 * 1_991) / 2;
  expect(statement.opening).toMatchObject({ available: opening, acquiring_clearing: -opening, pending: 0, reserved: 0 });
  expect(statement.throughSeq).toBe(ENTRIES);
  expect(measured.rowsRead()).toBeLessThanOrEqual(40);
  const entries = [];
  for await (const page of statement.pages()) entries.push(...page);
  expect(entries.map((e) => e.cause)).toEqual(Array.from({ length: 10 }, (_, i) => `payment:inv-${1_991 + i}`));
  expect(measured.rowsRead()).toBeLessThanOrEqual(80);
});

// The entries after `from` were found by the ledger's key and their time filtered: the opening and the first page each
// read every entry of the ledger, a year of them for a statement of one day.
it("a statement of the last ten minutes reads the ledger's entries of those minutes only, not the ledger's whole history", async () => {
  const measured = measuringPool(db.pool, 'ledger_entries');
  const statement = await openAccountStatement(measured.pool, LEDGER, new Date(START + (ENTRIES - 10) * 60_000), new Date(START + ENTRIES * 60_000));
  expect(measured.rowsRead()).toBeLessThanOrEqual(40);
  const entries = [];
  for await (const page of statement.pages()) entries.push(...page);
  expect(entries).toHaveLength(10);
  expect(measured.rowsRead()).toBeLessThanOrEqual(80);
});

// An old period of a busy ledger: its pages read the period's entries, not every entry up to the ledger's head.
it('the pages of a statement of ten minutes long past read those minutes only', async () => {
  const measured = measuringPool(db.pool, 'ledger_entries');
  const statement = await openAccountStatement(measured.pool, LEDGER, new Date(START + 100 * 60_000), new Date(START + 110 * 60_000));
  expect(statement.opening).toMatchObject({ available: (100 * 101) / 2 });
  const opening = measured.rowsRead();
  const entries = [];
  for await (const page of statement.pages()) entries.push(...page);
  expect(entries.map((e) => e.cause)).toEqual(Array.from({ length: 10 }, (_, i) => `payment:inv-${101 + i}`));
  expect(measured.rowsRead() - opening).toBeLessThanOrEqual(40);
});

it('a statement from before the first entry opens at zero and one after the last at the balances', async () => {
  const before = await openAccountStatement(db.pool, LEDGER, new Date(START), new Date(START + 60_000));
  expect(before.opening).toMatchObject({ available: 0, acquiring_clearing: 0 });
  const after = await openAccountStatement(db.pool, LEDGER, new Date(START + (ENTRIES + 1) * 60_000), new Date(START + (ENTRIES + 2) * 60_000));
  expect(after.opening).toMatchObject({ available: (ENTRIES * (ENTRIES + 1)) / 2, acquiring_clearing: (-ENTRIES * (ENTRIES + 1)) / 2 });
});

it("the operator's first page of a ledger (its account page) reads the postings of that page's entries only", async () => {
  // Grouped before the LIMIT, the first page joined and aggregated all 2,000 entries' postings.
  const measured = measuringPool(db.pool, 'ledger_postings');
  const page = await ledgerEntriesPage(measured.pool, LEDGER, -1, 10);
  expect(page.items.map((e) => e.cause)).toEqual(Array.from({ length: 10 }, (_, i) => `payment:inv-${i + 1}`));
  expect(page.items[0]!.postings).toEqual([
    { account: 'available', amount: 1 },
    { account: 'acquiring_clearing', amount: -1 },
  ]);
  expect(page.hasMore).toBe(true);
  expect(measured.rowsRead()).toBeLessThanOrEqual(40);
  const last = await ledgerEntriesPage(db.pool, LEDGER, ENTRIES - 1, 10);
  expect(last).toMatchObject({ items: [{ seq: ENTRIES }], hasMore: false });
});
