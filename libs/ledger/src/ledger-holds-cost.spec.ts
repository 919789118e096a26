/**
 * The cost of one ledger entry does not grow with the holds open: a merchant with a
 * 24-hour hold always has a day of payments open, and every command of its ledger
 * (deciding, checking the invariants, folding the entry) must not copy or sum them all.
 * Work is counted, not timed: the object slots one step builds that the state before
 * it did not hold (as invoice-refunds.spec.ts counts the refunds fold).
 */
import { foldLedger, evolve, LedgerCommand, LedgerEvent, LedgerState } from './ledger';
import { ledgerDecider } from './ledger-decider';
import { ledgerEntryId, LedgerId } from './ledger-id';

const LEDGER: LedgerId = { accountId: 'acc_cost', mode: 'live' };
const T0 = Date.parse('2026-11-30T10:00:00.000Z');
const at = (minutes: number): string => new Date(T0 + minutes * 60_000).toISOString();
const DAY = 24 * 60;
const invoice = (i: number): string => `inv_${String(i).padStart(6, '0')}`;

/** A ledger with `n` open holds of 1,000 kopecks and more, one due every minute from a day on. */
function withHolds(n: number): LedgerState {
  const events: LedgerEvent[] = Array.from({ length: n }, (_, i) => ({
    type: 'LedgerEntryPosted',
    data: {
      entryId: ledgerEntryId(LEDGER, `payment:${invoice(i)}`),
      kind: 'payment_recorded',
      cause: `payment:${invoice(i)}`,
      postings: [
        { account: 'acquiring_clearing', amount: -(1_000 + i) },
        { account: 'pending', amount: 1_000 + i },
      ],
      occurredAt: at(i / 100),
      hold: { invoiceId: invoice(i), amount: 1_000 + i, releaseAt: at(DAY + i) },
      invoiceId: invoice(i),
    },
  }));
  return foldLedger(events);
}

/** Every object reachable from a value. */
function reachable(value: unknown, seen = new Set<object>()): Set<object> {
  if (value === null || typeof value !== 'object' || seen.has(value)) return seen;
  seen.add(value);
  for (const v of Object.values(value)) reachable(v, seen);
  return seen;
}

/** The properties of the objects `after` holds and `before` does not. */
function slotsBuilt(before: unknown, after: unknown): number {
  const old = reachable(before);
  let slots = 0;
  for (const o of reachable(after)) if (!old.has(o)) slots += Object.keys(o).length;
  return slots;
}

/** What deciding the command (its invariants checked on every entry) and folding its entries (foldLedger, evolve) build. */
function workOf(command: (n: number) => LedgerCommand, n: number): number {
  const state = withHolds(n);
  const decided = ledgerDecider.decide(command(n), state);
  if (!Array.isArray(decided) || decided.length === 0) throw new Error(`${command(n).type} posted nothing: ${JSON.stringify(decided)}`);
  return slotsBuilt(state, decided) + slotsBuilt(state, foldLedger(decided, state)) + slotsBuilt(state, decided.reduce(evolve, state));
}

/**
 * 10,000 open holds cost an entry about what 100 do: an immutable path of the holds
 * (O(log n) nodes), not a record of every hold copied per entry (10,000 slots a copy,
 * three copies here, as spreading the record did). Measured: under 1,500 slots.
 */
function expectBounded(command: (n: number) => LedgerCommand): void {
  const small = workOf(command, 100);
  const large = workOf(command, 10_000);
  const what = command(100).type;
  expect({ what, small, large, bounded: large <= small + 2_000 }).toEqual({ what, small, large, bounded: true });
}

describe('ledger: the cost of an entry does not grow with the holds open', () => {
  it('posting a payment with a hold', () => {
    expectBounded(() => ({
      type: 'RecordPayment',
      invoiceId: 'inv_new',
      netAmount: 5_000,
      feeAmount: 100,
      releaseAt: at(2 * DAY),
      at: at(200),
      entryId: ledgerEntryId(LEDGER, 'payment:inv_new'),
      // On a ledger longer than the window of recent causes: the log's answer, as LedgerBook gives it.
      postedBeforeWindow: false,
    }));
  });

  it('releasing one hold', () => {
    expectBounded((n) => ({
      type: 'ReleaseHold',
      invoiceId: invoice(n - 1),
      at: at(DAY + n),
      entryId: ledgerEntryId(LEDGER, `hold_release:${invoice(n - 1)}`),
    }));
  });

  it('releasing the five due holds a reservation needs, the earliest first, in one decision', () => {
    const command = (n: number): LedgerCommand => ({ type: 'ReleaseDueHolds', ledger: LEDGER, amount: 5_000, at: at(DAY + n), entryId: 'unused' });
    expectBounded(command);
    const decided = ledgerDecider.decide(command(10_000), withHolds(10_000)) as LedgerEvent[];
    expect(decided.map((e) => [e.data.kind, e.data.cause, e.data.entryId])).toEqual(
      [0, 1, 2, 3, 4].map((i) => ['hold_released', `hold_release:${invoice(i)}`, ledgerEntryId(LEDGER, `hold_release:${invoice(i)}`)]),
    );
  });
});
