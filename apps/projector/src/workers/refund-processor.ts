import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import { CompleteRefund } from '../../../../libs/payments/src/refunds/complete-refund.command';

/**
 * The sandbox refund processor: a refund still pending REFUND_PROCESSING_SECONDS
 * after it was created (on the gateway clock) succeeds. Until then the operator can
 * fail it; one that failed meanwhile stays failed. Sent as the CompleteRefund command.
 */
export function completeDueRefunds(pool: Pool, commands: CommandBus, clock: Clock) {
  return async (): Promise<number> => {
    const now = clock.now();
    const due = await pool.query<{ id: string }>(
      `SELECT id FROM refunds WHERE status = 'pending' AND process_at <= $1 ORDER BY process_at LIMIT 100`,
      [now],
    );
    for (const { id } of due.rows) await commands.execute(new CompleteRefund(id, now));
    return due.rows.length;
  };
}
