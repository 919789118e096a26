/**
 * Refunds on the invoice decider, given/when/then:
 *
 *   given(past invoice events).when(command).then(events it records)
 *                                           .thenFails(error code, param?)
 *                                           .thenNothing()   // an idempotent repeat: []
 *
 * The state is built by folding the given events with evolveInvoice; the state is
 * frozen, so a decision that tried to mutate it would throw.
 *
 * The invoice decides how much may still be refunded: its amount less what was
 * refunded and what pending refunds hold. Then a property: for any sequence of
 * requests and resolutions, refunded + pending never exceeds the invoice amount and
 * refundedAmount is the sum of the succeeded refunds.
 */
import { Refusal } from '#ledger';
import fc from 'fast-check';
import { invoiceAmounts } from './fees';
import {
  decideInvoice,
  evolveInvoice,
  initialInvoice,
  InvoiceCommand,
  InvoiceCreatedData,
  invoiceDecider,
  InvoiceEvent,
  InvoiceState,
  InvoiceStatus,
  isPaid,
  MAX_REFUNDS_PER_INVOICE,
  PaidInvoice,
  refundableRemainder,
} from './invoice';
import { givenWhenThen } from '../testing/given-when-then';

// ---------------------------------------------------------------------------------
// Fixtures

const T0 = Date.parse('2025-03-01T10:00:00.000Z');
/** The gateway clock `minutes` after T0, ISO. */
const at = (minutes = 0): string => new Date(T0 + minutes * 60_000).toISOString();

const INVOICE_ID = 'inv_0123456789abcdefghijklmn';
/** 1000.00 */
const AMOUNT = 100_000;
/** SBP at 1.50 %, the whole fee on the buyer (the project default): payable 1015.00, net 1000.00. */
const AMOUNTS = invoiceAmounts(AMOUNT, 15_000, 15_000);

const CREATED: InvoiceCreatedData = {
  invoiceId: INVOICE_ID,
  projectId: 'prj_1',
  accountId: 'acc_1',
  mode: 'live',
  orderId: 'order-1',
  amount: AMOUNT,
  method: null,
  methodRates: { sbp: 15_000, card: 30_000 },
  customerFee: { kind: 'project_default', share: 100 },
  amounts: AMOUNTS,
  description: null,
  customer: {},
  customFields: null,
  successUrl: null,
  failUrl: null,
  createdAt: at(0),
  expiresAt: at(60),
};

const created = (): InvoiceEvent => ({ type: 'InvoiceCreated', data: CREATED });
const methodChosen = (): InvoiceEvent => ({
  type: 'InvoiceMethodChosen',
  data: { invoiceId: INVOICE_ID, method: 'sbp', amounts: AMOUNTS, at: at(1) },
});
const paid = (): InvoiceEvent => ({
  type: 'InvoicePaid',
  data: {
    invoiceId: INVOICE_ID,
    accountId: 'acc_1',
    mode: 'live',
    method: 'sbp',
    paidAt: at(5),
    availableAt: null,
    netAmount: AMOUNTS.netAmount,
    feeAmount: AMOUNTS.feeAmount,
  },
});
const failed = (): InvoiceEvent => ({ type: 'InvoiceFailed', data: { invoiceId: INVOICE_ID, at: at(5), reason: 'declined' } });
const expired = (): InvoiceEvent => ({ type: 'InvoiceExpired', data: { invoiceId: INVOICE_ID, at: at(61) } });

const refundRequested = (refundId: string, amount: number, when = at(10)): InvoiceEvent => ({
  type: 'InvoiceRefundRequested',
  data: { invoiceId: INVOICE_ID, refundId, projectId: 'prj_1', accountId: 'acc_1', mode: 'live', amount, at: when },
});
const refunded = (refundId: string, amount: number, refundedAmount: number, when = at(20)): InvoiceEvent => ({
  type: 'InvoiceRefunded',
  data: { invoiceId: INVOICE_ID, refundId, amount, refundedAmount, at: when },
});
const refundReleased = (refundId: string, amount: number, reason: 'failed' | 'refused', when = at(20)): InvoiceEvent => ({
  type: 'InvoiceRefundReleased',
  data: { invoiceId: INVOICE_ID, refundId, amount, reason, at: when },
});

