import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import type { RecordedEvent } from '#event-store';
import { evolvePayout, initialPayout, Payout, PAYOUT_CATEGORY, PayoutEvent, PayoutStatus } from '#domain';
import type { Projection } from '#event-store/projections';
import { foldBatchIntoTable, FoldedTable } from '../read-models/folded-row';
import { pageOf, ReadModelPage } from '../invoices/invoices.read-model';

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
  state jsonb NOT NULL,
  last_revision bigint NOT NULL
);
CREATE INDEX payouts_list ON payouts (account_id, seq DESC);
CREATE INDEX payouts_requested ON payouts (created_at) WHERE status = 'requested';
`,
};

const payoutsTable: FoldedTable<Payout> = {
  table: 'payouts',
  idType: 'bigint',
  idOf: (e) => (e.data as { payoutId: number }).payoutId,
  initial: initialPayout,
  evolve: (state, e) => evolvePayout(state, { type: e.type, data: e.data } as unknown as PayoutEvent),
  columns: [
    { name: 'account_id', type: 'uuid', value: (s) => s.requested!.accountId },
    { name: 'project_id', type: 'uuid', value: (s) => s.requested!.projectId },
    { name: 'order_id', type: 'text', value: (s) => s.requested!.orderId },
    { name: 'status', type: 'text', value: (s) => s.status },
    { name: 'created_at', type: 'timestamptz', value: (s) => s.requested!.createdAt },
  ],
};

/** Payouts for lists and the recovery worker; a single payout is read from its own stream. Idempotent by revision. */
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
  readonly limit: number;
}

/** A page of the account's payouts, newest first (order of arrival). */
export async function listPayouts(pool: Pick<Pool, 'query'>, filter: PayoutListFilter): Promise<ReadModelPage<Payout>> {
  const params: unknown[] = [filter.accountId, filter.statuses, filter.before ?? '9223372036854775807', filter.limit + 1];
  const rows = await pool.query<{ seq: string; state: Payout }>(
    `SELECT seq, state FROM payouts WHERE account_id = $1 AND status = ANY($2) AND seq < $3 ORDER BY seq DESC LIMIT $4`,
    params,
  );
  return pageOf(rows.rows, filter.limit);
}
