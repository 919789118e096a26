/**
 * A payout releases the due holds it needs in appends of at most RELEASES_PER_DECISION
 * (LedgerBook.releaseDueHolds), each decided on the ledger as the one before left it; if
 * every attempt loses to the hold-release worker it says so (DueHoldsRaceError, which
 * leaves the payout to its recovery) instead of answering "nothing released", on which
 * the reservation would be refused for good though the due holds cover it.
 */
import { randomUUID } from 'node:crypto';
import type { AppendResult, EventToAppend, ExpectedRevision } from '#event-store';
import { LedgerId, RELEASES_PER_DECISION } from '#ledger';
import { DueHoldsRaceError, LedgerBook } from '#payments/ledger';
import { InMemoryEventStore } from '../support/in-memory-event-store';
import { InMemorySnapshotStore } from '../support/in-memory-snapshot-store';

/** Counts the appends of several events; `worker`, when set, appends first (it wins the race) before each. */
class RacedStore extends InMemoryEventStore {
  worker: (() => Promise<void>) | null = null;
  releaseAppends: number[] = [];
  override async appendToStream(
    stream: string,
    events: readonly EventToAppend[],
    options: { expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    if (events.length > 1) {
      this.releaseAppends.push(events.length);
      const worker = this.worker;
      if (worker) {
        this.worker = null;
        await worker();
        this.worker = worker;
      }
    }
    return super.appendToStream(stream, events, options);
  }
}

const T0 = Date.parse('2026-03-01T00:00:00Z');
const ledger: LedgerId = { accountId: 'acc', mode: 'live' };

async function withDueHolds(store: RacedStore, holds: number): Promise<{ book: LedgerBook; now: string }> {
  const book = new LedgerBook(store, new InMemorySnapshotStore());
  for (let i = 0; i < holds; i++) {
    const at = new Date(T0 + i).toISOString();
    await book.post(ledger, {
      type: 'RecordPayment',
      invoiceId: randomUUID(),
      netAmount: 100,
      feeAmount: 0,
      releaseAt: new Date(T0 + 1_000 + i).toISOString(),
      at,
    });
  }
  return { book, now: new Date(T0 + 3_600_000).toISOString() };
}

describe('LedgerBook.releaseDueHolds', () => {
  it(`releases a backlog in appends of at most ${RELEASES_PER_DECISION}, as many as the amount needs`, async () => {
    const store = new RacedStore({ eventIds: 'unique_in_store' });
    const { book, now } = await withDueHolds(store, 450);
    expect(await book.releaseDueHolds(ledger, 440 * 100, now)).toBe(440);
    expect(store.releaseAppends).toEqual([RELEASES_PER_DECISION, RELEASES_PER_DECISION, 40]);
    const state = await book.current(ledger);
    expect({ open: state.holds.size, available: state.balances.available }).toEqual({ open: 10, available: 440 * 100 });
  });

  it('every attempt lost to the worker: DueHoldsRaceError, not "nothing released"', async () => {
    const store = new RacedStore({ eventIds: 'unique_in_store' });
    const { book, now } = await withDueHolds(store, 150);
    // Before each append of releases the worker releases the earliest due hold (the first in the payout's decision).
    store.worker = async () => {
      const [first] = (await book.current(ledger)).holds.dueBy(Date.parse(now));
      if (first) await book.post(ledger, { type: 'ReleaseHold', invoiceId: first[0], at: now });
    };
    await expect(book.releaseDueHolds(ledger, 150 * 100, now)).rejects.toThrow(DueHoldsRaceError);
  });
});
