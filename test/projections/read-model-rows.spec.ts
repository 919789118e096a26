/**
 * The invoices and payouts read models keep rows in their own shapes, evolved from the
 * events alone (evolveInvoiceRow, evolvePayoutRow); a single read folds the stream with
 * the aggregate's decider and maps its state to the same shape (invoiceRowOf,
 * payoutRowOf). A list item and a GET of the same resource must show the same thing:
 * for random command histories run through the deciders, both ways give the same row
 * after every event. Pure: no database.
 */
import fc from 'fast-check';
import {
  decideInvoice,
  decidePayout,
  evolveInvoice,
  evolvePayout,
  initialInvoice,
  initialPayout,
  InvoiceCommand,
  InvoiceCreatedData,
  InvoiceEvent,
  InvoiceState,
  invoiceAmounts,
  PayoutCommand,
  PayoutEvent,
  PayoutRequestedData,
  PayoutState,
} from '#domain';
import { evolveInvoiceRow, InvoiceRow, invoiceRowOf } from '#payments/invoices';
import { evolvePayoutRow, PayoutRow, payoutRowOf } from '#payments/payouts';
import { fastCheckSeed } from '../support/test-seed';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = (minute: number) => new Date(T0 + minute * 60_000).toISOString();

const created = (amount: number, method: 'sbp' | 'card' | null): InvoiceCreatedData => ({
  invoiceId: '0d8f0c52-3c1e-4c57-9d0e-5b3f7a1e2c44',
  projectId: '5b9b1f0e-2a55-4f4e-8a7c-1c2d3e4f5a6b',
  accountId: '7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f',
  mode: 'live',
  orderId: 'order-1',
  amount,
  method,
  methodRates: { sbp: 15_000, card: 30_000 },
  customerFee: { kind: 'project_default', share: 50 },
  amounts: invoiceAmounts(amount, method === 'sbp' ? 15_000 : 30_000, method === 'sbp' ? 7_500 : 15_000),
  description: 'a test',
  customer: { email: 'buyer@example.com' },
  customFields: { a: 1 },
  successUrl: null,
  failUrl: null,
  createdAt: at(0),
  expiresAt: at(60),
});

// Weighted towards the paths that change a row most (payments, refunds that succeed); an
// expiry is asked for past the invoice's hour.
const invoiceCommand: fc.Arbitrary<(minute: number) => InvoiceCommand> = fc.oneof(
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('sbp', 'card')
      .map((method) => (minute: number): InvoiceCommand => ({ type: 'ChooseMethod', method: method as 'sbp' | 'card', at: at(minute) })),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({ outcome: fc.constantFrom('paid', 'paid', 'failed'), hold: fc.integer({ min: 0, max: 48 }), method: fc.constantFrom('sbp', 'card') })
      .map(({ outcome, hold, method }) => (minute: number): InvoiceCommand => ({
        type: 'RecordPaymentResult',
        outcome: outcome as 'paid' | 'failed',
        method: method as 'sbp' | 'card',
        at: at(minute),
        holdHours: hold,
        reason: 'declined',
      })),
  },
  { weight: 1, arbitrary: fc.constant((minute: number): InvoiceCommand => ({ type: 'ExpireInvoice', at: at(minute + 60) })) },
  {
    weight: 3,
    arbitrary: fc
      .record({ id: fc.integer({ min: 1, max: 3 }), amount: fc.option(fc.integer({ min: 1, max: 60_000 }), { nil: null }) })
      .map(({ id, amount }) => (minute: number): InvoiceCommand => ({ type: 'RequestRefund', refundId: `rf_${id}`, amount, at: at(minute) })),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({ id: fc.integer({ min: 1, max: 3 }), outcome: fc.constantFrom('succeeded', 'succeeded', 'failed', 'refused') })
      .map(({ id, outcome }) => (minute: number): InvoiceCommand => ({
        type: 'ResolveRefund',
        refundId: `rf_${id}`,
        outcome: outcome as 'succeeded' | 'failed' | 'refused',
        at: at(minute),
      })),
  },
);

