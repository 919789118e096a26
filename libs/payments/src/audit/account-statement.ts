import type { Pool, PoolClient } from 'pg';
import { AccountBalances, LEDGER_ACCOUNTS, LedgerAccount, LedgerId, zeroAccountBalances } from '#ledger';
import type { LedgerEntryRow } from '../ledger';

/** Entries read per keyset page of a statement. */
export const STATEMENT_PAGE = 500;

/**
 * A statement of one ledger over (from, to]: its opening balances (every entry that
 * occurred at or before `from`, as GET /balance?asOf=from gives them) and its entries
 * that occurred after `from` and at or before `to`, in log order, a keyset page at a
 * time. Read in one REPEATABLE READ snapshot of the read model, so the opening and the
 * entries agree however the projection moves meanwhile. `close()` ends it (also when
 * the consumer stops early); iterating to the end closes it too.
 */
export interface AccountStatementReader {
  readonly opening: AccountBalances;
  /** The entries, page after page (each page one query). */
  pages(): AsyncGenerator<readonly LedgerEntryRow[]>;
  close(): Promise<void>;
}

/** Whether the account is known: a merchant account of the registry, or a ledger with entries. */
export async function accountKnown(pool: Pick<Pool, 'query'>, accountId: string): Promise<boolean> {
  const { rows } = await pool.query<{ known: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM accounts WHERE id::text = $1) OR EXISTS (SELECT 1 FROM ledger_entries WHERE account_id = $1) AS known`,
    [accountId],
  );
  return rows[0]!.known;
}

export async function openAccountStatement(
  pool: Pick<Pool, 'connect'>,
  ledger: LedgerId,
  from: Date,
  to: Date,
  pageSize: number = STATEMENT_PAGE,
): Promise<AccountStatementReader> {
  const client: PoolClient = await pool.connect();
  let open = true;
  const close = async () => {
    if (!open) return;
    open = false;
    try {
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  };
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const sums = await client.query<{ account: string; balance: string }>(
      `SELECT p.account, sum(p.amount) AS balance
       FROM ledger_entries e JOIN ledger_postings p USING (entry_id)
       WHERE e.account_id = $1 AND e.mode = $2 AND e.occurred_at <= $3
       GROUP BY p.account`,
      [ledger.accountId, ledger.mode, from],
    );
    const opening = zeroAccountBalances();
    for (const row of sums.rows) {
      if ((LEDGER_ACCOUNTS as readonly string[]).includes(row.account)) opening[row.account as LedgerAccount] = Number(row.balance);
    }
    async function* pages(): AsyncGenerator<readonly LedgerEntryRow[]> {
      try {
        let afterSeq = -1;
        for (;;) {
          const { rows } = await client.query<{
            entry_id: string;
            seq: string;
            kind: string;
            cause: string;
            occurred_at: Date;
            log_position: string;
            postings: { account: string; amount: number }[];
          }>(
            `SELECT e.entry_id, e.seq, e.kind, e.cause, e.occurred_at, e.log_position,
                    COALESCE((SELECT json_agg(json_build_object('account', p.account, 'amount', p.amount) ORDER BY p.ordinal)
                              FROM ledger_postings p WHERE p.entry_id = e.entry_id), '[]') AS postings
             FROM ledger_entries e
             WHERE e.account_id = $1 AND e.mode = $2 AND e.seq > $3 AND e.occurred_at > $4 AND e.occurred_at <= $5
             ORDER BY e.seq LIMIT $6`,
            [ledger.accountId, ledger.mode, afterSeq, from, to, pageSize],
          );
          if (rows.length > 0) {
            yield rows.map((r) => ({
              entryId: r.entry_id,
              seq: Number(r.seq),
              kind: r.kind,
              cause: r.cause,
              occurredAt: r.occurred_at,
              logPosition: r.log_position,
              postings: r.postings.map((p) => ({ account: p.account, amount: Number(p.amount) })),
            }));
          }
          if (rows.length < pageSize) return;
          afterSeq = Number(rows[rows.length - 1]!.seq);
        }
      } finally {
        await close();
      }
    }
    return { opening, pages, close };
  } catch (error) {
    await close();
    throw error;
  }
}
