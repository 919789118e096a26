import { PayoutEvent, payoutReservationId, RefundEvent, Refusal } from '#domain';
import type { LedgerBook, LedgerRequest } from '../ledger';
import type { Pool } from 'pg';
import type { EventStore, Position } from '#event-store';
import { checkpointReached } from '#event-store/projections';
import { runInvoiceCommand } from '../invoices/invoice-stream';
import { FlowObserver, tellLeftToRecovery } from './flow-observer';

/** The reactors that move an outcome's money: the one driver of each step below. */
export const REFUND_OUTCOMES = 'refund_outcomes';
export const PAYOUT_OUTCOMES = 'payout_outcomes';

/** The events each of them follows. */
export const REFUND_OUTCOME_EVENTS: readonly RefundEvent['type'][] = ['RefundSucceeded', 'RefundFailed'];
export const PAYOUT_OUTCOME_EVENTS: readonly PayoutEvent['type'][] = ['PayoutPaid', 'PayoutRejected', 'PayoutCancelled'];

/** How long an operator's answer waits for the reactor to move an outcome's money when no instance of it runs. */
export const OUTCOME_WAIT_MS = 3_000;
/** How much longer it waits while one instance runs the reactor all along, behind on a loaded database. */
export const OUTCOME_WAIT_RUNNING_MS = 20_000;

/**
 * Read-your-writes for the events a command just appended (the last at `position`):
 * when one is an outcome, waits until its reactor has moved the money, so the next
 * request sees it: OUTCOME_WAIT_MS, and up to OUTCOME_WAIT_RUNNING_MS more while the
 * reactor's instance runs behind (checkpointReached). Then (no projector running, or a
 * reactor failing, or the wait's own reads failing) the observer is told and the caller
 * answers: the outcome stands, and the reactor moves the money when it runs.
 */
export async function awaitOutcomeMoved(
  pool: Pool,
  appended: { readonly events: readonly { type: string }[]; readonly position: Position | null },
  observer: FlowObserver,
  flow: 'refund' | 'payout',
  id: string,
): Promise<void> {
  const outcome = appended.events.find(
    (e) => (REFUND_OUTCOME_EVENTS as readonly string[]).includes(e.type) || (PAYOUT_OUTCOME_EVENTS as readonly string[]).includes(e.type),
  );
  if (outcome === undefined || appended.position === null) return;
  const reactor = outcome.type.startsWith('Refund') ? REFUND_OUTCOMES : PAYOUT_OUTCOMES;
  try {
    const { reached, waitedMs } = await checkpointReached(pool, reactor, appended.position, {
      boundMs: OUTCOME_WAIT_MS,
      whileRunningMs: OUTCOME_WAIT_RUNNING_MS,
    });
    if (!reached) tellLeftToRecovery(observer, flow, id, new Error(`${reactor} has not moved the outcome's money within ${waitedMs} ms`));
  } catch (error) {
    // The outcome is written: a database failing now (a full disk, a lost connection) is no 5xx, which would say nothing was done.
    tellLeftToRecovery(observer, flow, id, error);
  }
}

/**
 * Settles or releases a reservation once. Already closed (an earlier run of the
 * reactor) is done, not an error.
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
 * status, or the amount back in the remainder). Run by the refund_outcomes reactor,
 * once per outcome event; idempotent, so a replay or a retried batch changes nothing.
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

/** What a finished payout moves: paid settles its reservation (net out, fee to fees), rejected and cancelled return it. Run by the payout_outcomes reactor; idempotent. */
export async function applyPayoutOutcome(ledgers: LedgerBook, event: PayoutEvent): Promise<void> {
  const ledger = { accountId: event.data.accountId, mode: 'live' as const };
  const reservationId = payoutReservationId(event.data.payoutId);
  if (event.type === 'PayoutPaid') {
    await closeReservation(ledgers, ledger, { type: 'SettleReservation', reservationId, feeAmount: event.data.feeAmount, at: event.data.at });
  } else if (event.type === 'PayoutRejected' || event.type === 'PayoutCancelled') {
    await closeReservation(ledgers, ledger, { type: 'ReleaseReservation', reservationId, at: event.data.at });
  }
}
