/**
 * Balance transactions: the movements of a merchant's balance (pending + available +
 * reserved), one per posting of a journal entry to one of those buckets. A posting's
 * amount is what entered (+) or left (−) its bucket, so a move between buckets (a hold
 * released, funds reserved, a reservation released) is two transactions that sum to
 * zero, and the transactions of any period sum to the change of the balance over it.
 * Pure: what a transaction is, from its entry's kind and cause.
 */
import type { EntryKind, ReservationPurpose } from './ledger';

/** Each type: the entry kind it comes from and, for reservations, their purpose. */
const TYPES = {
  payment: ['payment_recorded', null],
  hold_released: ['hold_released', null],
  refund_reserved: ['funds_reserved', 'refund'],
  refund_settled: ['reservation_settled', 'refund'],
  refund_released: ['reservation_released', 'refund'],
  payout_reserved: ['funds_reserved', 'payout'],
  payout_paid: ['reservation_settled', 'payout'],
  payout_returned: ['reservation_released', 'payout'],
} as const satisfies Record<string, readonly [EntryKind, ReservationPurpose | null]>;

export type BalanceTransactionType = keyof typeof TYPES;
export const BALANCE_TRANSACTION_TYPES = Object.keys(TYPES) as BalanceTransactionType[];

/** The entry kind and the reservation purpose (null: not a reservation) of a type. */
export const balanceTransactionSource = (type: BalanceTransactionType): readonly [EntryKind, ReservationPurpose | null] => TYPES[type];

/** A payout's reservation id (`po_<payoutId>`, as the payout flow reserves it); a refund's is the refund id. */
const PAYOUT_RESERVATION = /^po_(\d+)$/;

/** What an entry's cause (`payment:<invoice>`, `hold_release:<invoice>`, `reserve:|settle:|release:<reservation>`) says. */
export function balanceTransactionOf(
  kind: EntryKind,
  cause: string,
): { type: BalanceTransactionType; invoiceId: string | null; refundId: string | null; payoutId: number | null } | null {
  const subject = cause.slice(cause.indexOf(':') + 1);
  const payout = PAYOUT_RESERVATION.exec(subject);
  const purpose = kind === 'payment_recorded' || kind === 'hold_released' ? null : payout ? 'payout' : 'refund';
  const type = BALANCE_TRANSACTION_TYPES.find((t) => TYPES[t][0] === kind && TYPES[t][1] === purpose);
  if (type === undefined) return null;
  return {
    type,
    invoiceId: purpose === null ? subject : null,
    refundId: purpose === 'refund' ? subject : null,
    payoutId: payout ? Number(payout[1]) : null,
  };
}

/** The causes of a payout's entries: its reservation, its settlement and its release. */
export const payoutCauses = (payoutId: number): string[] => ['reserve', 'settle', 'release'].map((verb) => `${verb}:po_${payoutId}`);