const requestRefund = (refundId: string, amount: number | null, when = at(10)): InvoiceCommand => ({
  type: 'RequestRefund',
  refundId,
  amount,
  at: when,
});
const resolveRefund = (refundId: string, outcome: 'succeeded' | 'failed' | 'refused', when = at(20)): InvoiceCommand => ({
  type: 'ResolveRefund',
  refundId,
  outcome,
  at: when,
});

const PAID = [created(), methodChosen(), paid()];

// ---------------------------------------------------------------------------------
// given / when / then

const fold = (events: readonly InvoiceEvent[]): InvoiceState => events.reduce(evolveInvoice, initialInvoice());
/** The folded state of a paid invoice (the test fails on another phase). */
const foldPaid = (events: readonly InvoiceEvent[]): PaidInvoice => {
  const state = fold(events);
  if (!isPaid(state)) throw new Error(`expected a paid invoice, got one in ${state.status}`);
  return state;
};

const given = givenWhenThen(invoiceDecider, Refusal);

/** The events the command records on top of `events` (fails the test on an error). */
function decided(events: InvoiceEvent[], command: InvoiceCommand): InvoiceEvent[] {
  const decision = decideInvoice(command, fold(events));
  if (!Array.isArray(decision)) throw new Error(`expected events, got ${decision.code}: ${decision.message}`);
  return decision;
}

// ---------------------------------------------------------------------------------

describe('invoice refunds: which invoices may be refunded', () => {
  const FULLY_REFUNDED = [...PAID, refundRequested('rf_1', AMOUNT), refunded('rf_1', AMOUNT, AMOUNT)];
  const cases: [InvoiceStatus, InvoiceEvent[]][] = [
    ['created', [created()]],
    ['pending', [created(), methodChosen()]],
    ['failed', [created(), methodChosen(), failed()]],
    ['expired', [created(), expired()]],
    ['refunded', FULLY_REFUNDED],
  ];

  it.each(cases)('an invoice in %s: conflict, for a full and for a partial refund', (status, history) => {
    expect(fold(history).status).toBe(status);
    given(history).when(requestRefund('rf_new', null)).thenFails('conflict');
    given(history).when(requestRefund('rf_new', 100)).thenFails('conflict');
  });

  it('a refunded invoice is a conflict, not refund_exceeds_amount (the status is checked first)', () => {
    given(FULLY_REFUNDED)
      .when(requestRefund('rf_new', AMOUNT + 1))
      .thenFails('conflict');
  });

  it('an invoice that does not exist: invoice_not_found (request and resolve)', () => {
    given([]).when(requestRefund('rf_1', null)).thenFails('invoice_not_found');
    given([]).when(resolveRefund('rf_1', 'succeeded')).thenFails('invoice_not_found');
  });

  it('a paid invoice may be refunded', () => {
    expect(fold(PAID).status).toBe('paid');
    given(PAID)
      .when(requestRefund('rf_1', 100))
      .then([refundRequested('rf_1', 100)]);
  });

  it('a partially refunded invoice may be refunded again', () => {
    const history = [...PAID, refundRequested('rf_1', 30_000), refunded('rf_1', 30_000, 30_000)];
    expect(fold(history).status).toBe('partially_refunded');
    given(history)
      .when(requestRefund('rf_2', 100, at(30)))
      .then([refundRequested('rf_2', 100, at(30))]);
  });
});

