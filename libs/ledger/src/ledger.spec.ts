/**
 * Example tests of the ledger decider, given/when/then:
 *
 *   given(past entries).when(command).then(entries it posts)
 *                                    .thenFails(error code)
 *                                    .thenNothing()      // an idempotent repeat: []
 *
 * The state is always built by folding the given entries (foldLedger) and the
 * command is decided by `ledgerDecider`, i.e. with the invariant checks on.
 */
import { Refusal } from './refusal';
import fc from 'fast-check';
import * as ledgerModule from './ledger';
import {
  CauseHistoryMissingError,
  causeOf,
  entriesBeforeWindow,
  entryViolations,
  evolve,
  foldLedger,
  hasRecentCause,
  holdsToRelease,
  initialLedgerState,
  LEDGER_ACCOUNTS,
  LedgerCommand,
  LedgerError,
  LedgerEvent,
  LedgerEntryPostedData,
  LedgerState,
  needsCauseLookup,
  Posting,
  PayoutReservationRules,
  RECENT_CAUSES_KEPT,
  RECENT_PAYOUT_WINDOW_MS,
  ReservationRefusal,
  sameMoneyDecided,
  ReservationPurpose,
  stateViolations,
} from './ledger';
import { OpenHolds } from './open-holds';
import { ledgerDecider, LedgerInvariantError } from './ledger-decider';
import { LedgerId, ledgerEntryId } from './ledger-id';
import { givenWhenThen } from '../../domain/src/testing/given-when-then';

// ---------------------------------------------------------------------------------
// Fixtures

const LEDGER: LedgerId = { accountId: 'acc_7f3e', mode: 'test' };
const T0 = Date.parse('2025-03-01T10:00:00.000Z');
/** The gateway clock `minutes` after T0, ISO. */
const at = (minutes = 0): string => new Date(T0 + minutes * 60_000).toISOString();
const HOUR = 60;
const DAY = 24 * HOUR;

const idOf = (cause: string): string => ledgerEntryId(LEDGER, cause);

// Commands, with the entry id derived from the cause exactly as LedgerBook does.
const recordPayment = (invoiceId: string, netAmount: number, feeAmount: number, releaseAt: string | null, when = at()): LedgerCommand => ({
  type: 'RecordPayment',
  invoiceId,
  netAmount,
  feeAmount,
  releaseAt,
  at: when,
  entryId: idOf(`payment:${invoiceId}`),
});
const releaseHold = (invoiceId: string, when = at()): LedgerCommand => ({
  type: 'ReleaseHold',
  invoiceId,
  at: when,
  entryId: idOf(`hold_release:${invoiceId}`),
});
const reserveFunds = (reservationId: string, purpose: ReservationPurpose, amount: number, when = at()): LedgerCommand => ({
  type: 'ReserveFunds',
  reservationId,
  purpose,
  amount,
  at: when,
  entryId: idOf(`reserve:${reservationId}`),
});
const settleReservation = (reservationId: string, feeAmount?: number, when = at()): LedgerCommand => ({
  type: 'SettleReservation',
  reservationId,
  ...(feeAmount === undefined ? {} : { feeAmount }),
  at: when,
  entryId: idOf(`settle:${reservationId}`),
});
const releaseReservation = (reservationId: string, when = at()): LedgerCommand => ({
  type: 'ReleaseReservation',
  reservationId,
  at: when,
  entryId: idOf(`release:${reservationId}`),
});

// Entries, written out by hand (the flows of the header comment of ledger.ts).
const entry = (
  kind: LedgerEntryPostedData['kind'],
  cause: string,
  postings: Posting[],
  when: string,
  extra: Partial<LedgerEntryPostedData> = {},
): LedgerEvent => ({
  type: 'LedgerEntryPosted',
  data: { entryId: idOf(cause), kind, cause, postings, occurredAt: when, ...extra },
});

/** A payment of net + fee whose net waits in pending until releaseAt. */
const paymentHeld = (invoiceId: string, net: number, fee: number, releaseAt: string, when = at()): LedgerEvent =>
  entry(
    'payment_recorded',
    `payment:${invoiceId}`,
    [
      { account: 'acquiring_clearing', amount: -(net + fee) },
      ...(net > 0 ? [{ account: 'pending' as const, amount: net }] : []),
      ...(fee > 0 ? [{ account: 'fees' as const, amount: fee }] : []),
    ],
    when,
    { hold: { invoiceId, amount: net, releaseAt }, invoiceId },
  );

/** A payment of net + fee whose net is available at once. */
const paymentAvailable = (invoiceId: string, net: number, fee: number, when = at()): LedgerEvent =>
  entry(
    'payment_recorded',
    `payment:${invoiceId}`,
    [
      { account: 'acquiring_clearing', amount: -(net + fee) },
      ...(net > 0 ? [{ account: 'available' as const, amount: net }] : []),
      ...(fee > 0 ? [{ account: 'fees' as const, amount: fee }] : []),
    ],
    when,
    { invoiceId },
  );

const holdReleased = (invoiceId: string, amount: number, when = at()): LedgerEvent =>
  entry(
    'hold_released',
    `hold_release:${invoiceId}`,
    [
      { account: 'pending', amount: -amount },
      { account: 'available', amount },
    ],
    when,
    { invoiceId },
  );

const fundsReserved = (id: string, purpose: ReservationPurpose, amount: number, when = at()): LedgerEvent =>
  entry(
    'funds_reserved',
    `reserve:${id}`,
    [
      { account: 'available', amount: -amount },
      { account: 'reserved', amount },
    ],
    when,
    { reservation: { id, purpose, amount } },
  );

const refundSettled = (id: string, amount: number, when = at()): LedgerEvent =>
  entry(
    'reservation_settled',
    `settle:${id}`,
    [
      { account: 'reserved', amount: -amount },
      { account: 'refunds_paid', amount },
    ],
    when,
    { reservation: { id, purpose: 'refund', amount } },
  );

const reservationReleased = (id: string, purpose: ReservationPurpose, amount: number, when = at()): LedgerEvent =>
  entry(
    'reservation_released',
    `release:${id}`,
    [
      { account: 'reserved', amount: -amount },
      { account: 'available', amount },
    ],
    when,
    { reservation: { id, purpose, amount } },
  );

// ---------------------------------------------------------------------------------
// given / when / then

const given = givenWhenThen(ledgerDecider, Refusal);

/** What `run` throws, or undefined. */
function thrownBy(run: () => unknown): unknown {
  try {
    run();
    return undefined;
  } catch (error) {
    return error;
  }
}

/** Folds events and returns the balances only, every account listed. */
const balancesAfter = (events: LedgerEvent[]) => foldLedger(events).balances;

// ---------------------------------------------------------------------------------

