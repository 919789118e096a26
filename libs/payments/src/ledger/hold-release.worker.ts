import { Refusal } from '#domain';
import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '#platform/clock';
import { LedgerMode } from '#ledger';
import { ReleaseHold } from './release-hold.command';
import type { WorkerItems } from '../flows/worker-items';

/** Moves every hold whose time has come from pending to available (the ReleaseHold command); each hold fails alone (see WorkerItems). */
export function releaseDueHolds(pool: Pool, commands: CommandBus, clock: Clock, items: WorkerItems) {
  return async (): Promise<number> => {
    const now = clock.now();
    const due = await pool.query<{ account_id: string; mode: LedgerMode; invoice_id: string }>(
      `SELECT account_id, mode, invoice_id FROM ledger_open_holds WHERE release_at <= $1 AND invoice_id <> ALL($2::text[])
       ORDER BY release_at LIMIT 100`,
      [now, items.backingOff()],
    );
    return items.each(
      due.rows,
      (hold) => hold.invoice_id,
      async (hold) => {
        try {
          // Each release at its own time (not the tick's), so that no entry is dated before it is posted.
          await commands.execute(new ReleaseHold({ accountId: hold.account_id, mode: hold.mode }, hold.invoice_id, clock.now().toISOString()));
        } catch (error) {
          // Released already (the read model lags the ledger by a moment): nothing to do.
          if (!(error instanceof Refusal && error.code === 'hold_not_found')) throw error;
        }
      },
    );
  };
}