describe('invoice refunds: RequestRefund', () => {
  it('a full refund (amount null) asks for the whole invoice amount, naming the ledger to reserve it on', () => {
    given(PAID)
      .when(requestRefund('rf_1', null, at(12)))
      .then([
        {
          type: 'InvoiceRefundRequested',
          data: { invoiceId: INVOICE_ID, refundId: 'rf_1', projectId: 'prj_1', accountId: 'acc_1', mode: 'live', amount: AMOUNT, at: at(12) },
        },
      ]);
  });

  it('a partial refund asks for its amount and leaves the rest refundable', () => {
    given(PAID)
      .when(requestRefund('rf_1', 30_000))
      .then([refundRequested('rf_1', 30_000)]);
    const state = foldPaid([...PAID, refundRequested('rf_1', 30_000)]);
    expect(state.refundPendingAmount).toBe(30_000);
    expect(state.refundedAmount).toBe(0);
    expect(state.status).toBe('paid');
    expect(state.refunds.toRecord()).toEqual({ rf_1: { amount: 30_000, status: 'requested', requestedAt: at(10) } });
    expect(refundableRemainder(state)).toBe(70_000);
  });

  it('the whole amount as a partial refund is allowed', () => {
    given(PAID)
      .when(requestRefund('rf_1', AMOUNT))
      .then([refundRequested('rf_1', AMOUNT)]);
  });

  it('a full refund after a succeeded partial one is the remainder', () => {
    given([...PAID, refundRequested('rf_1', 30_000), refunded('rf_1', 30_000, 30_000)])
      .when(requestRefund('rf_2', null))
      .then([refundRequested('rf_2', 70_000)]);
  });

  it('the remainder counts pending refunds: a full refund next to a pending one is what is left', () => {
    given([...PAID, refundRequested('rf_1', 25_000)])
      .when(requestRefund('rf_2', null))
      .then([refundRequested('rf_2', 75_000)]);
  });

  it('the remainder counts refunded and pending refunds together', () => {
    const history = [...PAID, refundRequested('rf_1', 30_000), refunded('rf_1', 30_000, 30_000), refundRequested('rf_2', 50_000)];
    expect(refundableRemainder(foldPaid(history))).toBe(20_000);
    given(history).when(requestRefund('rf_3', 20_001)).thenFails('refund_exceeds_amount', 'amount');
    given(history)
      .when(requestRefund('rf_3', 20_000))
      .then([refundRequested('rf_3', 20_000)]);
    given(history)
      .when(requestRefund('rf_3', null))
      .then([refundRequested('rf_3', 20_000)]);
  });

  it('the refusal names the remainder as money is written in the API (rubles, two decimals), not in kopecks', () => {
    const history = [...PAID, refundRequested('rf_1', 30_000), refunded('rf_1', 30_000, 30_000), refundRequested('rf_2', 50_000)];
    const refusal = decideInvoice(requestRefund('rf_3', 20_001), foldPaid(history)) as Refusal;
    expect(refusal.message).toBe('Сумма возврата больше невозвращённого остатка счёта: остаток 200.00 с учётом возвратов в обработке');
  });

  it('a partial refund above the invoice amount: refund_exceeds_amount, param amount', () => {
    given(PAID)
      .when(requestRefund('rf_1', AMOUNT + 1))
      .thenFails('refund_exceeds_amount', 'amount');
  });

  it('the remainder is of the invoice amount, not of what the buyer paid with the fee on top', () => {
    expect(AMOUNTS.payableAmount).toBe(101_500);
    given(PAID).when(requestRefund('rf_1', AMOUNTS.payableAmount)).thenFails('refund_exceeds_amount', 'amount');
  });

  it('a partial refund above a remainder held by a pending refund: refund_exceeds_amount, param amount', () => {
    given([...PAID, refundRequested('rf_1', 60_000)])
      .when(requestRefund('rf_2', 40_001))
      .thenFails('refund_exceeds_amount', 'amount');
  });

  it('a full refund with nothing left (all of it pending): refund_exceeds_amount without a param', () => {
    given([...PAID, refundRequested('rf_1', AMOUNT)])
      .when(requestRefund('rf_2', null))
      .thenFails('refund_exceeds_amount');
  });

  it('a full refund with nothing left (refunded and pending): refund_exceeds_amount without a param', () => {
    given([...PAID, refundRequested('rf_1', 40_000), refunded('rf_1', 40_000, 40_000), refundRequested('rf_2', 60_000)])
      .when(requestRefund('rf_3', null))
      .thenFails('refund_exceeds_amount');
  });

  it('a partial refund with nothing left: refund_exceeds_amount, param amount', () => {
    given([...PAID, refundRequested('rf_1', AMOUNT)])
      .when(requestRefund('rf_2', 1))
      .thenFails('refund_exceeds_amount', 'amount');
  });

  it('a zero or negative amount is never granted (refund_exceeds_amount, param amount)', () => {
    given(PAID).when(requestRefund('rf_1', 0)).thenFails('refund_exceeds_amount', 'amount');
    given(PAID).when(requestRefund('rf_1', -100)).thenFails('refund_exceeds_amount', 'amount');
  });

  it('the same refundId again records nothing (idempotent), whatever the amount', () => {
    const history = [...PAID, refundRequested('rf_1', 30_000)];
    given(history)
      .when(requestRefund('rf_1', 30_000, at(11)))
      .thenNothing();
    given(history)
      .when(requestRefund('rf_1', null, at(11)))
      .thenNothing();
    // Even an amount that could no longer be granted: the request was decided once.
    given(history)
      .when(requestRefund('rf_1', AMOUNT, at(11)))
      .thenNothing();
  });

  it('the same refundId again after it was resolved records nothing, even on a refunded invoice', () => {
    given([...PAID, refundRequested('rf_1', 30_000), refundReleased('rf_1', 30_000, 'failed')])
      .when(requestRefund('rf_1', 30_000))
      .thenNothing();
    given([...PAID, refundRequested('rf_1', AMOUNT), refunded('rf_1', AMOUNT, AMOUNT)])
      .when(requestRefund('rf_1', null))
      .thenNothing();
  });

  it('refund ids such as __proto__ or constructor are ids like any other', () => {
    for (const id of ['__proto__', 'constructor', 'toString']) {
      given(PAID)
        .when(requestRefund(id, 1_000))
        .then([refundRequested(id, 1_000)]);
      given([...PAID, refundRequested(id, 1_000)])
        .when(requestRefund(id, 1_000))
        .thenNothing();
      given(PAID).when(resolveRefund(id, 'succeeded')).thenFails('conflict');
    }
  });
});

