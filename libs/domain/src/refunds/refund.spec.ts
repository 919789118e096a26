/**
 * The refund decider, given/when/then:
 *
 *   given(past refund events).when(command).then(events) / .thenFails(code) / .thenNothing()
 *
 * pending → succeeded (the processor) or pending → failed (the bank's refusal, via
 * the operator API); both final. A refund that does not exist answers refund_not_found.
 */
import { Refusal } from '#ledger';
import {
  decideRefund,
  evolveRefund,
  initialRefund,
  RefundState,
  REFUND_ID,
  RefundCommand,
  RefundCreatedData,
  refundDecider,
  RefundEvent,
  refundStreamName,
} from './refund';
import { givenWhenThen } from '../testing/given-when-then';

const T0 = Date.parse('2025-03-01T10:00:00.000Z');
const at = (seconds = 0): string => new Date(T0 + seconds * 1000).toISOString();

const REFUND_ID_VALUE = 'rf_0123456789abcdefghijklmn';

const CREATED: RefundCreatedData = {
  refundId: REFUND_ID_VALUE,
  invoiceId: 'inv_1',
  projectId: 'prj_1',
  accountId: 'acc_1',
  mode: 'live',
  amount: 30_000,
  createdAt: at(0),
  processAt: at(10),
};

const OUTCOME = { refundId: REFUND_ID_VALUE, invoiceId: 'inv_1', accountId: 'acc_1', mode: 'live' as const, amount: 30_000 };

const refundCreated = (): RefundEvent => ({ type: 'RefundCreated', data: CREATED });
const refundSucceeded = (when = at(10)): RefundEvent => ({ type: 'RefundSucceeded', data: { ...OUTCOME, at: when } });
const refundFailed = (reason = 'bank_declined', when = at(5)): RefundEvent => ({
  type: 'RefundFailed',
  data: { ...OUTCOME, at: when, reason },
});

const createRefund = (data: RefundCreatedData = CREATED): RefundCommand => ({ type: 'CreateRefund', data });
const completeRefund = (when = at(10)): RefundCommand => ({ type: 'CompleteRefund', at: when });
const failRefund = (reason = 'bank_declined', when = at(5)): RefundCommand => ({ type: 'FailRefund', at: when, reason });

const fold = (events: readonly RefundEvent[]): RefundState => events.reduce(evolveRefund, initialRefund());

const given = givenWhenThen(refundDecider, Refusal);

describe('refund: create', () => {
  it('creates a pending refund', () => {
    given([]).when(createRefund()).then([refundCreated()]);
    const state = fold([refundCreated()]);
    expect(state).toEqual({ created: CREATED, status: 'pending' });
  });

  it('created twice: the second records nothing, whatever it carries', () => {
    given([refundCreated()]).when(createRefund()).thenNothing();
    given([refundCreated()])
      .when(createRefund({ ...CREATED, amount: 1, createdAt: at(99) }))
      .thenNothing();
  });

  it('creating a refund that already finished records nothing', () => {
    given([refundCreated(), refundSucceeded()]).when(createRefund()).thenNothing();
    given([refundCreated(), refundFailed()]).when(createRefund()).thenNothing();
  });
});

describe('refund: created unfunded (answered, then refused by the ledger)', () => {
  const unfunded = (when = at(6)): RefundCommand => ({ type: 'CreateUnfundedRefund', data: CREATED, at: when, reason: 'insufficient_balance' });

  it('is created and failed at once, so the merchant learns its end like any other', () => {
    given([])
      .when(unfunded())
      .then([refundCreated(), refundFailed('insufficient_balance', at(6))]);
    expect(fold([refundCreated(), refundFailed('insufficient_balance', at(6))])).toEqual({
      created: CREATED,
      status: 'failed',
      completedAt: at(6),
      failureReason: 'insufficient_balance',
    });
  });

  it('a refund that exists already (funded, or created unfunded before): nothing', () => {
    given([refundCreated()]).when(unfunded()).thenNothing();
    given([refundCreated(), refundFailed('insufficient_balance', at(6))])
      .when(unfunded(at(9)))
      .thenNothing();
  });
});

