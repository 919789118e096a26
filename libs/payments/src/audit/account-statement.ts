import type { Pool } from 'pg';
import { AccountBalances, LEDGER_ACCOUNTS, LedgerAccount, LedgerId, zeroAccountBalances } from '#ledger';
import { isUuid } from '#domain';
import { RebuildState, rebuildStateSql, refuseRebuilt } from '#event-store/projections';
import { LedgerEntryDbRow, LedgerEntryRow, toLedgerEntryRow } from '../ledger';
import { ENTRY_POSTINGS, LEDGER_MODEL } from '../ledger/ledger.read-model';

/** Entries read per keyset page of a statement. */
export const STATEMENT_PAGE = 500;

/**
 * A statement of one ledger over (from, to]: its opening balances (every entry that
 * occurred at or before `from`, as GET /balance?asOf=from gives them) and its entries
 * that occurred after `from` and at or before `to`, in log order, a keyset page at a
 * time, each page one query of its own.
 *
 * One instant for all of it without holding a transaction while the reader waits for
 * its client: the opening is read together with the ledger's highest `seq` in one
 * statement, and the pages read only entries up to that `seq`. The ledger projection
 * writes a ledger's entries in stream order and never changes or removes one, so the
 * entries up to that `seq` are exactly those the opening saw, however long the
 * statement takes to stream. Except across a rebuild, which empties its tables and fills
 * them again: every query also reads the ledger's rebuild state (rebuildStateSql) in its
 * own snapshot, and a mark, or a rebuild begun since the opening (even one ended since),
 * stops the statement (ReadModelRebuildingError) rather than letting it end short or mix
 * two builds, with a closing balance neither held.
 */
export interface AccountStatementReader {
  readonly opening: AccountBalances;
  /** The ledger's last entry (seq) the statement covers; -1 when it has none. */
  readonly throughSeq: number;
  /** The entries, page after page (each page one query). */
  pages(): AsyncGenerator<readonly LedgerEntryRow[]>;
  /** The ledger's rebuild state as the opening read it: a later read of the ledger compares its own with it (refuseRebuilt). */
  readonly rebuildState: RebuildState;
}

/**
 * Whether the account is known: a merchant account of the registry, or a ledger with
 * entries; with the ledger's rebuild state read with them (an emptied ledger knows none:
 * a reader that answers from the ledger refuses while it is rebuilt).
 */
export async function accountKnown(pool: Pick<Pool, 'query'>, accountId: string): Promise<{ known: boolean; rebuild: RebuildState }> {
  // The registry by its key (a uuid: an id of another shape is in no row of it); `id::text = $1` would read every row.
  const { rows } = await pool.query<{ known: boolean; rebuild: RebuildState }>(
    `SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $2::uuid) OR EXISTS (SELECT 1 FROM ledger_entries WHERE account_id = $1) AS known,
            ${rebuildStateSql('$3')} AS rebuild`,
    [accountId, isUuid(accountId) ? accountId : null, LEDGER_MODEL],
  );
  return rows[0]!;
}

export async function openAccountStatement(
  pool: Pick<Pool, 'query'>,
  ledger: LedgerId,
  from: Date,
  to: Date,
  pageSize: number = STATEMENT_PAGE,
): Promise<AccountStatementReader> {
  // The opening is the balances now less what every entry after `from` posted: the entries
  // after `from` are read by the ledger's time index and their postings one entry at a time
  // (OFFSET 0 keeps that plan), so the cost follows this ledger's entries after `from`, not
  // the postings of every ledger before it (a hash join over all of them). The pages read
  // the seq span of the period's entries (entries are not in time order: a payment may be
  // posted after a later release), found in the same index. The balances and the entries
  // are one snapshot of one statement, written together by the projection.
  const sums = await pool.query<{
    rebuild: RebuildState;
    through_seq: string;
    first_seq: string | null;
    last_seq: string | null;
    account: string | null;
    balance: string | null;
  }>(
    `WITH head AS (SELECT COALESCE(max(seq), -1) AS through_seq FROM ledger_entries WHERE account_id = $1 AND mode = $2),
          span AS (
            SELECT min(seq) AS first_seq, max(seq) AS last_seq FROM ledger_entries
            WHERE account_id = $1 AND mode = $2 AND occurred_at > $3 AND occurred_at <= $5),
          later AS (
            SELECT p.account, sum(p.amount) AS amount
            FROM ledger_entries e
            CROSS JOIN LATERAL (SELECT account, amount FROM ledger_postings WHERE entry_id = e.entry_id OFFSET 0) p
            WHERE e.account_id = $1 AND e.mode = $2 AND e.occurred_at > $3
            GROUP BY p.account),
          now AS (SELECT account, balance FROM ledger_balances WHERE account_id = $1 AND mode = $2),
          opening AS (
            SELECT account, COALESCE(now.balance, 0) - COALESCE(later.amount, 0) AS balance
            FROM now FULL JOIN later USING (account))
     SELECT ${rebuildStateSql('$4')} AS rebuild, head.through_seq, span.first_seq, span.last_seq, opening.account, opening.balance
     FROM head CROSS JOIN span LEFT JOIN opening ON true`,
    [ledger.accountId, ledger.mode, from, LEDGER_MODEL, to],
  );
  const rebuildState = sums.rows[0]!.rebuild;
  refuseRebuilt(LEDGER_MODEL, rebuildState);
  const throughSeq = Number(sums.rows[0]!.through_seq);
  // No entry in the period: one page query still reads the mark (an empty span after the head).
  const firstSeq = Number(sums.rows[0]!.first_seq ?? throughSeq + 1);
  const lastSeq = Number(sums.rows[0]!.last_seq ?? throughSeq);
  const opening = zeroAccountBalances();
  for (const row of sums.rows) {
    if (row.account !== null && (LEDGER_ACCOUNTS as readonly string[]).includes(row.account)) opening[row.account as LedgerAccount] = Number(row.balance);
  }
  async function* pages(): AsyncGenerator<readonly LedgerEntryRow[]> {
    let afterSeq = firstSeq - 1;
    for (;;) {
      // One row even for an empty page: the mark, beside no entry.
      const result = await pool.query<Partial<LedgerEntryDbRow> & { rebuild: RebuildState }>(
        `SELECT ${rebuildStateSql('$8')} AS rebuild, page.* FROM (SELECT) one LEFT JOIN LATERAL (
           SELECT e.entry_id, e.seq, e.kind, e.cause, e.occurred_at, e.log_position,
                  ${ENTRY_POSTINGS} AS postings
           FROM ledger_entries e
           WHERE e.account_id = $1 AND e.mode = $2 AND e.seq > $3 AND e.seq <= $4 AND e.occurred_at > $5 AND e.occurred_at <= $6
           ORDER BY e.seq LIMIT $7) page ON true
         ORDER BY page.seq`,
        [ledger.accountId, ledger.mode, afterSeq, lastSeq, from, to, pageSize, LEDGER_MODEL],
      );
      refuseRebuilt(LEDGER_MODEL, result.rows[0]!.rebuild, rebuildState);
      const rows = result.rows.filter((r): r is LedgerEntryDbRow & { rebuild: RebuildState } => r.entry_id != null);
      if (rows.length > 0) {
        yield rows.map(toLedgerEntryRow);
      }
      if (rows.length < pageSize) return;
      afterSeq = Number(rows[rows.length - 1]!.seq);
    }
  }
  return { opening, throughSeq, pages, rebuildState };
}