describe('invoice refunds: ResolveRefund', () => {
  it('succeeded: InvoiceRefunded with the running refundedAmount; the invoice becomes partially_refunded', () => {
    const history = [...PAID, refundRequested('rf_1', 30_000)];
    given(history)
      .when(resolveRefund('rf_1', 'succeeded', at(21)))
      .then([
        {
          type: 'InvoiceRefunded',
          data: { invoiceId: INVOICE_ID, refundId: 'rf_1', amount: 30_000, refundedAmount: 30_000, at: at(21) },
        },
      ]);
    const state = foldPaid([...history, refunded('rf_1', 30_000, 30_000, at(21))]);
    expect(state.status).toBe('partially_refunded');
    expect(state.refundedAmount).toBe(30_000);
    expect(state.refundPendingAmount).toBe(0);
    expect(state.refunds.toRecord()).toEqual({ rf_1: { amount: 30_000, status: 'succeeded', requestedAt: at(10) } });
    expect(refundableRemainder(state)).toBe(70_000);
  });

  it('two partial refunds: partially_refunded, then refunded once the whole amount is back', () => {
    let history = [...PAID, refundRequested('rf_1', 30_000), refundRequested('rf_2', 70_000)];
    given(history)
      .when(resolveRefund('rf_1', 'succeeded'))
      .then([refunded('rf_1', 30_000, 30_000)]);
    history = [...history, refunded('rf_1', 30_000, 30_000)];
    expect(fold(history).status).toBe('partially_refunded');

    given(history)
      .when(resolveRefund('rf_2', 'succeeded', at(25)))
      .then([refunded('rf_2', 70_000, 100_000, at(25))]);
    history = [...history, refunded('rf_2', 70_000, 100_000, at(25))];
    const state = foldPaid(history);
    expect(state.status).toBe('refunded');
    expect(state.refundedAmount).toBe(AMOUNT);
    expect(state.refundPendingAmount).toBe(0);
    expect(refundableRemainder(state)).toBe(0);
  });

  it('refunds may succeed in another order than they were asked for', () => {
    const history = [...PAID, refundRequested('rf_1', 30_000), refundRequested('rf_2', 70_000)];
    given(history)
      .when(resolveRefund('rf_2', 'succeeded'))
      .then([refunded('rf_2', 70_000, 70_000)]);
    given([...history, refunded('rf_2', 70_000, 70_000)])
      .when(resolveRefund('rf_1', 'succeeded'))
      .then([refunded('rf_1', 30_000, 100_000)]);
  });

  it('a full refund that succeeds makes the invoice refunded', () => {
    const state = fold([...PAID, ...decided(PAID, requestRefund('rf_1', null))]);
    const history = [...PAID, refundRequested('rf_1', AMOUNT)];
    expect(state).toEqual(fold(history));
    given(history)
      .when(resolveRefund('rf_1', 'succeeded'))
      .then([refunded('rf_1', AMOUNT, AMOUNT)]);
    expect(fold([...history, refunded('rf_1', AMOUNT, AMOUNT)]).status).toBe('refunded');
  });

  it.each(['failed', 'refused'] as const)('%s: InvoiceRefundReleased restores the remainder; the status is unchanged', (outcome) => {
    const history = [...PAID, refundRequested('rf_1', 30_000)];
    given(history)
      .when(resolveRefund('rf_1', outcome, at(22)))
      .then([
        {
          type: 'InvoiceRefundReleased',
          data: { invoiceId: INVOICE_ID, refundId: 'rf_1', amount: 30_000, reason: outcome, at: at(22) },
        },
      ]);
    const after = [...history, refundReleased('rf_1', 30_000, outcome, at(22))];
    const state = foldPaid(after);
    expect(state.status).toBe('paid');
    expect(state.refundPendingAmount).toBe(0);
    expect(state.refundedAmount).toBe(0);
    expect(state.refunds.toRecord()).toEqual({ rf_1: { amount: 30_000, status: outcome, requestedAt: at(10) } });
    expect(refundableRemainder(state)).toBe(AMOUNT);
    // The whole amount may be asked for again, under a new id.
    given(after)
      .when(requestRefund('rf_2', null))
      .then([refundRequested('rf_2', AMOUNT)]);
  });

  it('a failed refund on a partially refunded invoice keeps it partially_refunded and restores only its own amount', () => {
    const history = [
      ...PAID,
      refundRequested('rf_1', 30_000),
      refunded('rf_1', 30_000, 30_000),
      refundRequested('rf_2', 70_000),
      refundReleased('rf_2', 70_000, 'failed'),
    ];
    const state = foldPaid(history);
    expect(state.status).toBe('partially_refunded');
    expect(state.refundedAmount).toBe(30_000);
    expect(refundableRemainder(state)).toBe(70_000);
    given(history)
      .when(requestRefund('rf_3', null))
      .then([refundRequested('rf_3', 70_000)]);
  });

  it('resolving twice records nothing, whatever the second outcome', () => {
    const succeeded = [...PAID, refundRequested('rf_1', 30_000), refunded('rf_1', 30_000, 30_000)];
    const failedOnce = [...PAID, refundRequested('rf_1', 30_000), refundReleased('rf_1', 30_000, 'failed')];
    const refusedOnce = [...PAID, refundRequested('rf_1', 30_000), refundReleased('rf_1', 30_000, 'refused')];
    for (const history of [succeeded, failedOnce, refusedOnce]) {
      for (const outcome of ['succeeded', 'failed', 'refused'] as const) {
        given(history)
          .when(resolveRefund('rf_1', outcome, at(30)))
          .thenNothing();
      }
    }
  });

  it('resolving a refund the invoice never granted: conflict', () => {
    given(PAID).when(resolveRefund('rf_unknown', 'succeeded')).thenFails('conflict');
    given([...PAID, refundRequested('rf_1', 30_000)])
      .when(resolveRefund('rf_2', 'failed'))
      .thenFails('conflict');
    given([...PAID, refundRequested('rf_1', 30_000)])
      .when(resolveRefund('rf_2', 'refused'))
      .thenFails('conflict');
  });
});

