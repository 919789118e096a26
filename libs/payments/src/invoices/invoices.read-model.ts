import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import type { RecordedEvent } from '#event-store';
import { evolveInvoice, initialInvoice, Invoice, INVOICE_CATEGORY, InvoiceEvent, InvoiceStatus, Mode } from '#domain';
import { foldBatchIntoTable, FoldedTable } from '../read-models/folded-row';

export const invoicesReadModelMigration: Migration = {
  id: 'payments:0004_read_model_invoices',
  sql: `
CREATE TABLE invoices (
  -- Order of arrival in the read model: lists page newest first on it, so an invoice
  -- projected later always lands above every page already read.
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id uuid PRIMARY KEY,
  project_id uuid NOT NULL,
  account_id uuid NOT NULL,
  mode text NOT NULL,
  order_id text NOT NULL,
  status text NOT NULL,
  amount bigint NOT NULL,
  method text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  paid_at timestamptz,
  -- the invoice folded from its stream up to last_revision (what list items show)
  state jsonb NOT NULL,
  last_revision bigint NOT NULL
);
CREATE UNIQUE INDEX invoices_order ON invoices (project_id, mode, order_id);
CREATE INDEX invoices_list ON invoices (project_id, mode, seq DESC);
CREATE INDEX invoices_open_by_expiry ON invoices (expires_at) WHERE status IN ('created', 'pending');
`,
};

const invoicesTable: FoldedTable<Invoice> = {
  table: 'invoices',
  idType: 'uuid',
  idOf: (e) => (e.data as { invoiceId: string }).invoiceId,
  initial: initialInvoice,
  // Rows written before the invoice state grew a field read it as its initial value.
  evolve: (state, e) => evolveInvoice(state, { type: e.type, data: e.data } as unknown as InvoiceEvent),
  columns: [
    { name: 'project_id', type: 'uuid', value: (s) => s.created!.projectId },
    { name: 'account_id', type: 'uuid', value: (s) => s.created!.accountId },
    { name: 'mode', type: 'text', value: (s) => s.created!.mode },
    { name: 'order_id', type: 'text', value: (s) => s.created!.orderId },
    { name: 'status', type: 'text', value: (s) => s.status },
    { name: 'amount', type: 'bigint', value: (s) => s.created!.amount },
    { name: 'method', type: 'text', value: (s) => s.method },
    { name: 'created_at', type: 'timestamptz', value: (s) => s.created!.createdAt },
    { name: 'expires_at', type: 'timestamptz', value: (s) => s.created!.expiresAt },
    { name: 'paid_at', type: 'timestamptz', value: (s) => s.paidAt },
  ],
};

/**
 * Invoices for lists and the expiry worker. A single invoice is always read from its
 * own stream (immediately consistent); this table answers the collection queries.
 * Idempotent: each event applies only above the revision already stored.
 */
export const invoicesProjection = {
  name: 'invoices',
  tables: ['invoices'],
  filter: { streamNamePrefixes: [`${INVOICE_CATEGORY}-`] },
  apply: (tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> => foldBatchIntoTable(tx, invoicesTable, events),
};

/** What a list of invoices asks for (the merchant API's GET /v1/invoices). */
export interface InvoiceListFilter {
  readonly projectId: string;
  readonly mode: Mode;
  readonly orderId?: string;
  readonly status?: InvoiceStatus;
  /** created_at at or after. */
  readonly from?: Date;
  /** created_at before. */
  readonly to?: Date;
  /** Only rows below this seq (the cursor of the previous page), or null for the first page. */
  readonly before: number | null;
  readonly limit: number;
}

/** A page of a list read from a read model: its items, whether more follow, and the seq to continue below. */
export interface ReadModelPage<T> {
  readonly items: readonly T[];
  readonly hasMore: boolean;
  /** The seq of the page's last item (the next page's cursor), or null for an empty page. */
  readonly lastSeq: number | null;
}

export type InvoicePage = ReadModelPage<Invoice>;

/** A page of the invoices table, newest first (order of arrival). */
export async function listInvoices(pool: Pick<Pool, 'query'>, filter: InvoiceListFilter): Promise<InvoicePage> {
  const where = ['project_id = $1', 'mode = $2'];
  const params: unknown[] = [filter.projectId, filter.mode];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (filter.orderId !== undefined) add('order_id = ?', filter.orderId);
  if (filter.status !== undefined) add('status = ?', filter.status);
  if (filter.from !== undefined) add('created_at >= ?', filter.from);
  if (filter.to !== undefined) add('created_at < ?', filter.to);
  if (filter.before !== null) add('seq < ?', filter.before);
  params.push(filter.limit + 1);
  const rows = await pool.query<{ seq: string; state: Invoice }>(
    `SELECT seq, state FROM invoices WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.length}`,
    params,
  );
  return pageOf(rows.rows, filter.limit);
}

/** The first `limit` of `limit + 1` rows read, newest first. */
export function pageOf<T>(rows: readonly { seq: string; state: T }[], limit: number): ReadModelPage<T> {
  const page = rows.slice(0, limit);
  return {
    items: page.map((r) => r.state),
    hasMore: rows.length > limit,
    lastSeq: page.length > 0 ? Number(page[page.length - 1]!.seq) : null,
  };
}
