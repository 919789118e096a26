/**
 * An independent model of what each ledger command should do, for model-based
 * tests: plain maps and arithmetic, written without looking at the decider. It
 * remembers every cause it ever posted, so it is exact for causes of any age.
 */
import { causeOf, LEDGER_ACCOUNTS, LedgerAccount, LedgerCommand, LedgerErrorCode, ReservationPurpose } from '#ledger';

export type Outcome = 'posted' | 'repeat' | LedgerErrorCode;

export interface Model {
  readonly causes: Set<string>;
  readonly holds: Map<string, { amount: number; releaseAt: string | null }>;
  readonly reservations: Map<string, { purpose: ReservationPurpose; amount: number }>;
  readonly balances: Record<LedgerAccount, number>;
}

export const newModel = (): Model => ({
  causes: new Set(),
  holds: new Map(),
  reservations: new Map(),
  balances: Object.fromEntries(LEDGER_ACCOUNTS.map((a) => [a, 0])) as Record<LedgerAccount, number>,
});

const kopecks = (n: unknown, allowZero: boolean): boolean =>
  typeof n === 'number' && Number.isInteger(n) && Math.abs(n) <= Number.MAX_SAFE_INTEGER && (allowZero ? n >= 0 : n > 0);

/**
 * What the command should do to the model; applies it when it posts. A refusal
 * recorded as an entry (`recordRefusal`) is 'posted': it spends the cause and moves
 * nothing. (Payout limits are not modelled: commands given here carry none.)
 */
export function expectAndApply(model: Model, command: LedgerCommand): Outcome {
  const cause = causeOf(command);
  if (model.causes.has(cause)) return 'repeat';
  const b = model.balances;
  switch (command.type) {
    case 'RecordPayment': {
      const { netAmount: net, feeAmount: fee } = command;
      if (!kopecks(net, true) || !kopecks(fee, true) || net + fee === 0) return 'invalid_amount';
      b.acquiring_clearing -= net + fee;
      b.fees += fee;
      // A zero net opens no hold: there is nothing to hold or to release.
      if (command.releaseAt === null || net === 0) b.available += net;
      else {
        b.pending += net;
        model.holds.set(command.invoiceId, { amount: net, releaseAt: command.releaseAt });
      }
      break;
    }
    case 'ReleaseHold': {
      const hold = model.holds.get(command.invoiceId);
      if (!hold) return 'hold_not_found';
      if (hold.releaseAt !== null && Date.parse(command.at) < Date.parse(hold.releaseAt)) return 'hold_not_due';
      b.pending -= hold.amount;
      b.available += hold.amount;
      model.holds.delete(command.invoiceId);
      break;
    }
    case 'ReserveFunds': {
      if (!kopecks(command.amount, false)) return 'invalid_amount';
      if (command.amount > b.available) {
        if (!command.recordRefusal) return 'insufficient_balance';
        break; // recorded: the cause is spent, nothing moves
      }
      b.available -= command.amount;
      b.reserved += command.amount;
      model.reservations.set(command.reservationId, { purpose: command.purpose, amount: command.amount });
      break;
    }
    case 'SettleReservation': {
      const r = model.reservations.get(command.reservationId);
      if (!r) return 'reservation_not_found';
      const fee = command.feeAmount ?? 0;
      if (!kopecks(fee, true) || fee > r.amount || (r.purpose === 'refund' && fee !== 0)) return 'invalid_amount';
      b.reserved -= r.amount;
      if (r.purpose === 'refund') b.refunds_paid += r.amount;
      else b.payouts_sent += r.amount - fee;
      b.fees += fee;
      model.reservations.delete(command.reservationId);
      break;
    }
    case 'ReleaseReservation': {
      const r = model.reservations.get(command.reservationId);
      if (!r) return 'reservation_not_found';
      b.reserved -= r.amount;
      b.available += r.amount;
      model.reservations.delete(command.reservationId);
      break;
    }
  }
  model.causes.add(cause);
  return 'posted';
}