// ---------------------------------------------------------------------------------
// Property

const REFUND_IDS = ['rf_a', 'rf_b', 'rf_c', 'rf_d', 'rf_e', 'rf_f'] as const;

/** An amount fixed in the plan, or one taken from the state when the command runs. */
type AmountPlan = { readonly abs: number } | { readonly of: 'remainder' | 'remainderPlusOne' } | { readonly permille: number } | null;

type OpPlan =
  | { readonly op: 'request'; readonly refund: number; readonly amount: AmountPlan }
  | { readonly op: 'resolve'; readonly refund: number; readonly outcome: 'succeeded' | 'failed' | 'refused' };

const amountPlan: fc.Arbitrary<AmountPlan> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(null) },
  { weight: 3, arbitrary: fc.integer({ min: -1, max: AMOUNT + 1 }).map((abs) => ({ abs })) },
  { weight: 2, arbitrary: fc.constantFrom('remainder' as const, 'remainderPlusOne' as const).map((of) => ({ of })) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 1000 }).map((permille) => ({ permille })) },
);
const refundIndex = fc.integer({ min: 0, max: REFUND_IDS.length - 1 });
const opPlan: fc.Arbitrary<OpPlan> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ op: fc.constant('request' as const), refund: refundIndex, amount: amountPlan }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('resolve' as const),
      refund: refundIndex,
      outcome: fc.constantFrom('succeeded' as const, 'failed' as const, 'refused' as const),
    }),
  },
);