describe('ledger: payment recorded', () => {
  it('with a hold: clearing −(net + fee), pending +net, fees +fee, and the hold is recorded', () => {
    const releaseAt = at(3 * DAY);
    given([])
      .when(recordPayment('inv_1', 97_000, 3_000, releaseAt, at(5)))
      .then([
        entry(
          'payment_recorded',
          'payment:inv_1',
          [
            { account: 'acquiring_clearing', amount: -100_000 },
            { account: 'pending', amount: 97_000 },
            { account: 'fees', amount: 3_000 },
          ],
          at(5),
          { hold: { invoiceId: 'inv_1', amount: 97_000, releaseAt }, invoiceId: 'inv_1' },
        ),
      ]);
  });

  it('with a hold: the folded state holds the net amount in pending until releaseAt', () => {
    const state = foldLedger([paymentHeld('inv_1', 97_000, 3_000, at(3 * DAY))]);
    expect(state.balances).toEqual({
      pending: 97_000,
      available: 0,
      reserved: 0,
      acquiring_clearing: -100_000,
      fees: 3_000,
      refunds_paid: 0,
      payouts_sent: 0,
    });
    expect(state.holds.toRecord()).toEqual({ inv_1: { amount: 97_000, releaseAt: at(3 * DAY) } });
    expect(hasRecentCause(state, 'payment:inv_1')).toBe(true);
    expect(hasRecentCause(state, 'payment:inv_2')).toBe(false);
    expect(state.entries).toBe(1);
  });

  it('without a hold (releaseAt null): straight to available, no hold recorded', () => {
    given([])
      .when(recordPayment('inv_1', 97_000, 3_000, null))
      .then([
        entry(
          'payment_recorded',
          'payment:inv_1',
          [
            { account: 'acquiring_clearing', amount: -100_000 },
            { account: 'available', amount: 97_000 },
            { account: 'fees', amount: 3_000 },
          ],
          at(),
          { invoiceId: 'inv_1' },
        ),
      ]);
    const state = foldLedger([paymentAvailable('inv_1', 97_000, 3_000)]);
    expect(state.holds.toRecord()).toEqual({});
    expect(state.balances.available).toBe(97_000);
    expect(state.balances.pending).toBe(0);
  });

  it('with a zero fee: no fees posting', () => {
    given([])
      .when(recordPayment('inv_1', 50_000, 0, at(DAY)))
      .then([
        entry(
          'payment_recorded',
          'payment:inv_1',
          [
            { account: 'acquiring_clearing', amount: -50_000 },
            { account: 'pending', amount: 50_000 },
          ],
          at(),
          { hold: { invoiceId: 'inv_1', amount: 50_000, releaseAt: at(DAY) }, invoiceId: 'inv_1' },
        ),
      ]);
  });

  it('with a zero net and a positive fee: only clearing and fees, and no hold (nothing to release later)', () => {
    given([])
      .when(recordPayment('inv_1', 0, 1_500, at(DAY)))
      .then([
        entry(
          'payment_recorded',
          'payment:inv_1',
          [
            { account: 'acquiring_clearing', amount: -1_500 },
            { account: 'fees', amount: 1_500 },
          ],
          at(),
          { hold: undefined, invoiceId: 'inv_1' },
        ),
      ]);
  });

  it('with a zero net, no hold: only clearing and fees', () => {
    given([])
      .when(recordPayment('inv_1', 0, 1_500, null))
      .then([
        entry(
          'payment_recorded',
          'payment:inv_1',
          [
            { account: 'acquiring_clearing', amount: -1_500 },
            { account: 'fees', amount: 1_500 },
          ],
          at(),
          { invoiceId: 'inv_1' },
        ),
      ]);
  });

  it.each([
    ['a negative net', -1, 100],
    ['a negative fee', 100, -1],
    ['a fractional net', 100.5, 0],
    ['a fractional fee', 100, 0.25],
    ['NaN', Number.NaN, 0],
    ['Infinity', Number.POSITIVE_INFINITY, 0],
    ['a net beyond the safe integers', 2 ** 53, 0],
    ['both zero', 0, 0],
  ])('refuses %s with invalid_amount', (_label, net, fee) => {
    given([])
      .when(recordPayment('inv_1', net, fee, at(DAY)))
      .thenFails('invalid_amount');
    given([])
      .when(recordPayment('inv_1', net, fee, null))
      .thenFails('invalid_amount');
  });

  it('refuses a string amount with invalid_amount (JSON input is never trusted)', () => {
    const command = { ...recordPayment('inv_1', 1, 0, null), netAmount: '100' as unknown as number };
    given([]).when(command).thenFails('invalid_amount');
  });

  it('a repeat of the same invoice posts nothing (idempotent), whatever the amounts', () => {
    const history = [paymentHeld('inv_1', 97_000, 3_000, at(3 * DAY))];
    given(history)
      .when(recordPayment('inv_1', 97_000, 3_000, at(3 * DAY), at(10)))
      .thenNothing();
    given(history)
      .when(recordPayment('inv_1', 1, 1, null, at(10)))
      .thenNothing();
    // A repeat is recognised before the amounts are checked.
    given(history)
      .when(recordPayment('inv_1', -5, 0, null, at(10)))
      .thenNothing();
  });

  it('a repeat of a payment without a hold posts nothing too', () => {
    given([paymentAvailable('inv_1', 97_000, 3_000)])
      .when(recordPayment('inv_1', 97_000, 3_000, null, at(10)))
      .thenNothing();
  });

  it('a repeat after its hold was released posts nothing', () => {
    given([paymentHeld('inv_1', 97_000, 3_000, at(DAY)), holdReleased('inv_1', 97_000, at(DAY))])
      .when(recordPayment('inv_1', 97_000, 3_000, at(DAY), at(2 * DAY)))
      .thenNothing();
  });

  it('another invoice is another payment', () => {
    given([paymentAvailable('inv_1', 97_000, 3_000)])
      .when(recordPayment('inv_2', 10_000, 0, null))
      .then([paymentAvailable('inv_2', 10_000, 0)]);
  });
});

describe('ledger: hold released', () => {
  const history = [paymentHeld('inv_1', 97_000, 3_000, at(3 * DAY))];

  it('before releaseAt: hold_not_due', () => {
    given(history)
      .when(releaseHold('inv_1', at(3 * DAY - 1)))
      .thenFails('hold_not_due');
    given(history)
      .when(releaseHold('inv_1', new Date(Date.parse(at(3 * DAY)) - 1).toISOString()))
      .thenFails('hold_not_due');
  });

  it('exactly at releaseAt: pending → available', () => {
    given(history)
      .when(releaseHold('inv_1', at(3 * DAY)))
      .then([
        entry(
          'hold_released',
          'hold_release:inv_1',
          [
            { account: 'pending', amount: -97_000 },
            { account: 'available', amount: 97_000 },
          ],
          at(3 * DAY),
          { invoiceId: 'inv_1' },
        ),
      ]);
  });

  it('after releaseAt: pending → available, and the hold is closed', () => {
    given(history)
      .when(releaseHold('inv_1', at(5 * DAY)))
      .then([holdReleased('inv_1', 97_000, at(5 * DAY))]);
    const state = foldLedger([...history, holdReleased('inv_1', 97_000, at(5 * DAY))]);
    expect(state.holds.toRecord()).toEqual({});
    expect(state.balances.pending).toBe(0);
    expect(state.balances.available).toBe(97_000);
  });

  it('compares instants, not strings (an offset releaseAt)', () => {
    // 13:00+03:00 is 10:00Z: due at T0, not before.
    const held = [paymentHeld('inv_1', 500, 0, '2025-03-01T13:00:00+03:00')];
    given(held)
      .when(releaseHold('inv_1', at(-1)))
      .thenFails('hold_not_due');
    given(held)
      .when(releaseHold('inv_1', at(0)))
      .then([holdReleased('inv_1', 500, at(0))]);
  });

  it('dates its entry as toISOString writes the instant, whatever form `at` came in (an offset, microseconds)', () => {
    const decided = ledgerDecider.decide(recordPayment('inv_1', 500, 0, null, '2025-03-01T13:00:00.000700+03:00'), initialLedgerState());
    expect((decided as LedgerEvent[])[0]!.data.occurredAt).toBe('2025-03-01T10:00:00.000Z');
  });

  it('after a zero-net payment with a hold date: hold_not_found (no hold was opened)', () => {
    const decided = ledgerDecider.decide(recordPayment('inv_1', 0, 1_500, at(DAY)), initialLedgerState());
    expect(Array.isArray(decided)).toBe(true);
    given(decided as LedgerEvent[])
      .when(releaseHold('inv_1', at(DAY)))
      .thenFails('hold_not_found');
  });

  it('of an unknown invoice: hold_not_found', () => {
    given(history)
      .when(releaseHold('inv_unknown', at(5 * DAY)))
      .thenFails('hold_not_found');
    given([])
      .when(releaseHold('inv_1', at(5 * DAY)))
      .thenFails('hold_not_found');
  });

  it('of a payment recorded without a hold: hold_not_found', () => {
    given([paymentAvailable('inv_1', 97_000, 3_000)])
      .when(releaseHold('inv_1', at(5 * DAY)))
      .thenFails('hold_not_found');
  });

  it('a repeat posts nothing', () => {
    given([...history, holdReleased('inv_1', 97_000, at(3 * DAY))])
      .when(releaseHold('inv_1', at(4 * DAY)))
      .thenNothing();
  });
});

describe('ledger: the holds a reservation releases first (holdsToRelease)', () => {
  const history = [
    paymentHeld('inv_late', 40_000, 0, at(3 * DAY)),
    paymentHeld('inv_a', 30_000, 0, at(2 * DAY)),
    paymentHeld('inv_b', 20_000, 0, at(2 * DAY)),
    paymentHeld('inv_early', 10_000, 0, at(DAY)),
    paymentAvailable('inv_paid', 5_000, 0),
  ];
  const state = foldLedger(history);

  it('none while available covers the amount, or before any hold is due', () => {
    expect(holdsToRelease(state, at(3 * DAY), 5_000)).toEqual([]);
    expect(holdsToRelease(state, at(DAY - 1), 100_000)).toEqual([]);
  });

  it('from exactly releaseAt, the earliest due first (then by invoice), until available covers the amount', () => {
    expect(holdsToRelease(state, at(DAY), 100_000)).toEqual(['inv_early']);
    expect(holdsToRelease(state, at(2 * DAY), 15_000)).toEqual(['inv_early']);
    expect(holdsToRelease(state, at(2 * DAY), 15_001)).toEqual(['inv_early', 'inv_a']);
    expect(holdsToRelease(state, at(2 * DAY), 100_000)).toEqual(['inv_early', 'inv_a', 'inv_b']);
    expect(holdsToRelease(state, at(3 * DAY), 100_000)).toEqual(['inv_early', 'inv_a', 'inv_b', 'inv_late']);
  });

  it('each one it names is released by ReleaseHold at that time, and a released hold is never named again', () => {
    let events = history;
    for (const invoiceId of holdsToRelease(state, at(2 * DAY), 100_000)) {
      const posted = ledgerDecider.decide(releaseHold(invoiceId, at(2 * DAY)), foldLedger(events));
      expect(Array.isArray(posted)).toBe(true);
      events = [...events, ...(posted as LedgerEvent[])];
    }
    expect(holdsToRelease(foldLedger(events), at(2 * DAY), 100_000)).toEqual([]);
    expect(foldLedger(events).balances).toMatchObject({ available: 65_000, pending: 40_000 });
  });

  const releaseDueHolds = (amount: number, when: string): LedgerCommand => ({
    type: 'ReleaseDueHolds',
    ledger: LEDGER,
    amount,
    at: when,
    entryId: idOf(`due_holds:${when}`),
  });

  it('ReleaseDueHolds posts those releases together, each the entry ReleaseHold posts, and nothing for a hold no longer open', () => {
    const one = (invoiceId: string) => ledgerDecider.decide(releaseHold(invoiceId, at(2 * DAY)), state) as LedgerEvent[];
    expect(ledgerDecider.decide(releaseDueHolds(15_001, at(2 * DAY)), state)).toEqual([...one('inv_early'), ...one('inv_a')]);
    expect(ledgerDecider.decide(releaseDueHolds(100_000, at(2 * DAY)), state)).toEqual([...one('inv_early'), ...one('inv_a'), ...one('inv_b')]);
    expect(ledgerDecider.decide(releaseDueHolds(5_000, at(3 * DAY)), state)).toEqual([]);
    // inv_early released meanwhile (by the worker): not released again, the next due are.
    const released = foldLedger(one('inv_early'), state);
    expect(ledgerDecider.decide(releaseDueHolds(15_001, at(2 * DAY)), released)).toEqual(one('inv_a'));
    expect(ledgerDecider.decide(releaseDueHolds(-1, at(2 * DAY)), state)).toMatchObject({ code: 'invalid_amount' });
  });
});

