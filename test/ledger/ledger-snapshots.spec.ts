/**
 * Snapshots are checked, not trusted, on the real store: a stored snapshot whose
 * balances are wrong (but still sum to zero) is ignored by the loader, which folds
 * the ledger from its events instead, and `ledger:verify` reports it.
 */
import { randomUUID } from 'node:crypto';
import { PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import { foldLedger, LedgerEvent, LedgerId, ledgerStreamName } from '#ledger';
import { LEDGER_SNAPSHOT_EVERY, LedgerBook, LedgerRequest } from '#payments/ledger';
import { verifyLedgers, VerifyProblem } from '#payments/ledger-verification';
import { ledgerProjection } from '#payments/read-models';
import { appendLedgerHistory } from '../support/ledger-history';
import { projectToHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { verifyLedgersInLogOrder } from '../support/verify-ledgers-in-log-order';

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 10 });
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
});
afterAll(async () => {
  await store.close();
  await db.drop();
});

let clock = Date.parse('2026-02-01T00:00:00Z');
const at = () => new Date((clock += 1000)).toISOString();

/** Runs the ledger projection until it has applied the whole log. */
const projectLedgers = () => projectToHead(db.pool, store, ledgerProjection, 500);

async function entriesOf(ledger: LedgerId): Promise<LedgerEvent[]> {
  return (await store.readStream(ledgerStreamName(ledger))).map((e) => ({ type: 'LedgerEntryPosted', data: e.data }) as LedgerEvent);
}

/** The stored snapshot's balances, wherever its format keeps them. */
const BALANCES = `CASE WHEN state ? 'digest' THEN '{state,balances}' ELSE '{balances}' END::text[]`;

async function moveInSnapshot(ledger: LedgerId, from: string, to: string, amount: number): Promise<void> {
  const updated = await db.pool.query(
    `UPDATE aggregate_snapshots SET state = jsonb_set(state, ${BALANCES},
       jsonb_set(jsonb_set(state #> ${BALANCES}, '{${from}}', to_jsonb((state #>> (${BALANCES} || '${from}'::text))::bigint - $2)),
                 '{${to}}', to_jsonb((state #>> (${BALANCES} || '${to}'::text))::bigint + $2)))
     WHERE stream_name = $1`,
    [ledgerStreamName(ledger), amount],
  );
  expect(updated.rowCount).toBe(1);
}

const payment = (i: number, netAmount: number, feeAmount: number): LedgerRequest => ({
  type: 'RecordPayment',
  invoiceId: `inv-${i}`,
  netAmount,
  feeAmount,
  releaseAt: null,
  at: at(),
});

/**
 * A ledger whose LEDGER_SNAPSHOT_EVERY-th entry the book posts, so that the book
 * writes its snapshot at revision 499: the entries before it appended as the book
 * would have posted them (hundreds of posts cost seconds), then `after` more posts.
 */
async function ledgerWithBookSnapshot(book: LedgerBook, ledger: LedgerId, amounts: [number, number], after: number): Promise<void> {
  await appendLedgerHistory(
    store,
    ledger,
    Array.from({ length: LEDGER_SNAPSHOT_EVERY - 1 }, (_, i) => payment(i, ...amounts)),
  );
  for (let i = LEDGER_SNAPSHOT_EVERY - 1; i < LEDGER_SNAPSHOT_EVERY + after; i++) await book.post(ledger, payment(i, ...amounts));
}

/**
 * A projected ledger of 5 × LEDGER_SNAPSHOT_EVERY (2,500) payments whose last one was posted by the book: its
 * snapshot at revision 2,499 holds the causes of entries 448 to 2,499 (RECENT_CAUSES_KEPT 2,000, chunks of 64).
 */
async function ledgerLongerThanItsWindow() {
  const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
  const entries = 5 * LEDGER_SNAPSHOT_EVERY;
  await appendLedgerHistory(
    store,
    ledger,
    Array.from({ length: entries - 1 }, (_, i) => payment(i, 100, 1)),
  );
  await new LedgerBook(store, new PostgresSnapshotStore(db.pool)).post(ledger, payment(entries - 1, 100, 1));
  expect((await new PostgresSnapshotStore(db.pool).load(ledgerStreamName(ledger)))?.revision).toBe(BigInt(entries - 1));
  await projectLedgers();
  const ofThisLedger = (problems: readonly VerifyProblem[]) => problems.filter((p) => p.ledger === ledgerStreamName(ledger));
  return { ledger, entries, ofThisLedger };
}

