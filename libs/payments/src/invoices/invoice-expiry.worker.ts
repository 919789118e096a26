import { Refusal } from '#domain';
import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '#platform/clock';
import { ExpireInvoice } from './expire-invoice.command';
import type { WorkerItems } from '../flows/worker-items';

/** Expires every open invoice whose expiresAt has passed on the gateway clock (the ExpireInvoice command); each invoice fails alone (see WorkerItems). */
export function expireDueInvoices(pool: Pool, commands: CommandBus, clock: Clock, items: WorkerItems) {
  return async (): Promise<number> => {
    const now = clock.now();
    const due = await pool.query<{ id: string }>(
      `SELECT id FROM invoices WHERE status IN ('created', 'pending') AND expires_at <= $1 AND id <> ALL($2::uuid[])
       ORDER BY expires_at LIMIT 100`,
      [now, items.backingOff()],
    );
    return items.each(
      due.rows,
      ({ id }) => id,
      async ({ id }) => {
        try {
          await commands.execute(new ExpireInvoice(id, now));
        } catch (error) {
          // Paid or failed meanwhile: nothing to expire.
          if (!(error instanceof Refusal)) throw error;
        }
      },
    );
  };
}
