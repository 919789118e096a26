/**
 * A run that finishes a requested payout later than its request (a GET, the recovery,
 * a repeat) releases the due holds at its own `now`, then reserves. The reservation is
 * never dated before those releases: were it dated at the payout's createdAt, an entry
 * dated earlier landing between the two (a payment the projector posts late, dated
 * paidAt) would leave it before the release whose money it took, and the ledger as of an
 * instant between them would show available below zero.
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import { DEFAULT_PAYOUT_TERMS, payoutAmounts } from '#domain';
import { stateViolations } from '#ledger';
import { FixedUsdtRate, PayoutFlow } from '#payments/payouts';
import { LedgerBook } from '#payments/ledger';
import type { PayoutAddresses } from '#payments/merchants';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

it('a payout finished after its request is reserved no earlier than the holds it released', async () => {
  const store = new PostgresEventStore(db.pool);
  const book = new LedgerBook(store, new PostgresSnapshotStore(db.pool));
  const accountId = randomUUID();
  const ledger = { accountId, mode: 'live' as const };
  const T0 = Date.parse('2026-11-30T10:00:00.000Z');
  const iso = (ms: number) => new Date(T0 + ms).toISOString();
  // A payment held until T0 - 1 s: due.
  await book.post(ledger, { type: 'RecordPayment', invoiceId: 'inv_h', netAmount: 100_000, feeAmount: 0, releaseAt: iso(-1000), at: iso(-3_600_000) });
  // The projector posts another payment late, dated long before, right after the GET's release.
  const late = Object.create(book) as LedgerBook;
  late.post = async (l, request) => {
    const posted = await book.post(l, request);
    if (request.type === 'ReleaseHold')
      await book.post(l, { type: 'RecordPayment', invoiceId: 'inv_late', netAmount: 1, feeAmount: 0, releaseAt: null, at: iso(-1_800_000) });
    return posted;
  };
  const flow = new PayoutFlow(store, db.pool, late, {} as PayoutAddresses, DEFAULT_PAYOUT_TERMS, new FixedUsdtRate(10_000));
  const payoutId = 930_001;
  await flow.decide(payoutId, {
    type: 'RequestPayout',
    data: {
      payoutId,
      accountId,
      projectId: randomUUID(),
      method: 'sbp',
      addressId: 1,
      account: '+79001234567',
      bank: null,
      orderId: 'o-1',
      comment: null,
      ...payoutAmounts(50_000, DEFAULT_PAYOUT_TERMS.sbp),
      usdtAmount: null,
      usdtRate: null,
      source: 'api',
      createdAt: iso(0),
    },
  });
  // The request's own run died before the ledger; the merchant's GET comes 4 s later.
  expect(await flow.decided(payoutId, new Date(T0 + 4000), accountId)).toMatchObject({ status: 'pending' });
  const entries: { kind: string; occurredAt: string }[] = [];
  await book.forEachEntry(ledger, (e) => (entries.push({ kind: e.kind, occurredAt: e.occurredAt }), true));
  const between = await book.asOf(ledger, new Date(T0 + 2000));
  expect(between.state.balances.available).toBeGreaterThanOrEqual(0);
  expect(stateViolations(between.state)).toEqual([]);
  const released = entries.find((e) => e.kind === 'hold_released')!;
  const reserved = entries.find((e) => e.kind === 'funds_reserved')!;
  expect(Date.parse(reserved.occurredAt)).toBeGreaterThanOrEqual(Date.parse(released.occurredAt));
});

it('any reservation is dated no earlier than the latest-dated entry of its ledger, not only the last one in log order', async () => {
  // Before, the book dated it no earlier than the ledger's last entry in log order: a
  // payment posted late (dated when it was paid) after a release hid the release's time,
  // and a refund reserved after both but dated with its request sat before the money it
  // took: the balance as of an instant between them showed available below zero.
  const book = new LedgerBook(new PostgresEventStore(db.pool), new PostgresSnapshotStore(db.pool));
  const ledger = { accountId: randomUUID(), mode: 'live' as const };
  await book.post(ledger, {
    type: 'RecordPayment',
    invoiceId: 'inv_a',
    netAmount: 100_000,
    feeAmount: 0,
    releaseAt: '2026-01-01T10:00:00.000Z',
    at: '2026-01-01T09:00:00.000Z',
  });
  // The worker releases A's hold at 10:00:05; then the projector posts C, paid at 09:30.
  await book.post(ledger, { type: 'ReleaseHold', invoiceId: 'inv_a', at: '2026-01-01T10:00:05.000Z' });
  await book.post(ledger, {
    type: 'RecordPayment',
    invoiceId: 'inv_c',
    netAmount: 5_000,
    feeAmount: 0,
    releaseAt: '2026-01-01T11:00:00.000Z',
    at: '2026-01-01T09:30:00.000Z',
  });
  // A refund asked at 10:00:01, reserved now (the recovery, a slow request), dated with its request.
  const reserved = await book.reserve(ledger, {
    type: 'ReserveFunds',
    reservationId: 'rf_late',
    purpose: 'refund',
    amount: 100_000,
    at: '2026-01-01T10:00:01.000Z',
  });
  expect(reserved.outcome).toBe('reserved');
  const entry = await db.pool.query<{ at: string }>(
    `SELECT data->>'occurredAt' AS at FROM events WHERE stream_name = $1 AND data->>'kind' = 'funds_reserved'`,
    [`ledger-live_${ledger.accountId}`],
  );
  expect(entry.rows).toEqual([{ at: '2026-01-01T10:00:05.000Z' }]);
  for (const instant of ['2026-01-01T10:00:03.000Z', '2026-01-01T10:00:05.000Z', '2026-01-01T10:00:06.000Z']) {
    const asOf = await book.balancesAsOf(ledger, new Date(instant));
    expect({ instant, available: asOf.balances.available >= 0 }).toEqual({ instant, available: true });
  }
});
