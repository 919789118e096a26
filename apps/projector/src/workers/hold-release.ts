import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import { LedgerError, LedgerMode } from '../../../../libs/ledger/src';
import type { LedgerBook } from '../../../../libs/ledger-store/src';
import type { WorkerItems } from './worker-items';

/** Moves every hold whose time has come from pending to available; each hold fails alone (see WorkerItems). */
export function releaseDueHolds(pool: Pool, ledgers: LedgerBook, clock: Clock, items: WorkerItems) {
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
          await ledgers.post({ accountId: hold.account_id, mode: hold.mode }, { type: 'ReleaseHold', invoiceId: hold.invoice_id, at: now.toISOString() });
        } catch (error) {
          // Released already (the read model lags the ledger by a moment): nothing to do.
          if (!(error instanceof LedgerError && error.code === 'hold_not_found')) throw error;
        }
      },
    );
  };
}
