import { PayoutEvent, payoutReservationId, RefundEvent, Refusal } from '#domain';
import type { LedgerBook, LedgerRequest } from '../ledger';
import type { EventStore } from '#event-store';
import { runInvoiceCommand } from '../invoices/invoice-stream';

/**
 * Settles or releases a reservation once. Already closed (by the API's own call, or
 * an earlier run of the process manager) is done, not an error.
 */
async function closeReservation(ledgers: LedgerBook, ledger: { accountId: string; mode: 'test' | 'live' }, request: LedgerRequest): Promise<void> {
  try {
    await ledgers.post(ledger, request);
  } catch (error) {
    if (!(error instanceof Refusal && error.code === 'reservation_not_found')) throw error;
  }
}

/**
 * What a refund's outcome moves: its reserved money (succeeded: out to
 * refunds_paid; failed: back to available) and its invoice (refunded amount and
 * status, or the amount back in the remainder). Idempotent: run by the service that
 * recorded the outcome, and again by the process manager that follows the log.
 */
export async function applyRefundOutcome(ledgers: LedgerBook, store: EventStore, event: RefundEvent): Promise<void> {
  if (event.type !== 'RefundSucceeded' && event.type !== 'RefundFailed') return;
  const d = event.data;
  const succeeded = event.type === 'RefundSucceeded';
  await closeReservation(
    ledgers,
    { accountId: d.accountId, mode: d.mode },
    succeeded ? { type: 'SettleReservation', reservationId: d.refundId, at: d.at } : { type: 'ReleaseReservation', reservationId: d.refundId, at: d.at },
  );
  await runInvoiceCommand(store, d.invoiceId, { type: 'ResolveRefund', refundId: d.refundId, outcome: succeeded ? 'succeeded' : 'failed', at: d.at });
}

/** What a finished payout moves: paid settles its reservation (net out, fee to fees), rejected and cancelled return it. Idempotent. */
export async function applyPayoutOutcome(ledgers: LedgerBook, event: PayoutEvent): Promise<void> {
  const ledger = { accountId: event.data.accountId, mode: 'live' as const };
  const reservationId = payoutReservationId(event.data.payoutId);
  if (event.type === 'PayoutPaid') {
    await closeReservation(ledgers, ledger, { type: 'SettleReservation', reservationId, feeAmount: event.data.feeAmount, at: event.data.at });
  } else if (event.type === 'PayoutRejected' || event.type === 'PayoutCancelled') {
    await closeReservation(ledgers, ledger, { type: 'ReleaseReservation', reservationId, at: event.data.at });
  }
}