const requested = (amount: number): PayoutRequestedData => ({
  payoutId: 42,
  accountId: '7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f',
  projectId: '5b9b1f0e-2a55-4f4e-8a7c-1c2d3e4f5a6b',
  method: 'sbp',
  addressId: 7,
  account: '+79161234567',
  bank: 'Т-Банк',
  orderId: 'po-1',
  comment: null,
  amount,
  feeAmount: 1_000,
  netAmount: amount - 1_000,
  usdtAmount: null,
  usdtRate: null,
  source: 'api',
  createdAt: at(0),
});

const payoutCommand: fc.Arbitrary<(minute: number) => PayoutCommand> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .record({ outcome: fc.constantFrom('reserved', 'reserved', 'insufficient_balance', 'too_many_pending'), mayBeAnswered: fc.boolean() })
      .map(({ outcome, mayBeAnswered }) => (minute: number): PayoutCommand => ({
        type: 'RecordReservation',
        outcome: outcome as 'reserved' | 'insufficient_balance' | 'too_many_pending',
        at: at(minute),
        mayBeAnswered,
      })),
  },
  { weight: 3, arbitrary: fc.constant((minute: number): PayoutCommand => ({ type: 'ApprovePayout', at: at(minute) })) },
  { weight: 3, arbitrary: fc.constant((minute: number): PayoutCommand => ({ type: 'StartProcessing', at: at(minute) })) },
  {
    weight: 3,
    arbitrary: fc
      .option(fc.constant('ext-1'), { nil: null })
      .map((externalId) => (minute: number): PayoutCommand => ({ type: 'PayPayout', at: at(minute), externalId })),
  },
  { weight: 1, arbitrary: fc.constant((minute: number): PayoutCommand => ({ type: 'RejectPayout', at: at(minute), reason: 'bad details' })) },
  { weight: 1, arbitrary: fc.constant((minute: number): PayoutCommand => ({ type: 'CancelPayout', at: at(minute), reason: 'asked' })) },
);

describe('read-model rows: the list item and the single read show the same', () => {
  it('invoices: the row evolved from the events equals the row of the aggregate, after every event', () => {
    const seed = fastCheckSeed('invoice rows');
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 10_000_000 }),
        fc.constantFrom('sbp', 'card', null),
        fc.array(invoiceCommand, { minLength: 2, maxLength: 20 }),
        (amount, method, commands) => {
          let state: InvoiceState = initialInvoice();
          let row: InvoiceRow | null = null;
          const events: InvoiceEvent[] = [];
          const run = (command: InvoiceCommand) => {
            const decided = decideInvoice(command, state);
            if (!Array.isArray(decided)) return;
            for (const event of decided) {
              events.push(event);
              state = evolveInvoice(state, event);
              row = evolveInvoiceRow(row, event);
              expect(state.status).not.toBe('none');
              if (state.status !== 'none') expect(row).toEqual(invoiceRowOf(state));
            }
          };
          run({ type: 'CreateInvoice', data: created(amount, method as 'sbp' | 'card' | null) });
          commands.forEach((command, i) => run(command(i + 1)));
          expect(events[0]!.type).toBe('InvoiceCreated');
        },
      ),
      { seed, numRuns: 1000 },
    );
  });

  it('payouts: the row evolved from the events equals the row of the aggregate, after every event', () => {
    const seed = fastCheckSeed('payout rows');
    fc.assert(
      fc.property(fc.integer({ min: 2_000, max: 10_000_000 }), fc.array(payoutCommand, { minLength: 2, maxLength: 12 }), (amount, commands) => {
        let state: PayoutState = initialPayout();
        let row: PayoutRow | null = null;
        const run = (command: PayoutCommand) => {
          const decided = decidePayout(command, state);
          if (!Array.isArray(decided)) return;
          for (const event of decided as PayoutEvent[]) {
            state = evolvePayout(state, event);
            row = evolvePayoutRow(row, event);
            if (state.status !== 'none') expect(row).toEqual(payoutRowOf(state));
          }
        };
        run({ type: 'RequestPayout', data: requested(amount) });
        commands.forEach((command, i) => run(command(i + 1)));
        expect(state.status).not.toBe('none');
      }),
      { seed, numRuns: 1000 },
    );
  });
});
