import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { balanceTransactionOf, balanceTransactionSource, payoutCauses } from '#ledger';
import type { BalanceTransactionType, EntryKind, Kopecks, LedgerMode, MerchantAccount } from '#ledger';
import { RebuildState, rebuildStateSql, refuseRebuilt } from '#event-store/projections';
import { READ_MODELS } from '../payments.tokens';
import { LEDGER_MODEL } from './ledger.read-model';

/** A page of a ledger's balance transactions, with the ledger's rebuild state its query read. */
export interface BalanceTransactionsPage {
  readonly items: readonly BalanceTransaction[];
  readonly hasMore: boolean;
  readonly rebuildState: RebuildState;
}

/** One movement of a merchant's balance (amounts in kopecks). */
export interface BalanceTransaction {
  /** Its place in the ledger (entry seq × 8 + posting ordinal): the page cursor. */
  readonly position: number;
  readonly id: string;
  readonly type: BalanceTransactionType;
  readonly amount: Kopecks;
  readonly bucket: MerchantAccount;
  readonly balanceAfter: Kopecks;
  /** The gateway's fee of the entry (a payment's, a payout's), or null. */
  readonly fee: Kopecks | null;
  readonly createdAt: Date;
  readonly availableAt: Date | null;
  readonly invoiceId: string | null;
  readonly refundId: string | null;
  readonly payoutId: number | null;
}

export interface BalanceTransactionFilter {
  readonly accountId: string;
  readonly mode: LedgerMode;
  readonly type?: BalanceTransactionType;
  readonly from?: Date;
  readonly to?: Date;
  readonly payoutId?: number;
  /** Only transactions below this position (the previous page's cursor), or null. */
  readonly before: number | null;
  readonly limit: number;
}

/**
 * A ledger's balance transactions, newest first, a page at a time. ReadModelRebuildingError
 * while the ledger is rebuilt, or (`since`: the first page's state, for the pages of one
 * export) when it has been emptied since that page: the pages would not be of one ledger.
 */
export class ListBalanceTransactions extends Query<BalanceTransactionsPage> {
  constructor(
    readonly filter: BalanceTransactionFilter,
    readonly since?: RebuildState,
  ) {
    super();
  }
}

@QueryHandler(ListBalanceTransactions)
export class ListBalanceTransactionsHandler implements IQueryHandler<ListBalanceTransactions> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  async execute({ filter, since }: ListBalanceTransactions): Promise<BalanceTransactionsPage> {
    const params: unknown[] = [filter.accountId, filter.mode];
    const where = ['e.account_id = $1', 'e.mode = $2'];
    const add = (sql: string, ...values: unknown[]) => where.push(sql.replace(/\?/g, () => `$${params.push(values.shift())}`));
    if (filter.type !== undefined) {
      const [kind, purpose] = balanceTransactionSource(filter.type);
      add('e.kind = ?', kind);
      if (purpose !== null) add(`(e.cause ~ '^[a-z_]+:po_\\d+$') = ?`, purpose === 'payout');
    }
    if (filter.payoutId !== undefined) add('e.cause = ANY(?::text[])', payoutCauses(filter.payoutId));
    if (filter.from !== undefined) add('e.occurred_at >= ?', filter.from);
    if (filter.to !== undefined) add('e.occurred_at < ?', filter.to);
    if (filter.before !== null) add('e.seq <= ? AND e.seq * 8 + p.ordinal < ?', Math.floor(filter.before / 8), filter.before);
    const result = await this.pool.query<{
      rebuild: RebuildState;
      seq: string;
      entry_id: string;
      kind: EntryKind;
      cause: string;
      occurred_at: Date;
      available_at: Date | null;
      ordinal: number;
      account: MerchantAccount;
      amount: string;
      balance_after: string;
      fee: string | null;
    }>(
      // One row even for an empty page: the state, beside no transaction.
      `WITH page AS (
         SELECT e.seq, e.entry_id, e.kind, e.cause, e.occurred_at, e.available_at, p.ordinal, p.account, p.amount, p.balance_after,
                (SELECT f.amount FROM ledger_postings f WHERE f.entry_id = e.entry_id AND f.account = 'fees') AS fee
         FROM ledger_entries e JOIN ledger_postings p ON p.entry_id = e.entry_id AND p.account IN ('pending', 'available', 'reserved')
         WHERE ${where.join(' AND ')}
         ORDER BY e.seq DESC, p.ordinal DESC LIMIT $${params.push(filter.limit + 1)})
       SELECT ${rebuildStateSql(`$${params.push(LEDGER_MODEL)}`)} AS rebuild, page.* FROM (SELECT) one LEFT JOIN page ON true
       ORDER BY page.seq DESC, page.ordinal DESC`,
      params,
    );
    const rebuildState = result.rows[0]!.rebuild;
    refuseRebuilt(LEDGER_MODEL, rebuildState, since);
    const rows = result.rows.filter((r) => r.seq !== null);
    const items = rows.slice(0, filter.limit).map((r): BalanceTransaction => {
      const of = balanceTransactionOf(r.kind, r.cause)!;
      const amount = Number(r.amount);
      // A payment's money is available when its hold ends (at once without one); a released hold's, when released.
      const availableAt =
        of.type === 'payment' ? (r.available_at ?? (r.account === 'available' ? r.occurred_at : null)) : of.type === 'hold_released' ? r.occurred_at : null;
      return {
        position: Number(r.seq) * 8 + r.ordinal,
        id: `${r.entry_id}:${r.account}`,
        type: of.type,
        amount,
        bucket: r.account,
        balanceAfter: Number(r.balance_after),
        // A zero fee posts nothing to `fees`: it is 0.00, not absent.
        fee: of.type === 'payment' || of.type === 'payout_paid' ? Number(r.fee ?? 0) : null,
        createdAt: r.occurred_at,
        availableAt,
        invoiceId: of.invoiceId,
        refundId: of.refundId,
        payoutId: of.payoutId,
      };
    });
    return { items, hasMore: rows.length > filter.limit, rebuildState };
  }
}
