import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import type { RecordedEvent } from '#event-store';
import type { PayoutEvent, PayoutLifecycle, PayoutMethod, PayoutRequestedData, PayoutSource, PayoutStatus } from '#domain';
import { maskPayoutAccount, PAYOUT_CATEGORY } from '#domain';
import type { Kopecks } from '#ledger';
import type { Projection } from '#event-store/projections';
import { foldBatchIntoTable, FoldedTable } from '../read-models/folded-row';
import { pageOf, ReadModelPage } from '../invoices/invoices.read-model';

/** The payouts read model: the row in its own shape (`item`, json), the figures finance reads as columns. */
export const payoutsReadModelMigration: Migration = {
  id: 'payments:0010_read_model_payouts',
  sql: `
CREATE TABLE payouts (
  -- order of arrival: lists page newest first on it
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id bigint PRIMARY KEY,
  account_id uuid NOT NULL,
  project_id uuid NOT NULL,
  order_id text,
  -- requested and refused are never shown; the others are the spec's statuses
  status text NOT NULL,
  created_at timestamptz NOT NULL,
  last_revision bigint NOT NULL,
  amount bigint NOT NULL,
  fee_amount bigint NOT NULL,
  processed_at timestamptz,
  item json NOT NULL
);
CREATE INDEX payouts_list ON payouts (account_id, seq DESC);
CREATE INDEX payouts_requested ON payouts (created_at) WHERE status = 'requested';
CREATE TRIGGER payouts_reset_counted AFTER TRUNCATE ON payouts FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('payouts');
`,
};

/**
 * A row of the payouts read model: what a list shows of a payout (its account already
 * masked) and what finance reads of it, in the read model's own shape, evolved from the
 * events alone. `payoutRowView` renders it; a payout read from its stream is mapped to
 * the same shape (`payoutRowOf`), and a property test holds the two equal.
 */
export interface PayoutRow {
  readonly id: number;
  readonly accountId: string;
  readonly projectId: string;
  /** requested and refused are never shown; the others are the spec's statuses. */
  readonly status: PayoutLifecycle;
  readonly amount: Kopecks;
  readonly feeAmount: Kopecks;
  readonly netAmount: Kopecks;
  readonly method: PayoutMethod;
  /** Masked as the merchant sees it. */
  readonly account: string | null;
  readonly bank: string | null;
  readonly addressId: number;
  readonly orderId: string | null;
  readonly comment: string | null;
  readonly usdtAmount: string | null;
  /** Kopecks per 1 USDT at creation. */
  readonly usdtRate: Kopecks | null;
  /** Why it was rejected or cancelled. */
  readonly statusReason: string | null;
  readonly externalId: string | null;
  readonly source: PayoutSource;
  readonly createdAt: string;
  /** When it was paid, rejected or cancelled. */
  readonly processedAt: string | null;
}

/** The row of a payout as its request made it. */
export function requestedPayoutRow(r: PayoutRequestedData): PayoutRow {
  return {
    id: r.payoutId,
    accountId: r.accountId,
    projectId: r.projectId,
    status: 'requested',
    amount: r.amount,
    feeAmount: r.feeAmount,
    netAmount: r.netAmount,
    method: r.method,
    account: maskPayoutAccount(r.method, r.account),
    bank: r.bank,
    addressId: r.addressId,
    orderId: r.orderId,
    comment: r.comment,
    usdtAmount: r.usdtAmount,
    usdtRate: r.usdtRate,
    statusReason: null,
    externalId: null,
    source: r.source,
    createdAt: r.createdAt,
    processedAt: null,
  };
}