function resolveAmount(plan: AmountPlan, remainder: number): number | null {
  if (plan === null) return null;
  if ('abs' in plan) return plan.abs;
  if ('permille' in plan) return Math.floor((remainder * plan.permille) / 1000);
  return plan.of === 'remainder' ? remainder : remainder + 1;
}

describe('invoice refunds: many on one invoice', () => {
  const refundId = (i: number): string => `rf_${i.toString(36).padStart(24, '0')}`;
  /** `n` refunds of `each` (1.00 unless told) asked for, each settled as `outcome` picks (requested: still pending). */
  function refundsAsked(n: number, outcome: (i: number) => 'requested' | 'succeeded' | 'failed' | 'refused', each = 100): InvoiceEvent[] {
    const events: InvoiceEvent[] = [...PAID];
    let refundedSoFar = 0;
    for (let i = 0; i < n; i++) {
      events.push(refundRequested(refundId(i), each));
      const o = outcome(i);
      if (o === 'succeeded') events.push(refunded(refundId(i), each, (refundedSoFar += each)));
      else if (o !== 'requested') events.push(refundReleased(refundId(i), each, o));
    }
    return events;
  }
  const OUTCOMES = ['succeeded', 'failed', 'requested'] as const;
  const mixed = (i: number) => OUTCOMES[i % OUTCOMES.length]!;

  it(`takes ${MAX_REFUNDS_PER_INVOICE} refunds, succeeded, failed or pending; the next is a conflict, full or partial`, () => {
    expect(MAX_REFUNDS_PER_INVOICE).toBe(100);
    given(refundsAsked(MAX_REFUNDS_PER_INVOICE - 1, mixed))
      .when(requestRefund('rf_last', 100, at(30)))
      .then([refundRequested('rf_last', 100, at(30))]);
    const full = refundsAsked(MAX_REFUNDS_PER_INVOICE, mixed);
    expect(fold(full).status).toBe('partially_refunded');
    expect(refundableRemainder(foldPaid(full))).toBeGreaterThan(0);
    given(full)
      .when(requestRefund('rf_next', 100, at(30)))
      .thenFails('conflict');
    given(full)
      .when(requestRefund('rf_next', null, at(30)))
      .thenFails('conflict');
    const refusal = decideInvoice(requestRefund('rf_next', 100, at(30)), fold(full));
    expect(refusal).toBeInstanceOf(Refusal);
    expect((refusal as Refusal).message).toContain(`${MAX_REFUNDS_PER_INVOICE} возвратов`);
  });

  it('failed refunds count too; refused ones (answered 422, never shown) do not, so retrying until the balance allows never locks the invoice; a repeat of one asked is still nothing', () => {
    const refusedOnly = refundsAsked(MAX_REFUNDS_PER_INVOICE, () => 'refused');
    expect(fold(refusedOnly).status).toBe('paid');
    given(refusedOnly)
      .when(requestRefund('rf_next', 100, at(30)))
      .then([refundRequested('rf_next', 100, at(30))]);
    given(refundsAsked(2 * MAX_REFUNDS_PER_INVOICE, (i) => (i < MAX_REFUNDS_PER_INVOICE ? 'refused' : 'failed')))
      .when(requestRefund('rf_next', 100, at(30)))
      .thenFails('conflict');
    given(refundsAsked(MAX_REFUNDS_PER_INVOICE, () => 'failed'))
      .when(requestRefund('rf_next', null, at(30)))
      .thenFails('conflict');
    given(refusedOnly)
      .when(requestRefund(refundId(7), 100))
      .thenNothing();
    given(refundsAsked(MAX_REFUNDS_PER_INVOICE, mixed))
      .when(resolveRefund(refundId(2), 'succeeded', at(30)))
      .then([refunded(refundId(2), 100, 3_500, at(30))]);
  });

  it('the status is checked first: a refunded invoice at the limit is the same conflict as any refunded one', () => {
    const events = refundsAsked(MAX_REFUNDS_PER_INVOICE - 1, () => 'refused');
    events.push(refundRequested('rf_all', AMOUNT), refunded('rf_all', AMOUNT, AMOUNT));
    expect(fold(events).status).toBe('refunded');
    const refusal = decideInvoice(requestRefund('rf_next', null, at(30)), fold(events));
    expect((refusal as Refusal).code).toBe('conflict');
    expect((refusal as Refusal).message).toContain('refunded');
  });

  /** Every object reachable from `value` through own enumerable properties (as deepFreeze walks it). */
  function reachable(value: unknown): Set<object> {
    const seen = new Set<object>();
    const stack = [value];
    while (stack.length > 0) {
      const v = stack.pop();
      if (v === null || typeof v !== 'object' || seen.has(v)) continue;
      seen.add(v);
      stack.push(...Object.values(v));
    }
    return seen;
  }
  /** The properties of the objects `after` holds and `before` does not: what one evolve built. */
  function slotsBuilt(before: InvoiceState, after: InvoiceState): number {
    const old = reachable(before);
    let slots = 0;
    for (const o of reachable(after)) if (!old.has(o)) slots += Object.keys(o).length;
    return slots;
  }

  it('folding 5,000 refunds (events past the limit, as an older stream may hold) is linear: each event builds a bounded amount, whatever came before', () => {
    const N = 5_000;
    const events = refundsAsked(N, (i) => (i % 10 === 9 ? 'failed' : 'succeeded'), 1);
    const built: { after: number; type: InvoiceEvent['type']; slots: number }[] = [];
    const MEASURED = new Set([10, 1_000, N - 1]);
    let state = initialInvoice();
    let asked = 0;
    let firstAsked: InvoiceState | null = null;
    for (const event of events) {
      if (event.type === 'InvoiceRefundRequested') asked += 1;
      const next = evolveInvoice(state, event);
      if (MEASURED.has(asked) && event.type !== 'InvoicePaid') built.push({ after: asked, type: event.type, slots: slotsBuilt(state, next) });
      state = next;
      if (asked === 1 && event.type === 'InvoiceRefundRequested') firstAsked = next;
    }
    expect(built.map((b) => `${b.after} ${b.type}`).sort()).toEqual(
      [
        '10 InvoiceRefundRequested',
        '10 InvoiceRefundReleased',
        '1000 InvoiceRefundRequested',
        '1000 InvoiceRefundReleased',
        '4999 InvoiceRefundRequested',
        '4999 InvoiceRefunded',
      ].sort(),
    );
    // A new state, its refunds' map and one path of the trie (at most 7 nodes of 32 slots):
    // not a copy of every refund, as spreading a record per event was (5,000 slots here).
    for (const b of built) expect({ ...b, bounded: b.slots <= 300 }).toEqual({ ...b, bounded: true });

    const paidState = state as PaidInvoice;
    expect(paidState.refunds.size).toBe(N);
    expect(paidState.refundedAmount).toBe((N * 9) / 10);
    expect(paidState.refundPendingAmount).toBe(0);
    expect(paidState.status).toBe('partially_refunded');
    expect(paidState.refunds.get(refundId(0))).toEqual({ amount: 1, status: 'succeeded', requestedAt: at(10) });
    expect(paidState.refunds.get(refundId(N - 1))).toEqual({ amount: 1, status: 'failed', requestedAt: at(10) });
    expect(paidState.refunds.get('rf_unknown')).toBeUndefined();
    // A state folded earlier is untouched by the events folded after it.
    const early = firstAsked as PaidInvoice | null;
    expect(early?.refunds.size).toBe(1);
    expect(early?.refunds.get(refundId(0))?.status).toBe('requested');
    expect(early?.refunds.get(refundId(1))).toBeUndefined();
  });
});

