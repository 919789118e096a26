import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import { PaymentsError } from '../../../../libs/payments/src';
import { ExpireInvoice } from '../../../../libs/payments/src/invoices/expire-invoice.command';

/** Expires every open invoice whose expiresAt has passed on the gateway clock (the ExpireInvoice command). */
export function expireDueInvoices(pool: Pool, commands: CommandBus, clock: Clock) {
  return async (): Promise<number> => {
    const now = clock.now();
    const due = await pool.query<{ id: string }>(
      `SELECT id FROM invoices WHERE status IN ('created', 'pending') AND expires_at <= $1 ORDER BY expires_at LIMIT 100`,
      [now],
    );
    let done = 0;
    for (const { id } of due.rows) {
      try {
        await commands.execute(new ExpireInvoice(id, now));
        done++;
      } catch (error) {
        // Paid or failed meanwhile: nothing to expire.
        if (!(error instanceof PaymentsError)) throw error;
      }
    }
    return done;
  };
}