/** One event folded into a row (null: no PayoutRequested yet). Events come as the payout's decider wrote them. */
export function evolvePayoutRow(row: PayoutRow | null, event: PayoutEvent): PayoutRow | null {
  if (event.type === 'PayoutRequested') return requestedPayoutRow(event.data);
  if (row === null) return null;
  switch (event.type) {
    case 'PayoutReserved':
      return { ...row, status: 'pending' };
    case 'PayoutRefused':
      return { ...row, status: 'refused' };
    case 'PayoutApproved':
      return { ...row, status: 'approved' };
    case 'PayoutProcessingStarted':
      return { ...row, status: 'processing' };
    case 'PayoutPaid':
      return { ...row, status: 'paid', externalId: event.data.externalId, processedAt: event.data.at };
    case 'PayoutRejected':
      return { ...row, status: 'rejected', statusReason: event.data.reason, processedAt: event.data.at };
    case 'PayoutCancelled':
      return { ...row, status: 'cancelled', statusReason: event.data.reason, processedAt: event.data.at };
  }
}

/** A stored row: one exists only from its PayoutRequested on. */
const rowOf = (row: PayoutRow | null): PayoutRow => {
  if (row === null) throw new Error('a payout row without its PayoutRequested');
  return row;
};

/** The payouts table as a fold of the log: the projection writes it, ledger:verify folds it again to check it. */
export const payoutsTable: FoldedTable<PayoutRow | null> = {
  table: 'payouts',
  idType: 'bigint',
  idOf: (e) => (e.data as { payoutId: number }).payoutId,
  initial: () => null,
  evolve: (row, e) => evolvePayoutRow(row, { type: e.type, data: e.data } as PayoutEvent),
  columns: [
    { name: 'account_id', type: 'uuid', value: (r) => rowOf(r).accountId },
    { name: 'project_id', type: 'uuid', value: (r) => rowOf(r).projectId },
    { name: 'order_id', type: 'text', value: (r) => rowOf(r).orderId },
    { name: 'status', type: 'text', value: (r) => rowOf(r).status },
    { name: 'created_at', type: 'timestamptz', value: (r) => rowOf(r).createdAt },
    { name: 'amount', type: 'bigint', value: (r) => rowOf(r).amount },
    { name: 'fee_amount', type: 'bigint', value: (r) => rowOf(r).feeAmount },
    { name: 'processed_at', type: 'timestamptz', value: (r) => rowOf(r).processedAt },
  ],
};

/** Payouts for lists, the recovery worker and finance's reconciliation; a single payout is read from its own stream. Idempotent by revision. */
export const payoutsProjection: Projection = {
  name: 'payouts',
  tables: ['payouts'],
  filter: { streamNamePrefixes: [`${PAYOUT_CATEGORY}-`] },
  apply: (tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> => foldBatchIntoTable(tx, payoutsTable, events),
};

/** What a list of payouts asks for (the merchant API's GET /v1/payouts, live keys). */
export interface PayoutListFilter {
  readonly accountId: string;
  /** The statuses shown (all of the spec's when the merchant names none). */
  readonly statuses: readonly PayoutStatus[];
  /** Only rows below this seq (the previous page's cursor), or null for the first page. */
  readonly before: number | null;
  /** The id of the previous page's last payout: its seq now, if it has one, stands for `before` (a rebuild renumbers). */
  readonly beforeId?: string | null;
  readonly limit: number;
}

/** A page of the account's payouts, newest first (order of arrival). */
export async function listPayouts(pool: Pick<Pool, 'query'>, filter: PayoutListFilter): Promise<ReadModelPage<PayoutRow>> {
  const params: unknown[] = [filter.accountId, filter.statuses, filter.before ?? '9223372036854775807', filter.limit + 1, filter.beforeId ?? null];
  // Below the previous page's last payout where it stands now (a rebuild renumbers), else below the cursor's seq;
  // only a payout of this account anchors it (a cursor naming another account's must not say where that one stands).
  const rows = await pool.query<{ seq: string; item: PayoutRow }>(
    `SELECT seq, item FROM payouts WHERE account_id = $1 AND status = ANY($2)
       AND seq < coalesce((SELECT a.seq FROM payouts a WHERE a.id = $5::bigint AND a.account_id = $1), $3)
     ORDER BY seq DESC LIMIT $4`,
    params,
  );
  return pageOf(rows.rows, filter.limit);
}
