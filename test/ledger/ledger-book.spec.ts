import { randomUUID } from 'node:crypto';
import { Refusal } from '#domain';
import fc from 'fast-check';
import { Client } from 'pg';
import { PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import {
  foldLedger,
  LedgerEvent,
  LedgerId,
  ledgerStreamName,
  stateViolations,
  entryViolations,
  evolve,
  initialLedgerState,
  hasRecentCause,
  RECENT_CAUSES_KEPT,
} from '#ledger';
import { LEDGER_SNAPSHOT_EVERY, LedgerBook, LedgerRequest } from '#payments/ledger';
import { verifyLedgers } from '#payments/ledger-verification';
import { ledgerProjection, PostgresLedgerCauseIndex } from '#payments/read-models';
import { appendLedgerHistory, freshPayments } from '../support/ledger-history';
import { projectToHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';

let db: TestDatabase;
let store: PostgresEventStore;
let book: LedgerBook;

beforeAll(async () => {
  // A test holds the cluster's horizon: on a server of its own (test/support/test-database.ts says why).
  db = await createTestDatabase({ poolSize: 30, serverOfItsOwn: true });
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  book = new LedgerBook(store, new PostgresSnapshotStore(db.pool));
});
afterAll(async () => {
  await store.close();
  await db.drop();
});

const newLedger = (): LedgerId => ({ accountId: randomUUID(), mode: 'live' });
let tick = Date.parse('2026-01-01T00:00:00Z');
const at = () => new Date((tick += 1000)).toISOString();

async function entriesOf(ledger: LedgerId): Promise<LedgerEvent[]> {
  const events = await store.readStream(ledgerStreamName(ledger)).catch(() => []);
  return events.map((e) => ({ type: 'LedgerEntryPosted', data: e.data }) as LedgerEvent);
}

/** Runs the ledger projection until it has applied the whole log. */
const projectLedgers = () => projectToHead(db.pool, store, ledgerProjection, 250);

/** Replays the stored entries one by one, checking every invariant after each. */
async function replayChecked(ledger: LedgerId) {
  const events = await entriesOf(ledger);
  let state = initialLedgerState();
  for (const event of events) {
    expect(entryViolations(event)).toEqual([]);
    state = evolve(state, event);
    expect(stateViolations(state)).toEqual([]);
  }
  const causes = events.map((e) => e.data.cause);
  expect(new Set(causes).size).toBe(causes.length);
  return { events, state };
}

describe('the ledger book on the real event store', () => {
  it('posts a payment, releases the hold, reserves and settles, with balances from the log', async () => {
    const ledger = newLedger();
    const invoiceId = randomUUID();
    await book.post(ledger, {
      type: 'RecordPayment',
      invoiceId,
      netAmount: 97_000,
      feeAmount: 3_000,
      releaseAt: '2026-01-02T00:00:00Z',
      at: '2026-01-01T00:00:00Z',
    });
    await expect(book.post(ledger, { type: 'ReleaseHold', invoiceId, at: '2026-01-01T12:00:00Z' })).rejects.toMatchObject({ code: 'hold_not_due' });
    await book.post(ledger, { type: 'ReleaseHold', invoiceId, at: '2026-01-02T00:00:00Z' });
    await book.post(ledger, { type: 'ReserveFunds', reservationId: 'payout-1', purpose: 'payout', amount: 50_000, at: '2026-01-02T01:00:00Z' });
    await book.post(ledger, { type: 'SettleReservation', reservationId: 'payout-1', feeAmount: 500, at: '2026-01-02T02:00:00Z' });
    const state = await book.current(ledger);
    expect(state.balances).toEqual({
      pending: 0,
      available: 47_000,
      reserved: 0,
      acquiring_clearing: -100_000,
      fees: 3_500,
      refunds_paid: 0,
      payouts_sent: 49_500,
    });
    const past = await book.asOf(ledger, new Date('2026-01-01T23:59:59Z'));
    expect(past.state.balances.pending).toBe(97_000);
    expect(past.state.balances.available).toBe(0);
    expect(past.lastEntryAt).toBe('2026-01-01T00:00:00.000Z'); // the entry is dated as toISOString writes it
  });

  it('as of an instant, counts an entry posted hours later with an earlier time (a payment the projector posts late)', async () => {
    const ledger = newLedger();
    const payment = (invoiceId: string, at: string) =>
      book.post(ledger, { type: 'RecordPayment', invoiceId, netAmount: 1_000, feeAmount: 0, releaseAt: null, at });
    await payment(randomUUID(), '2026-03-01T10:00:00Z');
    await payment(randomUUID(), '2026-03-01T13:00:00Z');
    // Paid at 09:59 while the projector was down; posted after the 13:00 entry.
    await payment(randomUUID(), '2026-03-01T09:59:00Z');
    const past = await book.asOf(ledger, new Date('2026-03-01T10:30:00Z'));
    expect(past.state.balances.available).toBe(2_000);
    expect(past.lastEntryAt).toBe('2026-03-01T10:00:00.000Z');
  });

  it('a reservation is never dated before the entry it follows: no instant shows money reserved before it came', async () => {
    const ledger = newLedger();
    // The refund was asked for at .400; the payment that funds it was posted, dated .500, before the reservation was decided.
    await book.post(ledger, { type: 'RecordPayment', invoiceId: 'funding', netAmount: 10_000, feeAmount: 0, releaseAt: null, at: '2026-03-01T10:00:00.500Z' });
    const reserved = await book.post(ledger, {
      type: 'ReserveFunds',
      reservationId: 'rf_late',
      purpose: 'refund',
      amount: 10_000,
      at: '2026-03-01T10:00:00.400Z',
    });
    expect(reserved.entry?.occurredAt).toBe('2026-03-01T10:00:00.500Z');
    expect((await book.asOf(ledger, new Date('2026-03-01T10:00:00.450Z'))).state.balances).toMatchObject({ available: 0, reserved: 0 });
    // A reservation asked for after the last entry keeps its own time.
    await book.post(ledger, { type: 'RecordPayment', invoiceId: 'more', netAmount: 5_000, feeAmount: 0, releaseAt: null, at: '2026-03-01T10:00:01.000Z' });
    const later = await book.post(ledger, {
      type: 'ReserveFunds',
      reservationId: 'rf_on_time',
      purpose: 'refund',
      amount: 5_000,
      at: '2026-03-01T10:00:02.000Z',
    });
    expect(later.entry?.occurredAt).toBe('2026-03-01T10:00:02.000Z');
  });

  it('20 concurrent posts of one cause post exactly one entry', async () => {
    const ledger = newLedger();
    const invoiceId = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => book.post(ledger, { type: 'RecordPayment', invoiceId, netAmount: 1_000, feeAmount: 10, releaseAt: null, at: at() })),
    );
    // Every caller is answered with the one stored entry (the others are idempotent repeats).
    const { events, state } = await replayChecked(ledger);
    expect(events).toHaveLength(1);
    for (const r of results) {
      if (r.entry !== null) expect(r.entry.entryId).toBe(events[0]!.data.entryId);
    }
    expect(state.balances.available).toBe(1_000);
  });

  it('20 concurrent reservations never overdraw the available balance', async () => {
    const ledger = newLedger();
    await book.post(ledger, { type: 'RecordPayment', invoiceId: randomUUID(), netAmount: 10_000, feeAmount: 0, releaseAt: null, at: at() });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => book.post(ledger, { type: 'ReserveFunds', reservationId: `r${i}`, purpose: 'refund', amount: 1_000, at: at() })),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(10);
    for (const o of outcomes) {
      if (o.status === 'rejected') expect(o.reason).toMatchObject({ code: 'insufficient_balance' });
    }
    const { state } = await replayChecked(ledger);
    expect(state.balances).toMatchObject({ available: 0, reserved: 10_000 });
  });

  it('a cause older than the window is found by the book itself (cause index, then stream), not stopped by the store', async () => {
    const lookups: { found: boolean; read: number }[] = [];
    const stoppedByStore: string[] = [];
    const indexed = new LedgerBook(store, new PostgresSnapshotStore(db.pool), {
      causes: new PostgresLedgerCauseIndex(db.pool),
      observer: {
        causeLookedUp: (_s, found, read) => lookups.push({ found, read }),
        repeatRefusedByStore: (_s, repeat) => stoppedByStore.push(repeat.cause),
      },
    });
    const ledger = newLedger();
    const first = randomUUID();
    const request: LedgerRequest = { type: 'RecordPayment', invoiceId: first, netAmount: 100, feeAmount: 1, releaseAt: null, at: at() };
    await indexed.post(ledger, request);
    // The window keeps at least RECENT_CAUSES_KEPT causes, in chunks: go well past it (the
    // entries the book would post, written in a few appends: thousands of posts cost seconds).
    await appendLedgerHistory(store, ledger, freshPayments('other', RECENT_CAUSES_KEPT + 100, at), await entriesOf(ledger));
    const state = await indexed.current(ledger);
    expect(hasRecentCause(state, `payment:${first}`)).toBe(false);

    // The read model does not hold the ledger yet: the stream is read.
    lookups.length = 0;
    expect((await indexed.post(ledger, request)).entry).toBeNull();
    expect(lookups).toEqual([{ found: true, read: expect.any(Number) }]);
    expect(lookups[0]!.read).toBeGreaterThan(0);

    // Once the ledger projection holds it, one indexed query answers.
    await projectLedgers();
    lookups.length = 0;
    expect((await indexed.post(ledger, request)).entry).toBeNull();
    expect(lookups).toEqual([{ found: true, read: 0 }]);
    // The plain book (no index) finds it in the stream as well.
    expect((await book.post(ledger, request)).entry).toBeNull();

    expect(stoppedByStore).toEqual([]);
    const { events } = await replayChecked(ledger);
    expect(events).toHaveLength(RECENT_CAUSES_KEPT + 101);
  });

  it('loads from a snapshot plus the entries after it, and the result equals a full replay', async () => {
    const ledger = newLedger();
    const payment = (i: number): LedgerRequest => ({
      type: 'RecordPayment',
      invoiceId: `inv-${i}`,
      netAmount: 100 + i,
      feeAmount: 3,
      releaseAt: i % 2 ? null : '2030-01-01T00:00:00Z',
      at: at(),
    });
    // The entries before the 500th as the book would post them (hundreds of posts cost seconds);
    // the book posts the 500th (and writes its snapshot) and the rest.
    await appendLedgerHistory(
      store,
      ledger,
      Array.from({ length: LEDGER_SNAPSHOT_EVERY - 1 }, (_, i) => payment(i)),
    );
    for (let i = LEDGER_SNAPSHOT_EVERY - 1; i < LEDGER_SNAPSHOT_EVERY + 120; i++) await book.post(ledger, payment(i));
    const snapshot = await new PostgresSnapshotStore(db.pool).load(ledgerStreamName(ledger));
    expect(snapshot).not.toBeNull();
    expect(Number(snapshot!.revision)).toBeGreaterThanOrEqual(LEDGER_SNAPSHOT_EVERY - 1);
    const fromSnapshot = await book.current(ledger);
    expect(fromSnapshot).toEqual(foldLedger(await entriesOf(ledger)));
  });

  it('random concurrent command rounds keep every invariant, replay equals live, no cause posts twice', async () => {
    const invoices = ['a', 'b', 'c', 'd', 'e'];
    const reservations = ['r1', 'r2', 'r3', 'r4'];
    const request = fc.oneof(
      fc.record({
        type: fc.constant('RecordPayment' as const),
        invoiceId: fc.constantFrom(...invoices),
        netAmount: fc.integer({ min: 0, max: 50_000 }),
        feeAmount: fc.integer({ min: 1, max: 2_000 }),
        hold: fc.boolean(),
      }),
      fc.record({ type: fc.constant('ReleaseHold' as const), invoiceId: fc.constantFrom(...invoices) }),
      fc.record({
        type: fc.constant('ReserveFunds' as const),
        reservationId: fc.constantFrom(...reservations),
        purpose: fc.constantFrom('refund' as const, 'payout' as const),
        amount: fc.integer({ min: 1, max: 60_000 }),
      }),
      fc.record({
        type: fc.constant('SettleReservation' as const),
        reservationId: fc.constantFrom(...reservations),
        fee: fc.integer({ min: 0, max: 100 }),
      }),
      fc.record({ type: fc.constant('ReleaseReservation' as const), reservationId: fc.constantFrom(...reservations) }),
    );

    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(request, { minLength: 2, maxLength: 8 }), { minLength: 3, maxLength: 8 }), async (rounds) => {
        const ledger = newLedger();
        for (const round of rounds) {
          const time = at();
          const outcomes = await Promise.allSettled(
            round.map((r) => {
              switch (r.type) {
                case 'RecordPayment':
                  return book.post(ledger, {
                    type: r.type,
                    invoiceId: r.invoiceId,
                    netAmount: r.netAmount,
                    feeAmount: r.feeAmount,
                    releaseAt: r.hold ? time : null,
                    at: time,
                  });
                case 'ReleaseHold':
                  return book.post(ledger, { type: r.type, invoiceId: r.invoiceId, at: time });
                case 'ReserveFunds':
                  return book.post(ledger, { type: r.type, reservationId: r.reservationId, purpose: r.purpose, amount: r.amount, at: time });
                case 'SettleReservation':
                  return book.post(ledger, { type: r.type, reservationId: r.reservationId, feeAmount: r.fee, at: time });
                case 'ReleaseReservation':
                  return book.post(ledger, { type: r.type, reservationId: r.reservationId, at: time });
              }
            }),
          );
          for (const o of outcomes) {
            // A refusal is a domain answer, never a crash or a lost race.
            if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(Refusal);
          }
        }
        const { events, state } = await replayChecked(ledger);
        expect(await book.current(ledger)).toEqual(state);
        const settled = new Set(events.filter((e) => e.data.kind === 'reservation_settled').map((e) => e.data.reservation!.id));
        const released = events.filter((e) => e.data.kind === 'reservation_released').map((e) => e.data.reservation!.id);
        expect(released.filter((id) => settled.has(id))).toEqual([]);
      }),
      { numRuns: 25 },
    );
  });

  it('the ledger projection equals the log, and ledger:verify agrees; a corrupted read model is caught', async () => {
    await projectLedgers();

    const clean = await verifyLedgers(db.pool, store);
    expect(clean.problems).toEqual([]);
    expect(clean.entries).toBeGreaterThan(2_000);
    expect(clean.ledgers).toBeGreaterThan(25);

    const victim = await db.pool.query<{ account_id: string }>(`SELECT account_id FROM ledger_balances WHERE account = 'available' AND balance > 0 LIMIT 1`);
    await db.pool.query(`UPDATE ledger_balances SET balance = balance + 1 WHERE account_id = $1 AND account = 'available'`, [victim.rows[0]!.account_id]);
    const corrupted = await verifyLedgers(db.pool, store);
    expect(corrupted.problems).toEqual([expect.objectContaining({ kind: 'balance_differs', ledger: `ledger-live_${victim.rows[0]!.account_id}` })]);
    await db.pool.query(`UPDATE ledger_balances SET balance = balance - 1 WHERE account_id = $1 AND account = 'available'`, [victim.rows[0]!.account_id]);
  });
  it('a projection run to the head waits for events hidden by a transaction of another database of the cluster, then applies them', async () => {
    const ledger = newLedger();
    // Another session of the cluster holds a transaction id: what is written now stays hidden until it ends.
    const holder = new Client({ connectionString: db.adminUrl, application_name: 'project-to-head-holder' });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT txid_current()');
      await book.post(ledger, { type: 'RecordPayment', invoiceId: randomUUID(), netAmount: 700, feeAmount: 7, releaseAt: null, at: at() });
      const projected = projectLedgers();
      await new Promise((r) => setTimeout(r, 300));
      await holder.query('ROLLBACK');
      await projected;
    } finally {
      await holder.end();
    }
    const balance = await db.pool.query<{ balance: string }>(`SELECT balance::text FROM ledger_balances WHERE account_id = $1 AND account = 'available'`, [
      ledger.accountId,
    ]);
    expect(balance.rows.map((r) => r.balance)).toEqual(['700']);
  });
});
