import { Refusal } from '#domain';
import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '#platform/clock';
import { AdvancePayout } from '../payouts/advance-payout.command';
import { AdvanceRefund } from '../refunds/advance-refund.command';
import type { WorkerItems } from './worker-items';

/** How long a request may stay half-done before recovery takes it over (the API normally finishes in milliseconds). */
export const RECOVERY_GRACE_SECONDS = 5;

/** Requests of each kind taken per tick. */
const BATCH = 50;

/**
 * Finishes the refund and payout requests left half-way after their first step (the
 * API process died, or a later step failed and the API answered with the refund or
 * payout as granted): each is taken through the same steps the API runs, which decide
 * once: funded (refund pending, payout pending), or, when the ledger refuses, the
 * refund fails and the payout is rejected, shown, since either may have been answered
 * already (a refusal the API itself recorded and answered stays unseen).
 *
 * Each request fails alone (`items`: logged with its id, counted, retried after a
 * back-off and left out of the selection meanwhile): one that cannot be finished
 * never holds back the others, oldest first or not.
 */
export function recoverHalfDoneFlows(pool: Pool, commands: CommandBus, clock: Clock, items: WorkerItems) {
  return async (): Promise<number> => {
    const now = clock.now();
    const horizon = new Date(now.getTime() - RECOVERY_GRACE_SECONDS * 1000);
    const waiting = items.backingOff();
    const refundRequests = await pool.query<{ id: string; invoice_id: string }>(
      `SELECT id, invoice_id FROM refunds WHERE status = 'requested' AND requested_at <= $1 AND id <> ALL($2::text[])
       ORDER BY requested_at LIMIT ${BATCH}`,
      [horizon, waiting.filter((id) => id.startsWith('refund ')).map((id) => id.slice('refund '.length))],
    );
    const payoutRequests = await pool.query<{ id: string }>(
      `SELECT id FROM payouts WHERE status = 'requested' AND created_at <= $1 AND id <> ALL($2::bigint[])
       ORDER BY created_at LIMIT ${BATCH}`,
      [horizon, waiting.filter((id) => id.startsWith('payout ')).map((id) => id.slice('payout '.length))],
    );
    const finished = (error: unknown) => {
      // A refusal is an outcome too: the flow is finished.
      if (!(error instanceof Refusal)) throw error;
    };
    return (
      (await items.each(
        refundRequests.rows,
        (r) => `refund ${r.id}`,
        // Each step at its own time, not the tick's: no entry is dated before it is posted.
        async (r) => void (await commands.execute(new AdvanceRefund(r.invoice_id, r.id, clock.now())).catch(finished)),
      )) +
      (await items.each(
        payoutRequests.rows,
        (p) => `payout ${p.id}`,
        async (p) => void (await commands.execute(new AdvancePayout(Number(p.id), clock.now())).catch(finished)),
      ))
    );
  };
}
