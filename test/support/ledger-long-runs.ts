/**
 * Long random runs of ledger commands, for model-based tests that cross the window
 * of recent causes: thousands of commands on fresh invoices and reservations (so the
 * ledger grows past RECENT_CAUSES_KEPT entries), mixed with releases and closes of
 * what is open, with commands on ids that were closed or never existed, and with
 * retries of earlier commands of any age (most of them older than the window once
 * the run is long). The plan is what fast-check generates and shrinks; it is turned
 * into commands as the run goes, picking among what the independent model says is
 * open, so the same plan drives any implementation under test.
 */
import fc from 'fast-check';
import type { LedgerRequest } from '#payments/ledger';
import type { ReservationPurpose } from '#ledger';
import type { Model } from './ledger-model';

export type LongOp =
  | { readonly op: 'pay'; readonly net: number; readonly fee: number; readonly holdMinutes: number | null }
  /** Of an open hold (`ever`: of any invoice ever paid, often released already). */
  | { readonly op: 'releaseHold'; readonly pick: number; readonly ever: boolean }
  /** A share of the available balance, or (overdraw) more than it; refusals recorded or not. */
  | { readonly op: 'reserve'; readonly purpose: ReservationPurpose; readonly permille: number; readonly overdraw: boolean; readonly recordRefusal: boolean }
  | { readonly op: 'settle'; readonly pick: number; readonly ever: boolean; readonly feePermille: number | null }
  | { readonly op: 'release'; readonly pick: number; readonly ever: boolean }
  /** Issue again the command `back` commands ago (modulo the history), at the current time. */
  | { readonly op: 'retry'; readonly back: number };

export interface LongStep {
  readonly advanceMinutes: number;
  readonly op: LongOp;
}

/** true once in `oneIn` + 1. */
const rarely = (oneIn: number) => fc.oneof({ weight: 1, arbitrary: fc.constant(true) }, { weight: oneIn, arbitrary: fc.constant(false) });

const amount = fc.oneof({ weight: 30, arbitrary: fc.integer({ min: 0, max: 200_000 }) }, { weight: 1, arbitrary: fc.constantFrom(-1, 0.5) });

const longOp: fc.Arbitrary<LongOp> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constant('pay' as const),
      net: amount,
      fee: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 5_000 }) }, { weight: 1, arbitrary: fc.constant(0) }),
      holdMinutes: fc.option(fc.integer({ min: 0, max: 8 * 60 }), { nil: null, freq: 3 }),
    }),
  },
  { weight: 5, arbitrary: fc.record({ op: fc.constant('releaseHold' as const), pick: fc.nat({ max: 1_000 }), ever: rarely(4) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('reserve' as const),
      purpose: fc.constantFrom<ReservationPurpose>('refund', 'payout'),
      permille: fc.integer({ min: 1, max: 600 }),
      overdraw: rarely(6),
      recordRefusal: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('settle' as const),
      pick: fc.nat({ max: 1_000 }),
      ever: rarely(4),
      feePermille: fc.option(fc.integer({ min: 0, max: 50 }), { nil: null, freq: 2 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('release' as const), pick: fc.nat({ max: 1_000 }), ever: rarely(4) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('retry' as const), back: fc.nat({ max: 20_000 }) }) },
);

/** Runs of `minLength`..`maxLength` steps; the clock moves 0 to 40 minutes before each. */
export const longRuns = (minLength: number, maxLength: number): fc.Arbitrary<LongStep[]> =>
  fc.array(fc.record({ advanceMinutes: fc.integer({ min: 0, max: 40 }), op: longOp }), { minLength, maxLength });

/** Turns a plan's steps into ledger requests, one at a time, against the model as it stands. */
export class LongRunResolver {
  /** Every request issued so far, in order (retries pick from it). */
  readonly history: LedgerRequest[] = [];
  private readonly invoicesEver: string[] = [];
  private readonly reservationsEver: string[] = [];
  private clock: number;

  constructor(start = Date.parse('2025-09-01T00:00:00.000Z')) {
    this.clock = start;
  }

  /** The request of this step; `retried` tells it repeats an earlier one. */
  next(step: LongStep, model: Model): { request: LedgerRequest; retried: boolean } | null {
    this.clock += step.advanceMinutes * 60_000;
    const at = new Date(this.clock).toISOString();
    const op = step.op;
    const pickOf = (ids: readonly string[], pick: number) => (ids.length === 0 ? null : ids[pick % ids.length]!);
    // Open items: mostly the oldest few, so holds get released and reservations closed.
    const open = (map: ReadonlyMap<string, unknown>, pick: number) => pickOf([...map.keys()].slice(0, 8), pick);
    let request: LedgerRequest | null = null;
    switch (op.op) {
      case 'pay': {
        const invoiceId = `inv_${this.invoicesEver.length}`;
        this.invoicesEver.push(invoiceId);
        const releaseAt = op.holdMinutes === null ? null : new Date(this.clock + op.holdMinutes * 60_000).toISOString();
        request = { type: 'RecordPayment', invoiceId, netAmount: op.net, feeAmount: op.fee, releaseAt, at };
        break;
      }
      case 'releaseHold': {
        const invoiceId = op.ever ? pickOf(this.invoicesEver, op.pick) : open(model.holds, op.pick);
        if (invoiceId !== null) request = { type: 'ReleaseHold', invoiceId, at };
        break;
      }
      case 'reserve': {
        const reservationId = `res_${this.reservationsEver.length}`;
        this.reservationsEver.push(reservationId);
        const available = model.balances.available;
        const amount = op.overdraw ? available + 1 + op.permille : Math.max(1, Math.floor((available * op.permille) / 1000));
        request = { type: 'ReserveFunds', reservationId, purpose: op.purpose, amount, at, ...(op.recordRefusal ? { recordRefusal: true } : {}) };
        break;
      }
      case 'settle': {
        const reservationId = op.ever ? pickOf(this.reservationsEver, op.pick) : open(model.reservations, op.pick);
        if (reservationId === null) break;
        const reserved = model.reservations.get(reservationId);
        const feeAmount = op.feePermille === null || reserved?.purpose !== 'payout' ? undefined : Math.floor((reserved.amount * op.feePermille) / 1000);
        request = { type: 'SettleReservation', reservationId, ...(feeAmount === undefined ? {} : { feeAmount }), at };
        break;
      }
      case 'release': {
        const reservationId = op.ever ? pickOf(this.reservationsEver, op.pick) : open(model.reservations, op.pick);
        if (reservationId !== null) request = { type: 'ReleaseReservation', reservationId, at };
        break;
      }
      case 'retry': {
        if (this.history.length === 0) return null;
        const earlier = this.history[this.history.length - 1 - (op.back % this.history.length)]!;
        const retry = { ...earlier, at } as LedgerRequest;
        this.history.push(retry);
        return { request: retry, retried: true };
      }
    }
    if (request === null) return null;
    this.history.push(request);
    return { request, retried: false };
  }
}
