/**
 * The same cause never posts twice, however old, without the event store's help.
 *
 * LedgerBook runs on the in-memory implementation of the event store port that
 * checks event ids only at the expected revision, as EventStoreDB does: an entry id
 * already stored, appended again at the end of the stream, would be stored a second
 * time. So these tests pass only if the book itself recognises a cause older than
 * the window of recent causes (the state's window, then the cause index, then the
 * stream).
 */
import { Refusal } from '#domain';
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { entriesBeforeWindow, foldLedger, hasRecentCause, LedgerEvent, LedgerId, ledgerStreamName, RECENT_CAUSES_KEPT } from '#ledger';
import { LedgerCommand } from '#ledger';
import { LedgerBook, LedgerCauseIndex, LedgerRequest } from '#payments/ledger';
import { LongRunResolver, longRuns } from '../support/ledger-long-runs';
import { expectAndApply, newModel, Outcome } from '../support/ledger-model';
import { InMemoryEventStore } from '../support/in-memory-event-store';
import { appendLedgerHistory, freshPayments } from '../support/ledger-history';
import { fastCheckSeed } from '../support/test-seed';
import { InMemorySnapshotStore } from '../support/in-memory-snapshot-store';

/** Well past the window (it keeps at least RECENT_CAUSES_KEPT causes, in chunks of 64). */
const PAST_THE_WINDOW = RECENT_CAUSES_KEPT + 150;

let clock = Date.parse('2026-03-01T00:00:00Z');
const at = () => new Date((clock += 1000)).toISOString();

/**
 * A cause index over the stream itself that holds only the first entries of each
 * ledger (up to `completeThrough`), as the ledger read model does while it lags.
 */
class LaggingCauseIndex implements LedgerCauseIndex {
  /** Revisions held: 0..completeThrough (-1: none; Infinity: all). */
  completeThrough = -1;
  /** Instead: the index trails the log by this many entries. */
  behindBy: number | null = null;
  lookups = 0;
  constructor(private readonly store: InMemoryEventStore) {}
  async find(ledger: LedgerId, cause: string) {
    this.lookups++;
    const events = await this.store.readStream(ledgerStreamName(ledger)).catch(() => []);
    const count =
      this.behindBy !== null ? Math.max(0, events.length - this.behindBy) : Number.isFinite(this.completeThrough) ? this.completeThrough + 1 : events.length;
    const held = events.slice(0, count);
    const found = held.find((e) => (e.data as { cause: string }).cause === cause);
    return { revision: found ? found.revision : null, completeThrough: held.length > 0 ? held[held.length - 1]!.revision : -1n };
  }
}

function setUp() {
  const store = new InMemoryEventStore({ eventIds: 'checked_at_expected_revision' });
  const causes = new LaggingCauseIndex(store);
  const lookedUp: { found: boolean; read: number }[] = [];
  const book = new LedgerBook(store, new InMemorySnapshotStore(), {
    causes,
    observer: { causeLookedUp: (_stream, found, read) => lookedUp.push({ found, read }) },
  });
  return { store, causes, book, lookedUp };
}

async function entriesOf(store: InMemoryEventStore, ledger: LedgerId): Promise<LedgerEvent[]> {
  return (await store.readStream(ledgerStreamName(ledger))).map((e) => ({ type: 'LedgerEntryPosted', data: e.data }) as LedgerEvent);
}

/**
 * `n` payments of fresh invoices straight to available: the entries the book would
 * post, appended in a few appends (thousands of posts would cost seconds per test;
 * posting past the window through the book is what the long runs below do).
 */
async function fill(store: InMemoryEventStore, ledger: LedgerId, n: number): Promise<void> {
  await appendLedgerHistory(store, ledger, freshPayments(`fill-${randomUUID()}`, n, at), await entriesOf(store, ledger));
}

