/**
 * The payout decider, given/when/then:
 *
 *   given(past payout events).when(command).then(events) / .thenFails(code) / .thenNothing()
 *
 * requested → pending (reserved) or refused (never shown; rejected, shown, when the
 * request may have been answered already); then the operator's
 * transitions of PAYOUT_TRANSITIONS: pending → approved → processing → paid;
 * pending | approved | processing → rejected; pending → cancelled.
 */
import { Refusal } from '#ledger';
import {
  decidePayout,
  evolvePayout,
  initialPayout,
  isShownPayout,
  PayoutState,
  PAYOUT_REFUSAL_REASONS,
  PAYOUT_STATUSES,
  PAYOUT_TRANSITIONS,
  PayoutCommand,
  payoutDecider,
  PayoutEvent,
  PayoutLifecycle,
  PayoutRefusal,
  PayoutRequestedData,
  payoutOfReservation,
  payoutReservationId,
  PayoutStatus,
  payoutStreamName,
  PayoutTransition,
  UNFINISHED_PAYOUT_STATUSES,
} from './payout';
import { givenWhenThen } from '../testing/given-when-then';

const T0 = Date.parse('2025-03-01T10:00:00.000Z');
const at = (minutes = 0): string => new Date(T0 + minutes * 60_000).toISOString();

const REQUESTED: PayoutRequestedData = {
  payoutId: 42,
  accountId: 'acc_1',
  projectId: 'prj_1',
  method: 'sbp',
  addressId: 7,
  account: '+79161234567',
  bank: 'Т-Банк',
  orderId: 'po-order-1',
  comment: null,
  amount: 100_000,
  feeAmount: 1_000,
  netAmount: 99_000,
  usdtAmount: null,
  usdtRate: null,
  source: 'api',
  createdAt: at(0),
};
const REF = { payoutId: 42, accountId: 'acc_1' };

const requested = (): PayoutEvent => ({ type: 'PayoutRequested', data: REQUESTED });
const reserved = (when = at(0)): PayoutEvent => ({ type: 'PayoutReserved', data: { ...REF, at: when } });
const refused = (refusal: PayoutRefusal, when = at(0)): PayoutEvent => ({ type: 'PayoutRefused', data: { ...REF, at: when, refusal } });
const approved = (when = at(1)): PayoutEvent => ({ type: 'PayoutApproved', data: { ...REF, at: when } });
const processingStarted = (when = at(2)): PayoutEvent => ({ type: 'PayoutProcessingStarted', data: { ...REF, at: when } });
const payoutPaid = (externalId: string | null = 'ext-1', when = at(3)): PayoutEvent => ({
  type: 'PayoutPaid',
  data: { ...REF, at: when, externalId, feeAmount: 1_000 },
});
const rejected = (reason = 'bad details', when = at(3)): PayoutEvent => ({ type: 'PayoutRejected', data: { ...REF, at: when, reason } });
const cancelled = (reason = 'asked by merchant', when = at(3)): PayoutEvent => ({
  type: 'PayoutCancelled',
  data: { ...REF, at: when, reason },
});

const requestPayout = (data: PayoutRequestedData = REQUESTED): PayoutCommand => ({ type: 'RequestPayout', data });
const recordReservation = (outcome: 'reserved' | PayoutRefusal, when = at(0)): PayoutCommand => ({
  type: 'RecordReservation',
  outcome,
  at: when,
});

/** The command of each operator transition, at `when`. */
const TRANSITION_COMMANDS: Record<PayoutTransition, (when: string) => PayoutCommand> = {
  approve: (when) => ({ type: 'ApprovePayout', at: when }),
  process: (when) => ({ type: 'StartProcessing', at: when }),
  pay: (when) => ({ type: 'PayPayout', at: when, externalId: 'ext-9' }),
  reject: (when) => ({ type: 'RejectPayout', at: when, reason: 'rejected by operator' }),
  cancel: (when) => ({ type: 'CancelPayout', at: when, reason: 'cancelled by operator' }),
};
/** The event a legal transition records, at `when`. */
const TRANSITION_EVENTS: Record<PayoutTransition, (when: string) => PayoutEvent> = {
  approve: (when) => approved(when),
  process: (when) => processingStarted(when),
  pay: (when) => payoutPaid('ext-9', when),
  reject: (when) => rejected('rejected by operator', when),
  cancel: (when) => cancelled('cancelled by operator', when),
};
/** The history of a payout that reached each status. */
const HISTORY: Record<PayoutLifecycle, PayoutEvent[]> = {
  requested: [requested()],
  refused: [requested(), refused('insufficient_balance')],
  pending: [requested(), reserved()],
  approved: [requested(), reserved(), approved()],
  processing: [requested(), reserved(), approved(), processingStarted()],
  paid: [requested(), reserved(), approved(), processingStarted(), payoutPaid()],
  rejected: [requested(), reserved(), rejected()],
  cancelled: [requested(), reserved(), cancelled()],
};
const TRANSITIONS = Object.keys(PAYOUT_TRANSITIONS) as PayoutTransition[];