/** A ledger of LEDGER_SNAPSHOT_EVERY + 20 payments (a snapshot at revision 499), its snapshot then corrupted. */
async function ledgerWithCorruptedSnapshot(book: LedgerBook) {
  const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
  await ledgerWithBookSnapshot(book, ledger, [1_000, 30], 20);
  expect((await new PostgresSnapshotStore(db.pool).load(ledgerStreamName(ledger)))?.revision).toBe(SNAPSHOT_REVISION);
  const truth = foldLedger(await entriesOf(ledger));
  expect(truth.balances.available).toBe(520_000);
  // A million kopecks that are not there, taken from fees: every account still sums to zero.
  await moveInSnapshot(ledger, 'fees', 'available', 1_000_000);
  return { ledger, truth };
}

const SNAPSHOT_REVISION = BigInt(LEDGER_SNAPSHOT_EVERY - 1);

describe('ledger snapshots on the real store', () => {
  it('BUG: a snapshot with wrong balances that sum to zero is ignored by the loader: no overdraft; a good one replaces it', async () => {
    const rejected: string[] = [];
    const book = new LedgerBook(store, new PostgresSnapshotStore(db.pool), {
      observer: { snapshotRejected: (_stream, revision, reason) => rejected.push(`${revision}: ${reason}`) },
    });
    const { ledger, truth } = await ledgerWithCorruptedSnapshot(book);

    // The loader folds the events instead: the money that is not there cannot be reserved.
    await expect(book.post(ledger, { type: 'ReserveFunds', reservationId: 'po-over', purpose: 'payout', amount: 900_000, at: at() })).rejects.toMatchObject({
      code: 'insufficient_balance',
    });
    expect(await book.current(ledger)).toEqual(truth);
    expect(rejected).toEqual([expect.stringContaining(`${SNAPSHOT_REVISION}: its digest does not match its state`)]);
    // It was discarded; the next command writes a good one.
    expect(await new PostgresSnapshotStore(db.pool).load(ledgerStreamName(ledger))).toBeNull();
    await book.post(ledger, { type: 'ReserveFunds', reservationId: 'po-ok', purpose: 'payout', amount: 500_000, at: at() });
    expect((await new PostgresSnapshotStore(db.pool).load(ledgerStreamName(ledger)))?.revision).toBe(BigInt(LEDGER_SNAPSHOT_EVERY + 20));
    await projectLedgers();
    const clean = await verifyLedgers(db.pool, store);
    expect(clean.problems).toEqual([]);
    expect(clean.snapshotsChecked).toBe(1);
  });

  it('ledger:verify re-folds every stored snapshot and reports one whose balances are wrong but sum to zero', async () => {
    const book = new LedgerBook(store, new PostgresSnapshotStore(db.pool));
    const { ledger } = await ledgerWithCorruptedSnapshot(book);
    await projectLedgers();
    const report = await verifyLedgers(db.pool, store);
    // From one read of the log in log order (ledger:verify on PostgreSQL), the same.
    expect((await verifyLedgersInLogOrder(db.pool, store)).problems).toEqual(report.problems);
    expect(report.problems).toEqual([
      {
        ledger: ledgerStreamName(ledger),
        kind: 'snapshot_differs',
        detail: expect.stringContaining(`snapshot at revision ${SNAPSHOT_REVISION} fails its checks: its digest does not match`),
      },
      {
        ledger: ledgerStreamName(ledger),
        kind: 'snapshot_differs',
        detail: expect.stringMatching(/available: log says 500000, snapshot says 1500000; fees: log says 15000, snapshot says -985000$/),
      },
    ]);
    expect(report.snapshotsChecked).toBe(2);
    await book.current(ledger); // the loader discards it
  });

  it('a snapshot ahead of its stream (the store restored from an older backup) is ignored and reported', async () => {
    const rejected: string[] = [];
    const book = new LedgerBook(store, new PostgresSnapshotStore(db.pool), {
      observer: { snapshotRejected: (_stream, _revision, reason) => rejected.push(reason) },
    });
    const ledger: LedgerId = { accountId: randomUUID(), mode: 'test' };
    await ledgerWithBookSnapshot(book, ledger, [500, 5], 0);
    await db.pool.query('UPDATE aggregate_snapshots SET revision = 10000 WHERE stream_name = $1', [ledgerStreamName(ledger)]);
    await projectLedgers();
    const report = await verifyLedgers(db.pool, store);
    expect((await verifyLedgersInLogOrder(db.pool, store)).problems).toEqual(report.problems);
    expect(report.problems).toEqual([
      {
        ledger: ledgerStreamName(ledger),
        kind: 'snapshot_differs',
        detail: `snapshot at revision 10000, but the stream ends at revision ${LEDGER_SNAPSHOT_EVERY - 1}`,
      },
    ]);
    expect(await book.current(ledger)).toEqual(foldLedger(await entriesOf(ledger)));
    expect(rejected).toEqual([expect.stringContaining('the stream has no entry at revision 10000')]);
  });

  it("a ledger longer than the window of recent causes: its snapshot's window is compared with the one the log gives, and a cause changed in it is reported", async () => {
    const { ledger, ofThisLedger } = await ledgerLongerThanItsWindow();
    expect(ofThisLedger((await verifyLedgers(db.pool, store)).problems)).toEqual([]);
    expect(ofThisLedger((await verifyLedgersInLogOrder(db.pool, store)).problems)).toEqual([]);

    // One cause of the stored window replaced (the oldest chunk's first): the digest no longer matches, and the windows differ.
    const updated = await db.pool.query(
      `UPDATE aggregate_snapshots SET state = jsonb_set(state, '{state,recentCauses,0,0}', '"payment:forged"') WHERE stream_name = $1`,
      [ledgerStreamName(ledger)],
    );
    expect(updated.rowCount).toBe(1);
    const report = await verifyLedgers(db.pool, store);
    expect(ofThisLedger((await verifyLedgersInLogOrder(db.pool, store)).problems)).toEqual(ofThisLedger(report.problems));
    expect(ofThisLedger(report.problems)).toEqual([
      { ledger: ledgerStreamName(ledger), kind: 'snapshot_differs', detail: expect.stringContaining('fails its checks: its digest does not match') },
      {
        ledger: ledgerStreamName(ledger),
        kind: 'snapshot_differs',
        detail: expect.stringMatching(/differs from the ledger re-folded from its stream: recentCauses differ$/),
      },
    ]);
  });

  it("a log whose entries around a snapshot's revision are out of order is reported, not a crash, by the replay in log order", async () => {
    const { ledger, entries, ofThisLedger } = await ledgerLongerThanItsWindow();
    // The snapshot's revision (2,499) and the one before it swap places: the log meets 2,499, then 2,498.
    const move = (from: number, to: number) =>
      db.pool.query('UPDATE events SET stream_revision = $3 WHERE stream_name = $1 AND stream_revision = $2', [ledgerStreamName(ledger), from, to]);
    expect([(await move(entries - 1, -1)).rowCount, (await move(entries - 2, entries - 1)).rowCount, (await move(-1, entries - 2)).rowCount]).toEqual([
      1, 1, 1,
    ]);
    expect(ofThisLedger((await verifyLedgersInLogOrder(db.pool, store)).problems).map((p) => p.kind)).toEqual([
      'revision_gap',
      'snapshot_differs',
      'snapshot_differs',
      'revision_gap',
      // The read model holds the entries as they were projected, before the log was changed.
      'entries_differ',
    ]);
  });

  it("a cause changed in the log within a snapshot's window is reported against the stored window, by both replays", async () => {
    const { ledger, ofThisLedger } = await ledgerLongerThanItsWindow();
    // Entry 1,000 is within the window (entries 448 to 2,499); its cause is made one no other entry has.
    const changed = await db.pool.query(
      `UPDATE events SET data = jsonb_set(data, '{cause}', '"payment:changed-in-the-log"') WHERE stream_name = $1 AND stream_revision = 1000`,
      [ledgerStreamName(ledger)],
    );
    expect(changed.rowCount).toBe(1);
    const report = await verifyLedgers(db.pool, store);
    expect(ofThisLedger((await verifyLedgersInLogOrder(db.pool, store)).problems)).toEqual(ofThisLedger(report.problems));
    expect(ofThisLedger(report.problems)).toEqual([
      {
        ledger: ledgerStreamName(ledger),
        kind: 'snapshot_differs',
        detail: expect.stringMatching(/differs from the ledger re-folded from its stream: recentCauses differ$/),
      },
      // The read model still has the cause as projected.
      {
        ledger: ledgerStreamName(ledger),
        kind: 'entries_differ',
        detail: expect.stringMatching(/^entry at revision 1000: log gives .*"payment:changed-in-the-log".*, read model has .*"payment:inv-1000"/),
      },
    ]);
  });
});