describe('ledger: open holds (OpenHolds)', () => {
  /** A ledger with `n` open holds, one due every minute from a day on. */
  const withHolds = (n: number): LedgerState =>
    foldLedger(Array.from({ length: n }, (_, i) => paymentHeld(`inv_${String(i).padStart(6, '0')}`, 1_000 + i, 0, at(DAY + i))));

  it('the holds still open, their total and the due order are those of the record folded without them', () => {
    let state = withHolds(1_000);
    const released = holdsToRelease(state, at(DAY + 999), 30_000);
    expect(released).toEqual(Array.from({ length: 30 }, (_, i) => `inv_${String(i).padStart(6, '0')}`));
    for (const invoiceId of released) state = evolve(state, (ledgerDecider.decide(releaseHold(invoiceId, at(DAY + 999)), state) as LedgerEvent[])[0]!);
    expect(state.holds.size).toBe(970);
    expect(state.holds.total).toBe(state.balances.pending);
    expect(stateViolations(state)).toEqual([]);
    expect(state.holds).toEqual(OpenHolds.fromRecord(state.holds.toRecord()));
    expect(holdsToRelease(state, at(DAY + 32), 1_000_000)).toEqual(['inv_000030', 'inv_000031', 'inv_000032']);
  });
});

describe('ledger: funds reserved', () => {
  const funded = [paymentAvailable('inv_1', 97_000, 3_000)];

  it('moves available → reserved and opens the reservation', () => {
    given(funded)
      .when(reserveFunds('rf_1', 'refund', 40_000, at(10)))
      .then([
        entry(
          'funds_reserved',
          'reserve:rf_1',
          [
            { account: 'available', amount: -40_000 },
            { account: 'reserved', amount: 40_000 },
          ],
          at(10),
          { reservation: { id: 'rf_1', purpose: 'refund', amount: 40_000 } },
        ),
      ]);
    const state = foldLedger([...funded, fundsReserved('rf_1', 'refund', 40_000, at(10))]);
    expect(state.reservations).toEqual({ rf_1: { purpose: 'refund', amount: 40_000 } });
    expect(state.balances.available).toBe(57_000);
    expect(state.balances.reserved).toBe(40_000);
  });

  it('exactly the available balance is allowed', () => {
    given(funded)
      .when(reserveFunds('po_1', 'payout', 97_000))
      .then([fundsReserved('po_1', 'payout', 97_000)]);
  });

  it('one kopeck more than available: insufficient_balance', () => {
    given(funded)
      .when(reserveFunds('po_1', 'payout', 97_001))
      .thenFails('insufficient_balance');
  });

  it('anything from an empty ledger: insufficient_balance', () => {
    given([])
      .when(reserveFunds('po_1', 'payout', 1))
      .thenFails('insufficient_balance');
  });

  it('pending money cannot be reserved', () => {
    const held = [paymentHeld('inv_1', 97_000, 3_000, at(3 * DAY))];
    given(held)
      .when(reserveFunds('rf_1', 'refund', 1))
      .thenFails('insufficient_balance');
    // Available 10 000 plus pending 97 000: only the 10 000 count.
    const mixed = [...held, paymentAvailable('inv_2', 10_000, 0)];
    given(mixed)
      .when(reserveFunds('rf_1', 'refund', 10_001))
      .thenFails('insufficient_balance');
    given(mixed)
      .when(reserveFunds('rf_1', 'refund', 10_000))
      .then([fundsReserved('rf_1', 'refund', 10_000)]);
  });

  it('reserved money cannot be reserved again', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 90_000)])
      .when(reserveFunds('rf_2', 'refund', 7_001))
      .thenFails('insufficient_balance');
  });

  it.each([
    ['zero', 0],
    ['negative', -100],
    ['fractional', 10.5],
    ['NaN', Number.NaN],
  ])('a %s amount: invalid_amount', (_label, amount) => {
    given(funded)
      .when(reserveFunds('rf_1', 'refund', amount))
      .thenFails('invalid_amount');
  });

  it('the same reservation id twice: the repeat of the same cause posts nothing', () => {
    const reserved = [...funded, fundsReserved('rf_1', 'refund', 40_000)];
    given(reserved)
      .when(reserveFunds('rf_1', 'refund', 40_000, at(10)))
      .thenNothing();
    // Even with other terms, and even with terms that could not be met.
    given(reserved)
      .when(reserveFunds('rf_1', 'payout', 1_000_000, at(10)))
      .thenNothing();
  });

  it('the same reservation id after it was settled or released posts nothing (the cause is spent)', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000), refundSettled('rf_1', 40_000)])
      .when(reserveFunds('rf_1', 'refund', 40_000))
      .thenNothing();
    given([...funded, fundsReserved('rf_1', 'refund', 40_000), reservationReleased('rf_1', 'refund', 40_000)])
      .when(reserveFunds('rf_1', 'refund', 40_000))
      .thenNothing();
  });
});

describe('ledger: reservation settled', () => {
  const funded = [paymentAvailable('inv_1', 97_000, 3_000)];

  it('a refund: reserved → refunds_paid', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000)])
      .when(settleReservation('rf_1', undefined, at(20)))
      .then([
        entry(
          'reservation_settled',
          'settle:rf_1',
          [
            { account: 'reserved', amount: -40_000 },
            { account: 'refunds_paid', amount: 40_000 },
          ],
          at(20),
          { reservation: { id: 'rf_1', purpose: 'refund', amount: 40_000 } },
        ),
      ]);
    const state = foldLedger([...funded, fundsReserved('rf_1', 'refund', 40_000), refundSettled('rf_1', 40_000)]);
    expect(state.reservations).toEqual({});
    expect(state.balances.reserved).toBe(0);
    expect(state.balances.refunds_paid).toBe(40_000);
    expect(state.balances.available).toBe(57_000);
  });

  it('a refund with an explicit zero fee is the same refund', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000)])
      .when(settleReservation('rf_1', 0))
      .then([refundSettled('rf_1', 40_000)]);
  });

  it('a payout with a fee: payouts_sent gets amount − fee, fees gets the fee', () => {
    given([...funded, fundsReserved('po_1', 'payout', 97_000)])
      .when(settleReservation('po_1', 1_500, at(30)))
      .then([
        entry(
          'reservation_settled',
          'settle:po_1',
          [
            { account: 'reserved', amount: -97_000 },
            { account: 'payouts_sent', amount: 95_500 },
            { account: 'fees', amount: 1_500 },
          ],
          at(30),
          { reservation: { id: 'po_1', purpose: 'payout', amount: 97_000 } },
        ),
      ]);
  });

  it('a payout without a fee: all of it to payouts_sent', () => {
    given([...funded, fundsReserved('po_1', 'payout', 97_000)])
      .when(settleReservation('po_1'))
      .then([
        entry(
          'reservation_settled',
          'settle:po_1',
          [
            { account: 'reserved', amount: -97_000 },
            { account: 'payouts_sent', amount: 97_000 },
          ],
          at(),
          { reservation: { id: 'po_1', purpose: 'payout', amount: 97_000 } },
        ),
      ]);
  });

  it('a payout whose fee is the whole amount: all of it to fees', () => {
    given([...funded, fundsReserved('po_1', 'payout', 1_000)])
      .when(settleReservation('po_1', 1_000))
      .then([
        entry(
          'reservation_settled',
          'settle:po_1',
          [
            { account: 'reserved', amount: -1_000 },
            { account: 'fees', amount: 1_000 },
          ],
          at(),
          { reservation: { id: 'po_1', purpose: 'payout', amount: 1_000 } },
        ),
      ]);
  });

  it('a fee on a refund reservation: invalid_amount', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000)])
      .when(settleReservation('rf_1', 1))
      .thenFails('invalid_amount');
  });

  it('a fee above the amount: invalid_amount', () => {
    given([...funded, fundsReserved('po_1', 'payout', 1_000)])
      .when(settleReservation('po_1', 1_001))
      .thenFails('invalid_amount');
  });

  it.each([
    ['negative', -1],
    ['fractional', 0.5],
    ['NaN', Number.NaN],
  ])('a %s fee: invalid_amount', (_label, fee) => {
    given([...funded, fundsReserved('po_1', 'payout', 1_000)])
      .when(settleReservation('po_1', fee))
      .thenFails('invalid_amount');
  });

  it('an unknown reservation: reservation_not_found', () => {
    given(funded).when(settleReservation('po_unknown')).thenFails('reservation_not_found');
    given([...funded, fundsReserved('po_1', 'payout', 1_000)])
      .when(settleReservation('po_2'))
      .thenFails('reservation_not_found');
  });

  it('settled twice: the second is a repeat of the cause and posts nothing', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000), refundSettled('rf_1', 40_000)])
      .when(settleReservation('rf_1', undefined, at(40)))
      .thenNothing();
  });
});