const fold = (events: readonly PayoutEvent[]): PayoutState => events.reduce(evolvePayout, initialPayout());

const given = givenWhenThen(payoutDecider, Refusal);

describe('payout: request', () => {
  it('records the request; the payout is requested and not yet shown', () => {
    given([]).when(requestPayout()).then([requested()]);
    const state = fold([requested()]);
    expect(state).toEqual({ requested: REQUESTED, status: 'requested' });
    expect(isShownPayout(state)).toBe(false);
  });

  it('requested twice: the second records nothing, whatever it carries', () => {
    given([requested()]).when(requestPayout()).thenNothing();
    given([requested(), reserved()])
      .when(requestPayout({ ...REQUESTED, amount: 1 }))
      .thenNothing();
  });

  it('every command but the request on a payout that does not exist: not_found', () => {
    given([]).when(recordReservation('reserved')).thenFails('not_found');
    for (const transition of TRANSITIONS)
      given([])
        .when(TRANSITION_COMMANDS[transition](at(1)))
        .thenFails('not_found');
  });
});

describe('payout: the reservation', () => {
  it('reserved: requested → pending, shown', () => {
    given([requested()])
      .when(recordReservation('reserved', at(0)))
      .then([{ type: 'PayoutReserved', data: { payoutId: 42, accountId: 'acc_1', at: at(0) } }]);
    const state = fold([requested(), reserved()]);
    expect(state.status).toBe('pending');
    expect(isShownPayout(state)).toBe(true);
  });

  it.each(['insufficient_balance', 'too_many_pending', 'duplicate_request'] as const)(
    'refused for %s: requested → refused, with the refusal, never shown',
    (refusal) => {
      given([requested()])
        .when(recordReservation(refusal))
        .then([{ type: 'PayoutRefused', data: { payoutId: 42, accountId: 'acc_1', at: at(0), refusal } }]);
      const state = fold([requested(), refused(refusal)]);
      expect(state).toEqual({ status: 'refused', requested: requested().data, refusal });
      expect(isShownPayout(state)).toBe(false);
    },
  );

  it.each(['insufficient_balance', 'too_many_pending', 'duplicate_request'] as const)(
    'refused for %s once the request may have been answered: requested → rejected, shown, with the reason',
    (refusal) => {
      const reason = PAYOUT_REFUSAL_REASONS[refusal];
      given([requested()])
        .when({ type: 'RecordReservation', outcome: refusal, at: at(1), mayBeAnswered: true })
        .then([{ type: 'PayoutRejected', data: { payoutId: 42, accountId: 'acc_1', at: at(1), reason } }]);
      const state = fold([requested(), rejected(reason, at(1))]);
      expect({ ...state, shown: isShownPayout(state) }).toEqual({
        status: 'rejected',
        requested: requested().data,
        statusReason: reason,
        processedAt: at(1),
        shown: true,
      });
      expect(reason).toMatch(/[А-Яа-я]/);
    },
  );

  it('once the request may have been answered, reserved is still pending; a refused payout stays refused', () => {
    given([requested()])
      .when({ type: 'RecordReservation', outcome: 'reserved', at: at(1), mayBeAnswered: true })
      .then([{ type: 'PayoutReserved', data: { payoutId: 42, accountId: 'acc_1', at: at(1) } }]);
    given([requested(), refused('too_many_pending')])
      .when({ type: 'RecordReservation', outcome: 'too_many_pending', at: at(1), mayBeAnswered: true })
      .thenNothing();
  });

  it('the first record wins: after reserved, a refusal records nothing, and the other way round', () => {
    given([requested(), reserved()])
      .when(recordReservation('insufficient_balance', at(1)))
      .thenNothing();
    given([requested(), reserved()])
      .when(recordReservation('reserved', at(1)))
      .thenNothing();
    given([requested(), refused('too_many_pending')])
      .when(recordReservation('reserved', at(1)))
      .thenNothing();
    given([requested(), refused('too_many_pending')])
      .when(recordReservation('duplicate_request', at(1)))
      .thenNothing();
  });

  it('a reservation recorded after the payout moved on records nothing', () => {
    for (const status of PAYOUT_STATUSES) {
      given(HISTORY[status])
        .when(recordReservation('reserved', at(9)))
        .thenNothing();
      given(HISTORY[status])
        .when(recordReservation('insufficient_balance', at(9)))
        .thenNothing();
    }
  });
});