describe('invoice refunds: property', () => {
  it('refunded + pending never exceed the invoice amount; refundedAmount is the sum of the succeeded refunds', () => {
    fc.assert(
      fc.property(fc.array(opPlan, { maxLength: 40 }), (plans) => {
        let state = foldPaid(PAID);
        let minute = 10;
        /** What each refund succeeded with, by the events recorded. */
        const succeeded = new Map<string, number>();
        for (const plan of plans) {
          minute += 1;
          const refundId = REFUND_IDS[plan.refund]!;
          const command: InvoiceCommand =
            plan.op === 'request'
              ? requestRefund(refundId, resolveAmount(plan.amount, refundableRemainder(state)), at(minute))
              : resolveRefund(refundId, plan.outcome, at(minute));
          const decision = decideInvoice(command, state);
          if (!Array.isArray(decision)) {
            expect(decision).toBeInstanceOf(Refusal);
            expect(['conflict', 'refund_exceeds_amount']).toContain(decision.code);
            continue;
          }
          for (const event of decision) {
            if (event.type === 'InvoiceRefunded') {
              expect(succeeded.has(event.data.refundId)).toBe(false);
              succeeded.set(event.data.refundId, event.data.amount);
            }
            const next = evolveInvoice(state, event);
            if (!isPaid(next)) throw new Error(`a refund event left the paid phase: ${next.status}`);
            state = next;
          }

          const succeededSum = [...succeeded.values()].reduce((a, b) => a + b, 0);
          const pendingSum = Object.values(state.refunds.toRecord())
            .filter((r) => r.status === 'requested')
            .reduce((a, r) => a + r.amount, 0);
          expect(state.refundedAmount + state.refundPendingAmount).toBeLessThanOrEqual(AMOUNT);
          expect(state.refundedAmount).toBe(succeededSum);
          expect(state.refundPendingAmount).toBe(pendingSum);
          expect(state.refundPendingAmount).toBeGreaterThanOrEqual(0);
          for (const r of Object.values(state.refunds.toRecord())) expect(r.amount).toBeGreaterThan(0);
          expect(state.status).toBe(state.refundedAmount === 0 ? 'paid' : state.refundedAmount === AMOUNT ? 'refunded' : 'partially_refunded');
        }
      }),
      { numRuns: 300 },
    );
  });
});
