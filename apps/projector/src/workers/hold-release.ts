import type { CommandBus } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import { LedgerError, LedgerMode } from '../../../../libs/ledger/src';
import { ReleaseHold } from '../../../../libs/payments/src/ledger/release-hold.command';

/** Moves every hold whose time has come from pending to available (the ReleaseHold command). */
export function releaseDueHolds(pool: Pool, commands: CommandBus, clock: Clock) {
  return async (): Promise<number> => {
    const now = clock.now();
    const due = await pool.query<{ account_id: string; mode: LedgerMode; invoice_id: string }>(
      `SELECT account_id, mode, invoice_id FROM ledger_open_holds WHERE release_at <= $1 ORDER BY release_at LIMIT 100`,
      [now],
    );
    let done = 0;
    for (const hold of due.rows) {
      try {
        await commands.execute(new ReleaseHold({ accountId: hold.account_id, mode: hold.mode }, hold.invoice_id, now.toISOString()));
        done++;
      } catch (error) {
        // Released already (the read model lags the ledger by a moment): nothing to do.
        if (!(error instanceof LedgerError && error.code === 'hold_not_found')) throw error;
      }
    }
    return done;
  };
}
