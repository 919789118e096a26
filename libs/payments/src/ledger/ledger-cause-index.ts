import type { Pool } from 'pg';
import { preparedStatement } from '#platform/database';
import type { LedgerId } from '#ledger';
import type { LedgerCauseIndex } from './ledger-book';

/**
 * The causes a ledger has posted, from the `ledger` read model. The projection
 * applies a ledger's entries in stream order (each stream keeps its order in the
 * log) and commits them with its checkpoint, so the table always holds every entry
 * of a ledger up to the highest `seq` it holds: the two answers are read in one
 * statement, hence at one instant. One indexed lookup per call.
 */
export class PostgresLedgerCauseIndex implements LedgerCauseIndex {
  constructor(private readonly pool: Pool) {}

  async find(ledger: LedgerId, cause: string): Promise<{ revision: bigint | null; completeThrough: bigint }> {
    const result = await this.pool.query<{ revision: string | null; complete_through: string | null }>(
      preparedStatement(
        `SELECT (SELECT min(seq) FROM ledger_entries WHERE account_id = $1 AND mode = $2 AND cause = $3) AS revision,
                (SELECT max(seq) FROM ledger_entries WHERE account_id = $1 AND mode = $2) AS complete_through`,
        [ledger.accountId, ledger.mode, cause],
      ),
    );
    const row = result.rows[0]!;
    return {
      revision: row.revision === null ? null : BigInt(row.revision),
      completeThrough: row.complete_through === null ? -1n : BigInt(row.complete_through),
    };
  }
}