describe('LedgerBook on a store that checks event ids only at the expected revision (as EventStoreDB)', () => {
  it('a payment replayed after its hold was released and the window moved on posts nothing', async () => {
    const { store, book } = setUp();
    const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
    const paidAt = at();
    const payment: LedgerRequest = { type: 'RecordPayment', invoiceId: 'inv-old', netAmount: 97_000, feeAmount: 3_000, releaseAt: paidAt, at: paidAt };
    await book.post(ledger, payment);
    await book.post(ledger, { type: 'ReleaseHold', invoiceId: 'inv-old', at: at() });
    await fill(store, ledger, PAST_THE_WINDOW);
    const before = await book.current(ledger);
    expect(hasRecentCause(before, 'payment:inv-old') || hasRecentCause(before, 'hold_release:inv-old')).toBe(false);

    // payments_to_ledger replayed from its checkpoint zero: the same InvoicePaid again.
    const replayed = await book.post(ledger, payment);
    expect(replayed.entry).toBeNull();
    const again = await book.post(ledger, { type: 'ReleaseHold', invoiceId: 'inv-old', at: at() }).catch((e: unknown) => e);
    // The release is a repeat too (the hold is closed and the log says it was released).
    expect(again).toMatchObject({ entry: null });

    const entries = await entriesOf(store, ledger);
    expect(entries).toHaveLength(2 + PAST_THE_WINDOW);
    expect(foldLedger(entries)).toEqual(before);
    expect((await book.current(ledger)).balances).toEqual(before.balances);
  });

  it('a reservation retried after it was settled, and its settle replayed, post nothing; its release stays impossible', async () => {
    const { store, book } = setUp();
    const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
    await book.post(ledger, { type: 'RecordPayment', invoiceId: 'inv-1', netAmount: 500_000, feeAmount: 0, releaseAt: null, at: at() });
    const reserve = { type: 'ReserveFunds' as const, reservationId: 'rf_old', purpose: 'refund' as const, amount: 200_000, at: at() };
    expect(await book.reserve(ledger, reserve)).toEqual({ outcome: 'reserved' });
    await book.post(ledger, { type: 'SettleReservation', reservationId: 'rf_old', at: at() });
    await fill(store, ledger, PAST_THE_WINDOW);
    const before = await book.current(ledger);

    // The refund flow retried (recovery, a replayed process manager): the first answer stands.
    expect(await book.reserve(ledger, { ...reserve, at: at() })).toEqual({ outcome: 'reserved' });
    expect((await book.post(ledger, { type: 'SettleReservation', reservationId: 'rf_old', at: at() })).entry).toBeNull();
    await expect(book.post(ledger, { type: 'ReleaseReservation', reservationId: 'rf_old', at: at() })).rejects.toMatchObject({
      code: 'reservation_not_found',
    });

    const entries = await entriesOf(store, ledger);
    expect(entries).toHaveLength(3 + PAST_THE_WINDOW);
    expect(entries.filter((e) => e.data.cause === 'reserve:rf_old')).toHaveLength(1);
    expect((await book.current(ledger)).balances).toEqual(before.balances);
  });

  it('a reservation refused long ago stays refused for its retry, with the same reason', async () => {
    const { store, book } = setUp();
    const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
    const reserve = { type: 'ReserveFunds' as const, reservationId: 'po_9', purpose: 'payout' as const, amount: 1_000_000, at: at() };
    expect(await book.reserve(ledger, reserve)).toEqual({ outcome: 'refused', refusal: 'insufficient_balance' });
    await fill(store, ledger, PAST_THE_WINDOW); // now there is money enough
    expect(await book.reserve(ledger, { ...reserve, at: at() })).toEqual({ outcome: 'refused', refusal: 'insufficient_balance' });
    expect((await entriesOf(store, ledger)).filter((e) => e.data.cause === 'reserve:po_9')).toHaveLength(1);
  });

  it('exact however far the cause index lags: what it does not hold yet is read from the stream', async () => {
    const { store, causes, book, lookedUp } = setUp();
    const ledger: LedgerId = { accountId: randomUUID(), mode: 'test' };
    const payments: LedgerRequest[] = Array.from({ length: 40 }, (_, i) => ({
      type: 'RecordPayment',
      invoiceId: `early-${i}`,
      netAmount: 1_000 + i,
      feeAmount: 10,
      releaseAt: null,
      at: at(),
    }));
    for (const p of payments) await book.post(ledger, p);
    await fill(store, ledger, PAST_THE_WINDOW);
    const windowStart = entriesBeforeWindow(await book.current(ledger));
    expect(windowStart).toBeGreaterThan(40);

    for (const completeThrough of [-1, 0, 17, 39, windowStart - 1, Infinity]) {
      causes.completeThrough = completeThrough;
      lookedUp.length = 0;
      for (const p of payments) expect((await book.post(ledger, { ...p, at: at() })).entry).toBeNull();
      expect(lookedUp.every((l) => l.found)).toBe(true);
      // What the index held was not read from the stream; the rest was.
      const held = Number.isFinite(completeThrough) ? completeThrough + 1 : windowStart;
      expect(lookedUp.map((l) => l.read > 0)).toEqual(payments.map((_, i) => i >= held));
    }
    // A new cause is looked up too, and posts once.
    causes.completeThrough = 10;
    lookedUp.length = 0;
    const fresh: LedgerRequest = { type: 'RecordPayment', invoiceId: 'late', netAmount: 5, feeAmount: 0, releaseAt: null, at: at() };
    expect((await book.post(ledger, fresh)).entry).not.toBeNull();
    expect(lookedUp).toEqual([{ found: false, read: windowStart - 11 }]);
    expect((await book.post(ledger, fresh)).entry).toBeNull(); // now in the window
    expect(await entriesOf(store, ledger)).toHaveLength(40 + PAST_THE_WINDOW + 1);
  });
});