describe('refund: complete', () => {
  it('pending → succeeded, the outcome carrying what the ledger and the invoice need', () => {
    given([refundCreated()])
      .when(completeRefund(at(11)))
      .then([
        {
          type: 'RefundSucceeded',
          data: { refundId: REFUND_ID_VALUE, invoiceId: 'inv_1', accountId: 'acc_1', mode: 'live', amount: 30_000, at: at(11) },
        },
      ]);
    const state = fold([refundCreated(), refundSucceeded(at(11))]);
    expect(state).toEqual({ status: 'succeeded', created: refundCreated().data, completedAt: at(11) });
  });

  it('completed again: nothing', () => {
    given([refundCreated(), refundSucceeded()])
      .when(completeRefund(at(20)))
      .thenNothing();
  });

  it('completed after it failed: nothing (the failure stands)', () => {
    given([refundCreated(), refundFailed()])
      .when(completeRefund(at(20)))
      .thenNothing();
  });
});

describe('refund: fail', () => {
  it('pending → failed, with the reason', () => {
    given([refundCreated()])
      .when(failRefund('operator: card closed', at(7)))
      .then([
        {
          type: 'RefundFailed',
          data: {
            refundId: REFUND_ID_VALUE,
            invoiceId: 'inv_1',
            accountId: 'acc_1',
            mode: 'live',
            amount: 30_000,
            at: at(7),
            reason: 'operator: card closed',
          },
        },
      ]);
    const state = fold([refundCreated(), refundFailed('operator: card closed', at(7))]);
    expect(state).toEqual({ status: 'failed', created: refundCreated().data, completedAt: at(7), failureReason: 'operator: card closed' });
  });

  it('failed twice: nothing (the first reason stands)', () => {
    given([refundCreated(), refundFailed('first')])
      .when(failRefund('second', at(8)))
      .thenNothing();
  });

  it('failed after it succeeded: conflict', () => {
    given([refundCreated(), refundSucceeded()])
      .when(failRefund('too late', at(20)))
      .thenFails('conflict');
  });
});

describe('refund: a refund that does not exist', () => {
  it('complete and fail: refund_not_found', () => {
    given([]).when(completeRefund()).thenFails('refund_not_found');
    given([]).when(failRefund()).thenFails('refund_not_found');
  });

  it('decideRefund is the decider’s decide', () => {
    expect(refundDecider.decide).toBe(decideRefund);
    expect(refundDecider.evolve).toBe(evolveRefund);
    expect(refundDecider.initialState()).toEqual(initialRefund());
    expect(initialRefund()).toEqual({ status: 'none' });
  });
});

describe('refund: ids and streams', () => {
  it('REFUND_ID: rf_ and 24 lower-case letters and digits', () => {
    expect(REFUND_ID.test(REFUND_ID_VALUE)).toBe(true);
    expect(REFUND_ID.test('rf_zzzzzzzzzzzzzzzzzzzzzzzz')).toBe(true);
    expect(REFUND_ID.test('rf_000000000000000000000000')).toBe(true);
  });

  it.each([
    ['23 characters', 'rf_0123456789abcdefghijklm'],
    ['25 characters', 'rf_0123456789abcdefghijklmno'],
    ['upper case', 'rf_0123456789ABCDEFGHIJKLMN'],
    ['another prefix', 'po_0123456789abcdefghijklmn'],
    ['no prefix', '0123456789abcdefghijklmnop'],
    ['a dash', 'rf_0123456789abcdefghijklm-'],
    ['an underscore', 'rf_0123456789abcdefghijklm_'],
    ['a trailing newline', 'rf_0123456789abcdefghijklmn\n'],
    ['a leading space', ' rf_0123456789abcdefghijklmn'],
    ['empty', ''],
  ])('REFUND_ID refuses %s', (_label, id) => {
    expect(REFUND_ID.test(id)).toBe(false);
  });

  it('refundStreamName', () => {
    expect(refundStreamName(REFUND_ID_VALUE)).toBe(`refund-${REFUND_ID_VALUE}`);
  });
});
