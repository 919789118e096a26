import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '#platform/clock';
import { CompleteRefund } from './complete-refund.command';
import type { WorkerItems } from '../flows/worker-items';

/**
 * The sandbox refund processor: a refund still pending REFUND_PROCESSING_SECONDS
 * after it was created (on the gateway clock) succeeds. Until then the operator can
 * fail it; one that failed meanwhile stays failed. Sent as the CompleteRefund command;
 * each refund fails alone (see WorkerItems).
 */
export function completeDueRefunds(pool: Pool, commands: CommandBus, clock: Clock, items: WorkerItems) {
  return async (): Promise<number> => {
    const now = clock.now();
    const due = await pool.query<{ id: string }>(
      `SELECT id FROM refunds WHERE status = 'pending' AND process_at <= $1 AND id <> ALL($2::text[]) ORDER BY process_at LIMIT 100`,
      [now, items.backingOff()],
    );
    return items.each(
      due.rows,
      ({ id }) => id,
      // Each completion at its own time: one read before the tick's hundred would date the last ones seconds back.
      async ({ id }) => void (await commands.execute(new CompleteRefund(id, clock.now()))),
    );
  };
}