describe('payout: operator transitions', () => {
  it('PAYOUT_TRANSITIONS: the documented table', () => {
    expect(PAYOUT_TRANSITIONS).toEqual({
      approve: ['pending'],
      process: ['approved'],
      pay: ['processing'],
      reject: ['pending', 'approved', 'processing'],
      cancel: ['pending'],
    });
    expect(UNFINISHED_PAYOUT_STATUSES).toEqual(['pending', 'approved', 'processing']);
  });

  it('every history of the table reaches its status', () => {
    for (const [status, history] of Object.entries(HISTORY)) expect(fold(history).status).toBe(status);
  });

  const pairs: [PayoutStatus, PayoutTransition, boolean][] = PAYOUT_STATUSES.flatMap((status) =>
    TRANSITIONS.map((transition): [PayoutStatus, PayoutTransition, boolean] => [
      status,
      transition,
      (PAYOUT_TRANSITIONS[transition] as readonly string[]).includes(status),
    ]),
  );

  it('the table covers every status and transition', () => {
    expect(pairs).toHaveLength(PAYOUT_STATUSES.length * TRANSITIONS.length);
    expect(pairs.filter(([, , legal]) => legal)).toHaveLength(7);
  });

  it.each(pairs)('%s + %s (legal: %s)', (status, transition, legal) => {
    const when = at(10);
    const scenario = given(HISTORY[status]).when(TRANSITION_COMMANDS[transition](when));
    if (legal) scenario.then([TRANSITION_EVENTS[transition](when)]);
    else scenario.thenFails('conflict');
  });

  it.each(['requested', 'refused'] as const)('every transition on a %s payout: not_found (it is not shown)', (status) => {
    for (const transition of TRANSITIONS)
      given(HISTORY[status])
        .when(TRANSITION_COMMANDS[transition](at(10)))
        .thenFails('not_found');
  });

  it('PayoutPaid carries the fee of the request, for the ledger to settle', () => {
    given(HISTORY.processing)
      .when({ type: 'PayPayout', at: at(4), externalId: null })
      .then([{ type: 'PayoutPaid', data: { payoutId: 42, accountId: 'acc_1', at: at(4), externalId: null, feeAmount: 1_000 } }]);
    const withAnotherFee = [{ type: 'PayoutRequested', data: { ...REQUESTED, feeAmount: 2_345 } } as PayoutEvent, ...HISTORY.processing.slice(1)];
    const decision = decidePayout({ type: 'PayPayout', at: at(4), externalId: 'x' }, fold(withAnotherFee));
    expect(decision).toEqual([{ type: 'PayoutPaid', data: { payoutId: 42, accountId: 'acc_1', at: at(4), externalId: 'x', feeAmount: 2_345 } }]);
  });
});

describe('payout: evolve', () => {
  it('paid sets externalId and processedAt, no statusReason', () => {
    expect(fold([...HISTORY.processing, payoutPaid('bank-77', at(5))])).toEqual({
      status: 'paid',
      requested: requested().data,
      externalId: 'bank-77',
      processedAt: at(5),
    });
  });

  it('paid without an external id keeps it null', () => {
    expect(fold([...HISTORY.processing, payoutPaid(null, at(5))])).toEqual({
      status: 'paid',
      requested: requested().data,
      externalId: null,
      processedAt: at(5),
    });
  });

  it('rejected sets statusReason and processedAt', () => {
    for (const from of ['pending', 'approved', 'processing'] as const) {
      expect(fold([...HISTORY[from], rejected('wrong phone', at(6))])).toEqual({
        status: 'rejected',
        requested: requested().data,
        statusReason: 'wrong phone',
        processedAt: at(6),
      });
    }
  });

  it('cancelled sets statusReason and processedAt', () => {
    expect(fold([...HISTORY.pending, cancelled('merchant asked', at(7))])).toEqual({
      status: 'cancelled',
      requested: requested().data,
      statusReason: 'merchant asked',
      processedAt: at(7),
    });
  });

  it('approve and process set neither processedAt nor statusReason', () => {
    expect(fold(HISTORY.pending)).toEqual({ status: 'pending', requested: requested().data });
    expect(fold(HISTORY.approved)).toEqual({ status: 'approved', requested: requested().data });
    expect(fold(HISTORY.processing)).toEqual({ status: 'processing', requested: requested().data });
  });
});

describe('payout: isShownPayout', () => {
  it('only payouts reserved at least once are shown', () => {
    expect(isShownPayout(initialPayout())).toBe(false);
    expect(isShownPayout(fold(HISTORY.requested))).toBe(false);
    expect(isShownPayout(fold(HISTORY.refused))).toBe(false);
    for (const status of PAYOUT_STATUSES) expect(isShownPayout(fold(HISTORY[status]))).toBe(true);
  });
});

describe('payout: names', () => {
  it('stream and reservation ids', () => {
    expect(payoutStreamName(42)).toBe('payout-42');
    expect(payoutReservationId(42)).toBe('po_42');
    expect(payoutOfReservation(payoutReservationId(42))).toBe(42);
    for (const other of ['rf_42', 'po_', 'po_042', 'po_4.2', 'po_99999999999999999', '__proto__']) expect(payoutOfReservation(other)).toBeNull();
  });
});
