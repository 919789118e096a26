import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import { PaymentsError } from '../../../../libs/payments/src';
import { AdvancePayout } from '../../../../libs/payments/src/payouts/advance-payout.command';
import { AdvanceRefund } from '../../../../libs/payments/src/refunds/advance-refund.command';

/** How long a request may stay half-done before recovery takes it over (the API normally finishes in milliseconds). */
export const RECOVERY_GRACE_SECONDS = 5;

/**
 * Finishes the refund and payout requests whose API process died half-way (after
 * the first step, before the answer): each is taken through the same steps the API
 * runs, which decide once, so the outcome is the one the API would have reached,
 * funded (refund pending, payout pending) or refused (amount back to the invoice's
 * remainder; payout refused and its orderId free again). Sent as the AdvanceRefund
 * and AdvancePayout commands.
 */
export function recoverHalfDoneFlows(pool: Pool, commands: CommandBus, clock: Clock) {
  return async (): Promise<number> => {
    const now = clock.now();
    const horizon = new Date(now.getTime() - RECOVERY_GRACE_SECONDS * 1000);
    const refundRequests = await pool.query<{ id: string; invoice_id: string }>(
      `SELECT id, invoice_id FROM refunds WHERE status = 'requested' AND requested_at <= $1 ORDER BY requested_at LIMIT 50`,
      [horizon],
    );
    const payoutRequests = await pool.query<{ id: string }>(
      `SELECT id FROM payouts WHERE status = 'requested' AND created_at <= $1 ORDER BY created_at LIMIT 50`,
      [horizon],
    );
    const refused = (error: unknown) => {
      // A refusal is an outcome too: the flow is finished.
      if (!(error instanceof PaymentsError)) throw error;
    };
    for (const r of refundRequests.rows) await commands.execute(new AdvanceRefund(r.invoice_id, r.id, now)).catch(refused);
    for (const p of payoutRequests.rows) await commands.execute(new AdvancePayout(Number(p.id), now)).catch(refused);
    return refundRequests.rows.length + payoutRequests.rows.length;
  };
}