describe('ledger: reservation released', () => {
  const funded = [paymentAvailable('inv_1', 97_000, 3_000)];

  it('moves reserved back to available and closes the reservation', () => {
    given([...funded, fundsReserved('po_1', 'payout', 97_000)])
      .when(releaseReservation('po_1', at(50)))
      .then([
        entry(
          'reservation_released',
          'release:po_1',
          [
            { account: 'reserved', amount: -97_000 },
            { account: 'available', amount: 97_000 },
          ],
          at(50),
          { reservation: { id: 'po_1', purpose: 'payout', amount: 97_000 } },
        ),
      ]);
    const state = foldLedger([...funded, fundsReserved('po_1', 'payout', 97_000), reservationReleased('po_1', 'payout', 97_000)]);
    expect(state.reservations).toEqual({});
    expect(state.balances.available).toBe(97_000);
    expect(state.balances.reserved).toBe(0);
  });

  it('released money can be reserved again under a new id', () => {
    given([...funded, fundsReserved('po_1', 'payout', 97_000), reservationReleased('po_1', 'payout', 97_000)])
      .when(reserveFunds('po_2', 'payout', 97_000))
      .then([fundsReserved('po_2', 'payout', 97_000)]);
  });

  it('after a settle: reservation_not_found (never both)', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000), refundSettled('rf_1', 40_000)])
      .when(releaseReservation('rf_1'))
      .thenFails('reservation_not_found');
  });

  it('a settle after a release: reservation_not_found (never both)', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000), reservationReleased('rf_1', 'refund', 40_000)])
      .when(settleReservation('rf_1'))
      .thenFails('reservation_not_found');
  });

  it('released twice: the second is a repeat and posts nothing', () => {
    given([...funded, fundsReserved('rf_1', 'refund', 40_000), reservationReleased('rf_1', 'refund', 40_000)])
      .when(releaseReservation('rf_1'))
      .thenNothing();
  });

  it('an unknown reservation: reservation_not_found', () => {
    given(funded).when(releaseReservation('rf_unknown')).thenFails('reservation_not_found');
  });
});

describe('ledger: two decisions of one cause compared (sameMoneyDecided)', () => {
  const decided = (command: LedgerCommand, history: readonly LedgerEvent[] = []): LedgerEntryPostedData => {
    const decision = ledgerDecider.decide(command, foldLedger(history));
    if (!Array.isArray(decision) || decision.length !== 1) throw new Error(`expected one entry, got ${JSON.stringify(decision)}`);
    return decision[0]!.data;
  };
  const funded = [paymentAvailable('inv_f', 10_000, 0)];

  it('the same payment decided at two times agrees; another amount, fee or hold does not', () => {
    const first = decided(recordPayment('inv_1', 1_000, 30, null, at(1)));
    expect(sameMoneyDecided(first, decided(recordPayment('inv_1', 1_000, 30, null, at(5))))).toBe(true);
    expect(sameMoneyDecided(first, decided(recordPayment('inv_1', 1_500, 30, null, at(1))))).toBe(false);
    expect(sameMoneyDecided(first, decided(recordPayment('inv_1', 1_000, 31, null, at(1))))).toBe(false);
    expect(sameMoneyDecided(first, decided(recordPayment('inv_1', 1_000, 30, at(DAY), at(1))))).toBe(false);
  });

  it('a reservation reserved on one state and refused on another agrees; another amount does not', () => {
    const reserved = decided({ ...reserveFunds('r1', 'refund', 5_000), recordRefusal: true } as LedgerCommand, funded);
    const refused = decided({ ...reserveFunds('r1', 'refund', 5_000), recordRefusal: true } as LedgerCommand);
    expect([reserved.kind, refused.kind]).toEqual(['funds_reserved', 'reservation_refused']);
    expect(sameMoneyDecided(reserved, refused)).toBe(true);
    expect(sameMoneyDecided(reserved, decided(reserveFunds('r1', 'refund', 6_000), funded))).toBe(false);
  });

  it('entries of other causes or ids never agree', () => {
    const one = decided(recordPayment('inv_1', 1_000, 30, null));
    expect(sameMoneyDecided(one, decided(recordPayment('inv_2', 1_000, 30, null)))).toBe(false);
    expect(sameMoneyDecided(one, { ...one, entryId: 'another-id' })).toBe(false);
  });
});