describe('LedgerBook across the window: long random runs against the independent model', () => {
  /**
   * Thousands of commands (test/support/ledger-long-runs.ts: fresh ids, closes,
   * unknown ids, retries of any age) through LedgerBook on the store that checks
   * event ids only at the expected revision, with a cause index that trails the log
   * by a random number of entries. Every answer is the model's; the log holds each
   * cause once and folds into the book's state. One run by default (a few seconds;
   * LEDGER_BOOK_LONG_RUNS for more); the seed is printed and TEST_SEED replays it.
   */
  it("every answer is the model's, whatever the age of a retry and the lag of the index", async () => {
    await fc.assert(
      // 3,200 commands post some 2,400 entries: past the window, with old retries coming back.
      fc.asyncProperty(longRuns(3_200, 3_600), fc.nat({ max: 3_000 }), async (plan, behindBy) => {
        const { store, causes, book, lookedUp } = setUp();
        causes.behindBy = behindBy;
        const ledger: LedgerId = { accountId: randomUUID(), mode: 'live' };
        const resolver = new LongRunResolver();
        const model = newModel();
        const mismatches: string[] = [];
        let oldRetries = 0;
        const posted: LedgerRequest[] = [];
        const issue = async (request: LedgerRequest, retried: boolean, step: string) => {
          const lookupsBefore = lookedUp.length;
          let outcome: Outcome;
          try {
            outcome = (await book.post(ledger, request)).entry === null ? 'repeat' : 'posted';
          } catch (error) {
            if (!(error instanceof Refusal)) throw error;
            outcome = error.code;
          }
          const expected = expectAndApply(model, { ...request, entryId: '' } as LedgerCommand);
          if (outcome !== expected) mismatches.push(`${step}: ${JSON.stringify(request)} answered ${outcome}, the model expects ${expected}`);
          if (expected === 'posted') posted.push(request);
          if (retried && expected === 'repeat' && lookedUp.length > lookupsBefore) oldRetries++;
        };
        for (const [i, step] of plan.entries()) {
          const next = resolver.next(step, model);
          if (next === null) continue;
          await issue(next.request, next.retried, `step ${i + 1}`);
          if (mismatches.length > 5) break;
        }
        // Whatever the plan drew, the oldest posted commands come back once more, long
        // past the window: a plan may happen to retry only recent or refused commands
        // (seed fad7de4588d5253e did), and the old retry is what this test is about.
        for (const [i, request] of posted.slice(0, 3).entries()) {
          await issue({ ...request, at: resolver.history[resolver.history.length - 1]!.at } as LedgerRequest, true, `old retry ${i + 1}`);
        }
        expect(mismatches).toEqual([]);
        expect(oldRetries).toBeGreaterThan(0);
        const entries = await entriesOf(store, ledger);
        expect(entries.length).toBeGreaterThan(RECENT_CAUSES_KEPT + 100);
        expect(new Set(entries.map((e) => e.data.cause)).size).toBe(entries.length);
        const state = await book.current(ledger);
        expect(foldLedger(entries)).toEqual(state);
        expect(state.balances).toEqual(model.balances);
      }),
      // No shrinking: a plan of thousands of steps would take minutes to shrink; the seed replays it.
      { numRuns: Number(process.env.LEDGER_BOOK_LONG_RUNS ?? 1), seed: fastCheckSeed('LedgerBook long runs'), endOnFailure: true },
    );
    // About 5 s alone; the suite's process-level tests share the 2 cores and can slow it several-fold.
  }, 120_000);
});
