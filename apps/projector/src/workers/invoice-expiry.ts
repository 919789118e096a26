import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import type { InvoiceService } from '../../../../libs/payments/src';
import { PaymentsError } from '../../../../libs/payments/src';
import type { WorkerItems } from './worker-items';

/** Expires every open invoice whose expiresAt has passed on the gateway clock; each invoice fails alone (see WorkerItems). */
export function expireDueInvoices(pool: Pool, invoices: InvoiceService, clock: Clock, items: WorkerItems) {
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
          await invoices.expire(id, now);
        } catch (error) {
          // Paid or failed meanwhile: nothing to expire.
          if (!(error instanceof PaymentsError)) throw error;
        }
      },
    );
  };
}