describe('ledger: causes and entry ids', () => {
  it('causeOf names each command by what caused it', () => {
    expect(causeOf(recordPayment('i', 1, 0, null))).toBe('payment:i');
    expect(causeOf(releaseHold('i'))).toBe('hold_release:i');
    expect(causeOf(reserveFunds('r', 'refund', 1))).toBe('reserve:r');
    expect(causeOf(settleReservation('r'))).toBe('settle:r');
    expect(causeOf(releaseReservation('r'))).toBe('release:r');
  });

  it('an entry carries the command’s entry id and time, whatever they are', () => {
    const command = { ...recordPayment('inv_1', 10, 0, null, at(7)), entryId: 'caller-chosen-id' };
    const decision = ledgerDecider.decide(command, initialLedgerState()) as LedgerEvent[];
    expect(decision).toHaveLength(1);
    expect(decision[0]!.data.entryId).toBe('caller-chosen-id');
    expect(decision[0]!.data.occurredAt).toBe(at(7));
  });

  describe('the window of recent causes', () => {
    /** n entries that are not about inv_old, po_old or rf_old. */
    const filler = (n: number) => Array.from({ length: n }, (_, i) => paymentAvailable(`inv_fill_${i}`, 100, 1, at(10 + i)));
    /**
     * Well past the window: the state keeps *at least* the RECENT_CAUSES_KEPT most
     * recent causes (in chunks, so a few more), never all of them.
     */
    const PAST_THE_WINDOW = 2 * RECENT_CAUSES_KEPT;
    /** How many causes the state remembers, whatever the shape of the window. */
    const remembered = (state: LedgerState): number => (state.recentCauses as readonly unknown[]).flat(Infinity as 1).length;

    it('remembers at least the RECENT_CAUSES_KEPT most recent causes: within them a repeat posts nothing', () => {
      const history = [paymentAvailable('inv_old', 97_000, 3_000), ...filler(RECENT_CAUSES_KEPT - 1)];
      expect(hasRecentCause(foldLedger(history), 'payment:inv_old')).toBe(true);
      given(history)
        .when(recordPayment('inv_old', 97_000, 3_000, null, at(DAY)))
        .thenNothing();
    });

    it('does not grow with history: older causes are forgotten', () => {
      const long = foldLedger(filler(PAST_THE_WINDOW));
      const longer = foldLedger(filler(2 * PAST_THE_WINDOW));
      for (const state of [long, longer]) {
        expect(remembered(state)).toBeGreaterThanOrEqual(RECENT_CAUSES_KEPT);
        expect(remembered(state)).toBeLessThan(PAST_THE_WINDOW);
        expect(hasRecentCause(state, 'payment:inv_fill_0')).toBe(false);
        expect(hasRecentCause(state, `payment:inv_fill_${state.entries - 1}`)).toBe(true);
      }
      expect(longer.entries).toBe(2 * PAST_THE_WINDOW);
    });

    it("past the window the state cannot tell: the decision needs the log's answer, and follows it", () => {
      const original = paymentAvailable('inv_old', 97_000, 3_000);
      const state = foldLedger([original, ...filler(PAST_THE_WINDOW)]);
      expect(hasRecentCause(state, 'payment:inv_old')).toBe(false);
      expect(entriesBeforeWindow(state)).toBeGreaterThan(0);
      const retry = recordPayment('inv_old', 97_000, 3_000, null, at(DAY));
      expect(needsCauseLookup(retry, state)).toBe(true);

      // Without the answer nothing is decided (never a guess that could post twice)…
      expect(thrownBy(() => ledgerDecider.decide(retry, state))).toBeInstanceOf(CauseHistoryMissingError);
      // …the log says an older entry posted it: a repeat, whatever its age…
      given([original, ...filler(PAST_THE_WINDOW)])
        .when({ ...retry, postedBeforeWindow: true })
        .thenNothing();
      // …or that none did: a new cause, posted.
      const fresh = recordPayment('inv_new', 97_000, 3_000, null, at(DAY));
      expect(needsCauseLookup(fresh, state)).toBe(true);
      given([original, ...filler(PAST_THE_WINDOW)])
        .when({ ...fresh, postedBeforeWindow: false })
        .then([paymentAvailable('inv_new', 97_000, 3_000, at(DAY))]);
    });

    it('the state tells without the log: a recent cause, an open hold or reservation, a ledger the window holds whole', () => {
      const history = [
        paymentHeld('inv_held', 50_000, 1_000, at(30 * DAY)),
        paymentAvailable('inv_old', 97_000, 3_000),
        fundsReserved('rf_open', 'refund', 10_000),
      ];
      // The window holds the whole ledger: nothing older to ask about.
      const short = foldLedger(history);
      expect(entriesBeforeWindow(short)).toBe(0);
      expect(needsCauseLookup(recordPayment('inv_new', 1, 0, null), short)).toBe(false);

      const long = foldLedger([...history, ...filler(PAST_THE_WINDOW)]);
      expect(needsCauseLookup(recordPayment(`inv_fill_${PAST_THE_WINDOW - 1}`, 1, 0, null), long)).toBe(false); // recent
      expect(needsCauseLookup(recordPayment('inv_held', 50_000, 1_000, at(30 * DAY)), long)).toBe(false); // its hold is open: posted
      expect(needsCauseLookup(releaseHold('inv_held', at(31 * DAY)), long)).toBe(false); // its hold is open: not released yet
      expect(needsCauseLookup(reserveFunds('rf_open', 'refund', 10_000), long)).toBe(false); // open: reserved
      expect(needsCauseLookup(settleReservation('rf_open'), long)).toBe(false); // open: neither settled nor released
      expect(needsCauseLookup(releaseReservation('rf_open'), long)).toBe(false);
      // Only the log can tell for the others.
      expect(needsCauseLookup(recordPayment('inv_old', 97_000, 3_000, null), long)).toBe(true);
      expect(needsCauseLookup(releaseHold('inv_old'), long)).toBe(true);
      expect(needsCauseLookup(reserveFunds('rf_other', 'refund', 1), long)).toBe(true);
      expect(needsCauseLookup(settleReservation('rf_other'), long)).toBe(true);
      given([...history, ...filler(PAST_THE_WINDOW)])
        .when(releaseHold('inv_held', at(31 * DAY)))
        .then([holdReleased('inv_held', 50_000, at(31 * DAY))]);
    });

    it('an open hold still stops a forgotten payment cause', () => {
      given([paymentHeld('inv_old', 97_000, 3_000, at(30 * DAY)), ...filler(PAST_THE_WINDOW)])
        .when(recordPayment('inv_old', 97_000, 3_000, at(30 * DAY), at(DAY)))
        .thenNothing();
    });

    it('BUG: a retried reservation still open but older than the window is a repeat (no new entry), not duplicate_reservation', () => {
      // A refund or payout retried after more than the window of entries (a long projector
      // outage, a busy merchant) must hear "already reserved" so that its flow can finish.
      given([paymentAvailable('inv_old', 97_000, 3_000), fundsReserved('po_old', 'payout', 50_000), ...filler(PAST_THE_WINDOW)])
        .when(reserveFunds('po_old', 'payout', 50_000, at(DAY)))
        .thenNothing();
    });

    it('a retried reservation still open is a repeat whatever the payout limits say now', () => {
      const rules: PayoutReservationRules = { fingerprint: 'fp', duplicateWindowSeconds: 60, maxUnfinished: 1 };
      given([paymentAvailable('inv_old', 97_000, 3_000), fundsReserved('po_old', 'payout', 50_000), ...filler(PAST_THE_WINDOW)])
        .when({ ...reserveFunds('po_old', 'payout', 50_000, at(DAY)), payout: rules, recordRefusal: true } as LedgerCommand)
        .thenNothing();
    });

    it('a settle older than the window is a repeat when the log says it posted; a reservation it never settled stays not found', () => {
      const history = [
        paymentAvailable('inv_old', 97_000, 3_000),
        fundsReserved('rf_old', 'refund', 50_000),
        refundSettled('rf_old', 50_000),
        ...filler(PAST_THE_WINDOW),
      ];
      given(history)
        .when({ ...settleReservation('rf_old', undefined, at(DAY)), postedBeforeWindow: true })
        .thenNothing();
      // Its release never posted (the log says so): the reservation is closed, nothing to release.
      given(history)
        .when({ ...releaseReservation('rf_old', at(DAY)), postedBeforeWindow: false })
        .thenFails('reservation_not_found');
    });

    it('a reservation older than the window, settled since, is a repeat (no new reservation) when retried', () => {
      const history = [
        paymentAvailable('inv_old', 97_000, 3_000),
        fundsReserved('rf_old', 'refund', 50_000),
        refundSettled('rf_old', 50_000),
        ...filler(PAST_THE_WINDOW),
      ];
      given(history)
        .when({ ...reserveFunds('rf_old', 'refund', 50_000, at(DAY)), postedBeforeWindow: true })
        .thenNothing();
    });
  });

  describe('ledgerEntryId', () => {
    const UUID_V5 = /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

    it('is deterministic: the same ledger and cause give the same id', () => {
      expect(ledgerEntryId(LEDGER, 'payment:inv_1')).toBe(ledgerEntryId({ accountId: 'acc_7f3e', mode: 'test' }, 'payment:inv_1'));
    });

    it('differs for another cause, another account, another mode', () => {
      const ids = [
        ledgerEntryId(LEDGER, 'payment:inv_1'),
        ledgerEntryId(LEDGER, 'payment:inv_2'),
        ledgerEntryId(LEDGER, 'hold_release:inv_1'),
        ledgerEntryId({ accountId: 'acc_other', mode: 'test' }, 'payment:inv_1'),
        ledgerEntryId({ accountId: 'acc_7f3e', mode: 'live' }, 'payment:inv_1'),
      ];
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('is a valid RFC 4122 version 5 UUID', () => {
      for (const cause of ['payment:inv_1', 'settle:po_1', '', 'ünïcødé:∑']) {
        expect(ledgerEntryId(LEDGER, cause)).toMatch(UUID_V5);
      }
    });
  });
});

describe('ledger: invariants', () => {
  const balanced = paymentAvailable('inv_1', 97_000, 3_000);

  afterEach(() => jest.restoreAllMocks());

  it('entryViolations: a balanced entry has none', () => {
    expect(entryViolations(balanced)).toEqual([]);
  });

  it('entryViolations: an unbalanced entry', () => {
    const bad = entry(
      'payment_recorded',
      'payment:bad',
      [
        { account: 'acquiring_clearing', amount: -100 },
        { account: 'available', amount: 99 },
      ],
      at(),
    );
    expect(entryViolations(bad)).toEqual([{ entryId: idOf('payment:bad'), rule: 'entry_unbalanced', detail: 'postings sum to -1, not 0' }]);
  });

  it('stateViolations: a consistent state has none', () => {
    expect(stateViolations(initialLedgerState())).toEqual([]);
    expect(
      stateViolations(foldLedger([paymentHeld('inv_1', 97_000, 3_000, at(DAY)), paymentAvailable('inv_2', 10_000, 0), fundsReserved('rf_1', 'refund', 4_000)])),
    ).toEqual([]);
  });

  const withBalances = (state: LedgerState, changes: Partial<Record<(typeof LEDGER_ACCOUNTS)[number], number>>): LedgerState => ({
    ...state,
    balances: { ...state.balances, ...changes },
  });

  it('stateViolations: a negative merchant account', () => {
    const state = withBalances(initialLedgerState(), { available: -1, acquiring_clearing: 1 });
    expect(stateViolations(state, 'e1')).toEqual([{ entryId: 'e1', rule: 'negative_merchant_account', detail: 'available is -1' }]);
  });

  it('stateViolations: a negative system account is fine (that is the sign convention)', () => {
    expect(stateViolations(withBalances(initialLedgerState(), { available: 5, acquiring_clearing: -5 }))).toEqual([]);
  });

  it('stateViolations: accounts that do not sum to zero', () => {
    const state = withBalances(initialLedgerState(), { fees: 7 });
    expect(stateViolations(state).map((v) => v.rule)).toEqual(['sum_not_zero']);
  });

  it('stateViolations: pending that does not match the open holds', () => {
    const state = foldLedger([paymentHeld('inv_1', 97_000, 3_000, at(DAY))]);
    const noHold: LedgerState = { ...state, holds: OpenHolds.empty() };
    expect(stateViolations(noHold).map((v) => v.rule)).toEqual(['hold_mismatch']);
    const wrongHold: LedgerState = { ...state, holds: OpenHolds.fromRecord({ inv_1: { amount: 96_999, releaseAt: at(DAY) } }) };
    expect(stateViolations(wrongHold)).toEqual([{ entryId: null, rule: 'hold_mismatch', detail: 'open holds 96999 ≠ pending 97000' }]);
  });

  it('stateViolations: reserved that does not match the open reservations', () => {
    const state = foldLedger([balanced, fundsReserved('rf_1', 'refund', 4_000)]);
    const lost: LedgerState = { ...state, reservations: {} };
    expect(stateViolations(lost)).toEqual([{ entryId: null, rule: 'reservation_mismatch', detail: 'open reservations 0 ≠ reserved 4000' }]);
    const extra: LedgerState = { ...state, reservations: { ...state.reservations, rf_2: { purpose: 'payout', amount: 1 } } };
    expect(stateViolations(extra).map((v) => v.rule)).toEqual(['reservation_mismatch']);
  });

  it('ledgerDecider throws LedgerInvariantError when decide produces an unbalanced entry', () => {
    const unbalanced = entry(
      'payment_recorded',
      'payment:inv_1',
      [
        { account: 'acquiring_clearing', amount: -100 },
        { account: 'available', amount: 101 },
      ],
      at(),
    );
    jest.spyOn(ledgerModule, 'decide').mockReturnValue([unbalanced]);
    const thrown = thrownBy(() => ledgerDecider.decide(recordPayment('inv_1', 100, 0, null), initialLedgerState()));
    expect(thrown).toBeInstanceOf(LedgerInvariantError);
    expect((thrown as LedgerInvariantError).violations).toEqual(['entry_unbalanced: postings sum to 1, not 0', 'sum_not_zero: accounts sum to 1']);
  });

  it('ledgerDecider throws LedgerInvariantError when decide would overdraw a merchant account', () => {
    const overdraw = fundsReserved('po_1', 'payout', 1);
    jest.spyOn(ledgerModule, 'decide').mockReturnValue([overdraw]);
    expect(() => ledgerDecider.decide(reserveFunds('po_1', 'payout', 1), initialLedgerState())).toThrow(/negative_merchant_account: available is -1/);
  });

  it('ledgerDecider passes refusals and sound entries through unchanged', () => {
    const refusal = new Refusal('insufficient_balance', 'no');
    jest.spyOn(ledgerModule, 'decide').mockReturnValueOnce(refusal).mockReturnValueOnce([balanced]);
    expect(ledgerDecider.decide(reserveFunds('po_1', 'payout', 1), initialLedgerState())).toBe(refusal);
    expect(ledgerDecider.decide(recordPayment('inv_1', 97_000, 3_000, null), initialLedgerState())).toEqual([balanced]);
  });

  it('every flow of the examples above keeps the books balanced', () => {
    const history = [
      paymentHeld('inv_1', 97_000, 3_000, at(DAY)),
      paymentAvailable('inv_2', 50_000, 1_000),
      holdReleased('inv_1', 97_000, at(DAY)),
      fundsReserved('rf_1', 'refund', 40_000),
      fundsReserved('po_1', 'payout', 100_000),
      refundSettled('rf_1', 40_000),
      reservationReleased('po_1', 'payout', 100_000),
    ];
    for (const e of history) expect(entryViolations(e)).toEqual([]);
    expect(stateViolations(foldLedger(history))).toEqual([]);
    expect(balancesAfter(history)).toEqual({
      pending: 0,
      available: 107_000,
      reserved: 0,
      acquiring_clearing: -151_000,
      fees: 4_000,
      refunds_paid: 40_000,
      payouts_sent: 0,
    });
  });
});

/**
 * Defects found while writing these tests. ledger.ts is deliberately left unchanged
 * here: these tests fail until it is fixed.
 */
describe('ledger: defects found by these tests, now fixed', () => {
  it('BUG: a payment whose net + fee is not a safe integer is refused with invalid_amount, not decided into an unbalanced entry', () => {
    // Both amounts pass the safe-integer check, their sum does not: decide posts
    // clearing −9007199254740992 (rounded), available +9007199254740991, fees +2,
    // which sums to 1, and ledgerDecider throws LedgerInvariantError.
    given([])
      .when(recordPayment('inv_big', Number.MAX_SAFE_INTEGER, 2, null))
      .thenFails('invalid_amount');
  });

  it('BUG: ids named like Object.prototype members (constructor, __proto__, toString…) are ids like any other', () => {
    const funded = foldLedger([paymentAvailable('inv_1', 97_000, 3_000)]);
    const outcome = (command: LedgerCommand, state: LedgerState): string => {
      let decision: LedgerEvent[] | LedgerError;
      try {
        decision = ledgerDecider.decide(command, state);
      } catch (error) {
        return (error as Error).name;
      }
      if (decision instanceof Refusal) return decision.code;
      return decision.length === 0 ? 'nothing' : `posted ${decision[0]!.data.kind}`;
    };
    // Pairs, not an object: an object keyed by '__proto__' would fall into the very same trap.
    const actual: [string, string[]][] = [];
    const expected: [string, string[]][] = [];
    for (const id of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      actual.push([
        id,
        [
          outcome(recordPayment(id, 100, 0, at(DAY)), initialLedgerState()),
          outcome(releaseHold(id, at(2 * DAY)), initialLedgerState()),
          outcome(reserveFunds(id, 'refund', 10), funded),
          outcome(settleReservation(id), funded),
          outcome(releaseReservation(id), funded),
        ],
      ]);
      expected.push([id, ['posted payment_recorded', 'hold_not_found', 'posted funds_reserved', 'reservation_not_found', 'reservation_not_found']]);
    }
    expect(actual).toEqual(expected);
  });
});

// ---------------------------------------------------------------------------------
// Payout rules of ReserveFunds (too_many_pending, duplicate_request) and recorded refusals

describe('ledger: payout reservations and recorded refusals', () => {
  /** The gateway clock `seconds` after T0, ISO (the duplicate window is counted in seconds). */
  const atSec = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();

  const rules = (fingerprint: string, duplicateWindowSeconds: number | null = 60, maxUnfinished = 3): PayoutReservationRules => ({
    fingerprint,
    duplicateWindowSeconds,
    maxUnfinished,
  });
  const reservePayout = (id: string, amount: number, payout: PayoutReservationRules, when = at(), recordRefusal = false): LedgerCommand => ({
    type: 'ReserveFunds',
    reservationId: id,
    purpose: 'payout',
    amount,
    payout,
    ...(recordRefusal ? { recordRefusal: true } : {}),
    at: when,
    entryId: idOf(`reserve:${id}`),
  });
  const reserveRefund = (id: string, amount: number, when = at(), recordRefusal = false): LedgerCommand => ({
    type: 'ReserveFunds',
    reservationId: id,
    purpose: 'refund',
    amount,
    ...(recordRefusal ? { recordRefusal: true } : {}),
    at: when,
    entryId: idOf(`reserve:${id}`),
  });

  /** A payout reservation as decide posts it: with its fingerprint, and the request's time when dated later. */
  const payoutReserved = (id: string, amount: number, fingerprint: string, when = at(), requestedAt = when): LedgerEvent =>
    entry(
      'funds_reserved',
      `reserve:${id}`,
      [
        { account: 'available', amount: -amount },
        { account: 'reserved', amount },
      ],
      when,
      {
        reservation: { id, purpose: 'payout', amount },
        payoutFingerprint: fingerprint,
        ...(requestedAt !== when ? { payoutRequestedAt: requestedAt } : {}),
      },
    );
  const payoutSettled = (id: string, amount: number, fee: number, when = at()): LedgerEvent =>
    entry(
      'reservation_settled',
      `settle:${id}`,
      [
        { account: 'reserved', amount: -amount },
        { account: 'payouts_sent', amount: amount - fee },
        { account: 'fees', amount: fee },
      ],
      when,
      { reservation: { id, purpose: 'payout', amount } },
    );
  const reservationRefused = (id: string, purpose: ReservationPurpose, amount: number, refusal: ReservationRefusal, when = at()): LedgerEvent =>
    entry('reservation_refused', `reserve:${id}`, [], when, { reservation: { id, purpose, amount }, refusal });

  const funded = [paymentAvailable('inv_1', 1_000_000, 0)];
  /** Three open payouts of 10 000 each, with fingerprints a, b, c. */
  const threeOpen = [
    ...funded,
    payoutReserved('po_1', 10_000, 'a', atSec(0)),
    payoutReserved('po_2', 10_000, 'b', atSec(1)),
    payoutReserved('po_3', 10_000, 'c', atSec(2)),
  ];

  describe('too_many_pending', () => {
    it('a payout beyond maxUnfinished open payout reservations: too_many_pending', () => {
      given(threeOpen)
        .when(reservePayout('po_4', 10_000, rules('d'), atSec(10)))
        .thenFails('too_many_pending');
    });

    it('below maxUnfinished: reserved, with its fingerprint', () => {
      given(threeOpen.slice(0, 3))
        .when(reservePayout('po_3', 10_000, rules('c'), atSec(10)))
        .then([payoutReserved('po_3', 10_000, 'c', atSec(10))]);
    });

    it('refund reservations do not count', () => {
      const withRefunds = [
        ...threeOpen.slice(0, 3),
        fundsReserved('rf_1', 'refund', 1_000),
        fundsReserved('rf_2', 'refund', 1_000),
        fundsReserved('rf_3', 'refund', 1_000),
        fundsReserved('rf_4', 'refund', 1_000),
      ];
      given(withRefunds)
        .when(reservePayout('po_3', 10_000, rules('c'), atSec(10)))
        .then([payoutReserved('po_3', 10_000, 'c', atSec(10))]);
    });

    it('a refund is never held back by open payouts', () => {
      given(threeOpen)
        .when(reserveRefund('rf_1', 10_000, atSec(10)))
        .then([fundsReserved('rf_1', 'refund', 10_000, atSec(10))]);
    });

    it('a payout settled or released no longer counts', () => {
      given([...threeOpen, payoutSettled('po_1', 10_000, 100, atSec(5))])
        .when(reservePayout('po_4', 10_000, rules('d'), atSec(10)))
        .then([payoutReserved('po_4', 10_000, 'd', atSec(10))]);
      given([...threeOpen, reservationReleased('po_2', 'payout', 10_000, atSec(5))])
        .when(reservePayout('po_4', 10_000, rules('d'), atSec(10)))
        .then([payoutReserved('po_4', 10_000, 'd', atSec(10))]);
    });

    it('a refused payout never opened a reservation and does not count', () => {
      given([...threeOpen.slice(0, 3), reservationRefused('po_x', 'payout', 10_000_000, 'insufficient_balance', atSec(3))])
        .when(reservePayout('po_3', 10_000, rules('c'), atSec(10)))
        .then([payoutReserved('po_3', 10_000, 'c', atSec(10))]);
    });

    it('the limit is the command’s maxUnfinished', () => {
      given(threeOpen)
        .when(reservePayout('po_4', 10_000, rules('d', 60, 4), atSec(10)))
        .then([payoutReserved('po_4', 10_000, 'd', atSec(10))]);
      given(threeOpen.slice(0, 2))
        .when(reservePayout('po_2', 10_000, rules('b', 60, 1), atSec(10)))
        .thenFails('too_many_pending');
      given(funded)
        .when(reservePayout('po_1', 10_000, rules('a', 60, 0), atSec(10)))
        .thenFails('too_many_pending');
    });
  });

  describe('duplicate_request', () => {
    const first = [...funded, payoutReserved('po_1', 10_000, 'fp', atSec(0))];

    it('the same fingerprint within the window: duplicate_request', () => {
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(1)))
        .thenFails('duplicate_request');
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(59)))
        .thenFails('duplicate_request');
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp'), new Date(T0 + 59_999).toISOString()))
        .thenFails('duplicate_request');
    });

    it('the window is counted from command.at: other entries in between change nothing', () => {
      given([...first, paymentAvailable('inv_2', 5_000, 0, atSec(30)), fundsReserved('rf_1', 'refund', 100, atSec(40))])
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(45)))
        .thenFails('duplicate_request');
    });

    it('once the window has passed (exactly 60 s, or later): reserved', () => {
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(60)))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(60))]);
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(3_600)))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(3_600))]);
    });

    it('a shorter window of the command applies', () => {
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp', 10), atSec(9)))
        .thenFails('duplicate_request');
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp', 10), atSec(10)))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(10))]);
    });

    it('duplicateWindowSeconds null (an orderId of its own): not checked', () => {
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp', null), atSec(1)))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(1))]);
    });

    it('another fingerprint within the window: reserved', () => {
      given(first)
        .when(reservePayout('po_2', 10_000, rules('fp-other'), atSec(1)))
        .then([payoutReserved('po_2', 10_000, 'fp-other', atSec(1))]);
    });

    it('a payout reserved without a window (it had an orderId) still counts for a later request with one', () => {
      const posted = ledgerDecider.decide(reservePayout('po_1', 10_000, rules('fp', null), atSec(0)), foldLedger(funded));
      expect(posted).toEqual([payoutReserved('po_1', 10_000, 'fp', atSec(0))]);
      given([...funded, ...(posted as LedgerEvent[])])
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(5)))
        .thenFails('duplicate_request');
    });

    it('the earlier payout counts even once it was released: it was created less than a minute ago', () => {
      given([...first, reservationReleased('po_1', 'payout', 10_000, atSec(10))])
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(20)))
        .thenFails('duplicate_request');
    });

    it('the window counts from each request, also when a reservation was made late (by recovery)', () => {
      // A requested at 0 s, reserved at 40 s behind a refund dated 40 s.
      const lateA = [...funded, fundsReserved('rf_1', 'refund', 100, atSec(40))];
      given(lateA)
        .when(reservePayout('po_1', 10_000, rules('fp'), atSec(0)))
        .then([payoutReserved('po_1', 10_000, 'fp', atSec(40), atSec(0))]);
      const reservedLate = [...lateA, payoutReserved('po_1', 10_000, 'fp', atSec(40), atSec(0))];
      // B 62 s after A's request: no duplicate (the entry's date, 40 s, would have said one).
      given(reservedLate)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(62)))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(62))]);
      given(reservedLate)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(59)))
        .thenFails('duplicate_request');
    });

    it('two requests both reserved late, long after they were made, are still compared', () => {
      // A requested at 0 s and B at 30 s; recovery reserves both after 420 s, behind an entry dated 420 s.
      const lateBoth = [...funded, paymentAvailable('inv_2', 1, 0, atSec(420))];
      given(lateBoth)
        .when(reservePayout('po_1', 10_000, rules('fp'), atSec(0)))
        .then([payoutReserved('po_1', 10_000, 'fp', atSec(420), atSec(0))]);
      given([...lateBoth, payoutReserved('po_1', 10_000, 'fp', atSec(420), atSec(0))])
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(30)))
        .thenFails('duplicate_request');
    });

    it('a request reserved late is a duplicate of one requested less than a minute after it', () => {
      // A requested at 0 s and B at 30 s; B reserved first, then entries until 61 s.
      const bFirst = [...first.slice(0, -1), payoutReserved('po_2', 10_000, 'fp', atSec(30)), paymentAvailable('inv_2', 1, 0, atSec(61))];
      given(bFirst)
        .when(reservePayout('po_1', 10_000, rules('fp'), atSec(0)))
        .thenFails('duplicate_request');
      // A request more than a minute before it is not.
      given(bFirst)
        .when(reservePayout('po_3', 10_000, rules('fp'), atSec(-31)))
        .then([payoutReserved('po_3', 10_000, 'fp', atSec(61), atSec(-31))]);
    });

    it('a refused request was never created: it does not make a duplicate', () => {
      given([...funded, reservationRefused('po_1', 'payout', 10_000_000, 'insufficient_balance', atSec(0))])
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(5)))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(5))]);
    });

    it('refund reservations have no fingerprint and make no duplicates', () => {
      const state = foldLedger([...funded, fundsReserved('rf_1', 'refund', 10_000, atSec(0))]);
      expect(state.recentPayouts).toEqual([]);
    });
  });

  describe('payout limits come before the balance', () => {
    it('too_many_pending, not insufficient_balance, when both apply', () => {
      const drained = [
        paymentAvailable('inv_1', 30_000, 0),
        payoutReserved('po_1', 10_000, 'a', atSec(0)),
        payoutReserved('po_2', 10_000, 'b', atSec(1)),
        payoutReserved('po_3', 10_000, 'c', atSec(2)),
      ];
      expect(foldLedger(drained).balances.available).toBe(0);
      given(drained)
        .when(reservePayout('po_4', 10_000, rules('d'), atSec(10)))
        .thenFails('too_many_pending');
    });

    it('duplicate_request, not insufficient_balance, when both apply', () => {
      const drained = [paymentAvailable('inv_1', 10_000, 0), payoutReserved('po_1', 10_000, 'fp', atSec(0))];
      expect(foldLedger(drained).balances.available).toBe(0);
      given(drained)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(5)))
        .thenFails('duplicate_request');
    });

    it('with no limit reached, the balance decides', () => {
      const drained = [paymentAvailable('inv_1', 10_000, 0), payoutReserved('po_1', 10_000, 'fp', atSec(0))];
      given(drained)
        .when(reservePayout('po_2', 1, rules('other'), atSec(5)))
        .thenFails('insufficient_balance');
      given([paymentAvailable('inv_1', 10_000, 0)])
        .when(reservePayout('po_1', 10_001, rules('fp')))
        .thenFails('insufficient_balance');
    });
  });

  describe('recordRefusal', () => {
    it.each<[ReservationRefusal, LedgerEvent[], LedgerCommand]>([
      ['insufficient_balance', [paymentAvailable('inv_1', 5_000, 0)], reservePayout('po_9', 10_000, rules('z'), atSec(20), true)],
      ['too_many_pending', threeOpen, reservePayout('po_9', 10_000, rules('z'), atSec(20), true)],
      ['duplicate_request', threeOpen.slice(0, 2), reservePayout('po_9', 10_000, rules('a'), atSec(20), true)],
    ])('%s: an entry of kind reservation_refused, without postings, with the refusal', (refusal, history, command) => {
      given(history)
        .when(command)
        .then([
          {
            type: 'LedgerEntryPosted',
            data: {
              entryId: idOf('reserve:po_9'),
              kind: 'reservation_refused',
              cause: 'reserve:po_9',
              postings: [],
              occurredAt: atSec(20),
              reservation: { id: 'po_9', purpose: 'payout', amount: 10_000 },
              refusal,
            },
          },
        ]);
      // Without recordRefusal the same decision is an error.
      const { recordRefusal: _recorded, ...plain } = command as Extract<LedgerCommand, { type: 'ReserveFunds' }>;
      given(history).when(plain).thenFails(refusal);
    });

    it('a refund refused for want of balance is recorded the same way', () => {
      given([paymentAvailable('inv_1', 5_000, 0)])
        .when(reserveRefund('rf_1', 5_001, at(3), true))
        .then([reservationRefused('rf_1', 'refund', 5_001, 'insufficient_balance', at(3))]);
    });

    it('a recorded refusal moves no money and opens nothing, but spends the cause', () => {
      const before = foldLedger(threeOpen);
      const after = foldLedger([...threeOpen, reservationRefused('po_9', 'payout', 10_000, 'too_many_pending', atSec(20))]);
      expect(after.balances).toEqual(before.balances);
      expect(after.reservations).toEqual(before.reservations);
      expect(after.entries).toBe(before.entries + 1);
      expect(hasRecentCause(after, 'reserve:po_9')).toBe(true);
      expect(after.recentPayouts.map((p) => p.fingerprint)).toEqual(['a', 'b', 'c']);
      expect(stateViolations(after)).toEqual([]);
      expect(entryViolations(reservationRefused('po_9', 'payout', 10_000, 'too_many_pending'))).toEqual([]);
    });

    it('the same command again returns [] even if the balance would now allow it', () => {
      const refused = [paymentAvailable('inv_1', 5_000, 0), reservationRefused('po_1', 'payout', 10_000, 'insufficient_balance', atSec(0))];
      const nowFunded = [...refused, paymentAvailable('inv_2', 1_000_000, 0, atSec(10))];
      given(nowFunded)
        .when(reservePayout('po_1', 10_000, rules('fp'), atSec(20), true))
        .thenNothing();
      given(nowFunded)
        .when(reservePayout('po_1', 10_000, rules('fp'), atSec(20)))
        .thenNothing();
      // A new request is another reservation id: that one is decided afresh.
      given(nowFunded)
        .when(reservePayout('po_2', 10_000, rules('fp'), atSec(20), true))
        .then([payoutReserved('po_2', 10_000, 'fp', atSec(20))]);
    });

    it('the same command again returns [] once the other payouts have finished', () => {
      const refused = [...threeOpen, reservationRefused('po_9', 'payout', 10_000, 'too_many_pending', atSec(20))];
      const finished = [
        ...refused,
        reservationReleased('po_1', 'payout', 10_000, atSec(30)),
        reservationReleased('po_2', 'payout', 10_000, atSec(31)),
        reservationReleased('po_3', 'payout', 10_000, atSec(32)),
      ];
      expect(foldLedger(finished).reservations).toEqual({});
      given(finished)
        .when(reservePayout('po_9', 10_000, rules('z'), atSec(200), true))
        .thenNothing();
    });

    it('a refund refused for balance stays refused after money arrives', () => {
      given([
        paymentAvailable('inv_1', 5_000, 0),
        reservationRefused('rf_1', 'refund', 5_001, 'insufficient_balance'),
        paymentAvailable('inv_2', 100_000, 0, at(5)),
      ])
        .when(reserveRefund('rf_1', 5_001, at(10), true))
        .thenNothing();
    });

    it('a reservation that can be made is posted as usual', () => {
      given(funded)
        .when(reservePayout('po_1', 10_000, rules('fp'), atSec(0), true))
        .then([payoutReserved('po_1', 10_000, 'fp', atSec(0))]);
      given(funded)
        .when(reserveRefund('rf_1', 10_000, at(), true))
        .then([fundsReserved('rf_1', 'refund', 10_000)]);
    });

    it('an invalid amount stays an error (invalid_amount), not a recorded refusal', () => {
      given(funded)
        .when(reservePayout('po_1', 0, rules('fp'), atSec(0), true))
        .thenFails('invalid_amount');
      given(funded)
        .when(reserveRefund('rf_1', -5, at(), true))
        .thenFails('invalid_amount');
    });
  });

  describe('recentPayouts', () => {
    it('remembers the payouts reserved within RECENT_PAYOUT_WINDOW_MS of the latest entry, oldest first', () => {
      expect(RECENT_PAYOUT_WINDOW_MS).toBe(300_000);
      const history = [
        ...funded,
        payoutReserved('po_1', 1_000, 'a', atSec(0)),
        payoutReserved('po_2', 1_000, 'b', atSec(30)),
        payoutReserved('po_3', 1_000, 'c', atSec(299)),
      ];
      expect(foldLedger(history).recentPayouts).toEqual([
        { fingerprint: 'a', at: atSec(0) },
        { fingerprint: 'b', at: atSec(30) },
        { fingerprint: 'c', at: atSec(299) },
      ]);
      // The ledger's latest time forgets those reserved five minutes or more before it.
      const later = [...history, paymentAvailable('inv_2', 1, 0, atSec(300))];
      expect(foldLedger(later).recentPayouts).toEqual([
        { fingerprint: 'b', at: atSec(30) },
        { fingerprint: 'c', at: atSec(299) },
      ]);
      // An entry dated earlier than the latest (a payment posted late) forgets nothing more.
      expect(foldLedger([...later, paymentAvailable('inv_3', 1, 0, atSec(10))]).recentPayouts).toEqual(foldLedger(later).recentPayouts);
      expect(foldLedger([...later, paymentAvailable('inv_4', 1, 0, atSec(900))]).recentPayouts).toEqual([]);
    });

    it('a payout reserved late is remembered by when it was requested, and kept by when it was reserved', () => {
      const late = [...funded, paymentAvailable('inv_2', 1, 0, atSec(400)), payoutReserved('po_1', 1_000, 'a', atSec(400), atSec(5))];
      expect(foldLedger(late).recentPayouts).toEqual([{ fingerprint: 'a', at: atSec(5), reservedAt: atSec(400) }]);
      expect(foldLedger([...late, paymentAvailable('inv_3', 1, 0, atSec(700))]).recentPayouts).toEqual([]);
    });

    type Op =
      | { readonly op: 'pay'; readonly amount: number }
      | {
          readonly op: 'payout';
          readonly id: number;
          readonly amount: number;
          readonly fp: number;
          readonly window: number | null;
          readonly record: boolean;
          /** Requested this many seconds before the clock (reserved late, by recovery). */
          readonly lateSeconds: number;
        }
      | { readonly op: 'refund'; readonly id: number; readonly amount: number; readonly record: boolean }
      | { readonly op: 'settle' | 'release'; readonly id: number; readonly payout: boolean };

    const op: fc.Arbitrary<Op> = fc.oneof(
      { weight: 2, arbitrary: fc.record({ op: fc.constant('pay' as const), amount: fc.integer({ min: 1, max: 50_000 }) }) },
      {
        weight: 5,
        arbitrary: fc.record({
          op: fc.constant('payout' as const),
          id: fc.nat({ max: 11 }),
          amount: fc.integer({ min: 1, max: 20_000 }),
          fp: fc.nat({ max: 2 }),
          window: fc.constantFrom(60, 30, null),
          record: fc.boolean(),
          lateSeconds: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 400 })),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant('refund' as const),
          id: fc.nat({ max: 5 }),
          amount: fc.integer({ min: 1, max: 20_000 }),
          record: fc.boolean(),
        }),
      },
      {
        weight: 3,
        arbitrary: fc.record({ op: fc.constantFrom('settle' as const, 'release' as const), id: fc.nat({ max: 11 }), payout: fc.boolean() }),
      },
    );
    const steps = fc.array(fc.record({ advanceSeconds: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 200 })), op }), {
      maxLength: 50,
    });

    const commandOf = (o: Op, when: string): LedgerCommand => {
      switch (o.op) {
        case 'pay':
          return { ...recordPayment(`inv_${when}`, o.amount, 0, null, when) };
        case 'payout':
          return reservePayout(`po_${o.id}`, o.amount, rules(`fp${o.fp}`, o.window), when, o.record);
        case 'refund':
          return reserveRefund(`rf_${o.id}`, o.amount, when, o.record);
        case 'settle':
          return settleReservation(`${o.payout ? 'po' : 'rf'}_${o.id}`, undefined, when);
        case 'release':
          return releaseReservation(`${o.payout ? 'po' : 'rf'}_${o.id}`, when);
      }
    };

    it('foldLedger and evolve agree (recentPayouts included) on random sequences, at every step', () => {
      fc.assert(
        fc.property(steps, (plan) => {
          let clock = T0;
          let byEvolve = initialLedgerState();
          const events: LedgerEvent[] = [];
          for (const step of plan) {
            clock += step.advanceSeconds * 1000;
            const when = clock - (step.op.op === 'payout' ? step.op.lateSeconds * 1000 : 0);
            const decision = ledgerDecider.decide(commandOf(step.op, new Date(when).toISOString()), byEvolve);
            if (!Array.isArray(decision)) continue;
            for (const event of decision) byEvolve = ledgerModule.evolve(byEvolve, event);
            events.push(...decision);

            const byFold = foldLedger(events);
            expect(byFold).toEqual(byEvolve);
            // Folding in two parts is the same as folding at once.
            const half = Math.floor(events.length / 2);
            expect(foldLedger(events.slice(half), foldLedger(events.slice(0, half)))).toEqual(byEvolve);
          }
          // The payouts remembered are exactly those reserved within the window of the latest entry.
          if (events.length > 0) {
            const latest = Math.max(...events.map((e) => Date.parse(e.data.occurredAt)));
            const expected = events
              .filter((e) => e.data.kind === 'funds_reserved' && e.data.payoutFingerprint !== undefined)
              .filter((e) => latest - Date.parse(e.data.occurredAt) < RECENT_PAYOUT_WINDOW_MS)
              .map((e) =>
                e.data.payoutRequestedAt === undefined
                  ? { fingerprint: e.data.payoutFingerprint, at: e.data.occurredAt }
                  : { fingerprint: e.data.payoutFingerprint, at: e.data.payoutRequestedAt, reservedAt: e.data.occurredAt },
              );
            expect(byEvolve.recentPayouts).toEqual(expected);
          }
        }),
        { numRuns: 300 },
      );
    });
  });
});
