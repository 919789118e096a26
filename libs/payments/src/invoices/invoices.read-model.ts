import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import type { RecordedEvent } from '#event-store';
import type { Customer, Invoice, InvoiceAmounts, InvoiceCreatedData, InvoiceEvent, InvoiceStatus, MethodCode, Mode } from '#domain';
import { INVOICE_CATEGORY, isPaid } from '#domain';
import type { Kopecks } from '#ledger';
import { foldBatchIntoTable, FoldedTable } from '../read-models/folded-row';

/**
 * The invoices read model: the row in the read model's own shape (`item`, json: the text
 * as written, decision 0095) with the figures finance reads as columns. A merchant's
 * list is read through the merchant's own rows only: `seq` (order of arrival, so an
 * invoice projected later lands above every page already read) is unique per merchant
 * by `invoices_list`, and a window of creation times has its own index. A unique index
 * on `seq` alone let PostgreSQL answer a filtered first page by walking every
 * merchant's newer invoices, a cost that grew with the whole gateway's history.
 */
export const invoicesReadModelMigration: Migration = {
  id: 'payments:0005_read_model_invoices',
  sql: `
CREATE TABLE invoices (
  seq bigint GENERATED ALWAYS AS IDENTITY,
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
  last_revision bigint NOT NULL,
  net_amount bigint NOT NULL,
  fee_amount bigint NOT NULL,
  available_at timestamptz,
  item json NOT NULL
);
CREATE UNIQUE INDEX invoices_order ON invoices (project_id, mode, order_id);
CREATE UNIQUE INDEX invoices_list ON invoices (project_id, mode, seq DESC);
CREATE INDEX invoices_created ON invoices (project_id, mode, created_at);
CREATE INDEX invoices_open_by_expiry ON invoices (expires_at) WHERE status IN ('created', 'pending');
CREATE TRIGGER invoices_reset_counted AFTER TRUNCATE ON invoices FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('invoices');
`,
};

/**
 * A row of the invoices read model: what a list shows of an invoice and what finance
 * reads of it, in the read model's own shape (not the aggregate's state), evolved from
 * the events alone. `invoiceView` renders it; a single invoice read from its stream is
 * mapped to the same shape (`invoiceRowOf`), and a property test holds the two equal.
 */
export interface InvoiceRow {
  readonly id: string;
  readonly projectId: string;
  readonly accountId: string;
  readonly mode: Mode;
  readonly orderId: string;
  readonly status: InvoiceStatus;
  readonly amount: Kopecks;
  /** Null until the merchant or the buyer chose one. */
  readonly method: MethodCode | null;
  /** At the chosen method's rate (at the largest rate while none is chosen). */
  readonly amounts: InvoiceAmounts;
  /** Refunded in all (succeeded refunds). */
  readonly refundedAmount: Kopecks;
  readonly description: string | null;
  readonly customer: Customer;
  readonly customFields: InvoiceCreatedData['customFields'];
  readonly createdAt: string;
  readonly expiresAt: string;
  readonly paidAt: string | null;
  readonly availableAt: string | null;
}

/** The row of an invoice as its creation made it. */
export function createdInvoiceRow(c: InvoiceCreatedData): InvoiceRow {
  return {
    id: c.invoiceId,
    projectId: c.projectId,
    accountId: c.accountId,
    mode: c.mode,
    orderId: c.orderId,
    status: 'created',
    amount: c.amount,
    method: c.method,
    amounts: c.amounts,
    refundedAmount: 0,
    description: c.description,
    customer: c.customer,
    customFields: c.customFields,
    createdAt: c.createdAt,
    expiresAt: c.expiresAt,
    paidAt: null,
    availableAt: null,
  };
}

/** One event folded into a row (null: no InvoiceCreated yet). Events come as the invoice's decider wrote them. */
export function evolveInvoiceRow(row: InvoiceRow | null, event: InvoiceEvent): InvoiceRow | null {
  if (event.type === 'InvoiceCreated') return createdInvoiceRow(event.data);
  if (row === null) return null;
  switch (event.type) {
    case 'InvoiceMethodChosen':
      return { ...row, status: 'pending', method: event.data.method, amounts: event.data.amounts };
    case 'InvoicePaid':
      return { ...row, status: 'paid', method: event.data.method, paidAt: event.data.paidAt, availableAt: event.data.availableAt };
    case 'InvoiceFailed':
      return { ...row, status: 'failed' };
    case 'InvoiceExpired':
      return { ...row, status: 'expired' };
    case 'InvoiceRefunded': {
      const { refundedAmount } = event.data;
      return { ...row, refundedAmount, status: refundedAmount >= row.amount ? 'refunded' : 'partially_refunded' };
    }
    case 'InvoiceRefundRequested':
    case 'InvoiceRefundReleased':
      return row;
  }
}

/** The row of an invoice folded from its stream by the write side (a single read, a webhook). */
export function invoiceRowOf(invoice: Invoice): InvoiceRow {
  const row = { ...createdInvoiceRow(invoice.created), status: invoice.status, method: invoice.method, amounts: invoice.amounts };
  if (!isPaid(invoice)) return row;
  return { ...row, refundedAmount: invoice.refundedAmount, paidAt: invoice.paidAt, availableAt: invoice.availableAt };
}

/** A stored row: one exists only from its InvoiceCreated on. */
const rowOf = (row: InvoiceRow | null): InvoiceRow => {
  if (row === null) throw new Error('an invoice row without its InvoiceCreated');
  return row;
};

/** The invoices table as a fold of the log: the projection writes it, ledger:verify folds it again to check it. */
export const invoicesTable: FoldedTable<InvoiceRow | null> = {
  table: 'invoices',
  idType: 'uuid',
  idOf: (e) => (e.data as { invoiceId: string }).invoiceId,
  initial: () => null,
  evolve: (row, e) => evolveInvoiceRow(row, { type: e.type, data: e.data } as InvoiceEvent),
  columns: [
    { name: 'project_id', type: 'uuid', value: (r) => rowOf(r).projectId },
    { name: 'account_id', type: 'uuid', value: (r) => rowOf(r).accountId },
    { name: 'mode', type: 'text', value: (r) => rowOf(r).mode },
    { name: 'order_id', type: 'text', value: (r) => rowOf(r).orderId },
    { name: 'status', type: 'text', value: (r) => rowOf(r).status },
    { name: 'amount', type: 'bigint', value: (r) => rowOf(r).amount },
    { name: 'method', type: 'text', value: (r) => rowOf(r).method },
    { name: 'created_at', type: 'timestamptz', value: (r) => rowOf(r).createdAt },
    { name: 'expires_at', type: 'timestamptz', value: (r) => rowOf(r).expiresAt },
    { name: 'paid_at', type: 'timestamptz', value: (r) => rowOf(r).paidAt },
    { name: 'net_amount', type: 'bigint', value: (r) => rowOf(r).amounts.netAmount },
    { name: 'fee_amount', type: 'bigint', value: (r) => rowOf(r).amounts.feeAmount },
    { name: 'available_at', type: 'timestamptz', value: (r) => rowOf(r).availableAt },
  ],
};

/**
 * Invoices for lists, the expiry worker and finance's reconciliation. A single invoice
 * is always read from its own stream (immediately consistent); this table answers the
 * collection queries. Idempotent: each event applies only above the revision already stored.
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
  /** The id of the previous page's last invoice: its seq now, if it has one, stands for `before` (a rebuild renumbers). */
  readonly beforeId?: string | null;
  readonly limit: number;
  /** With `status`: the status at this instant (an open invoice past its expiresAt is expired, as its GET says). */
  readonly at?: Date;
}

/** A page of a list read from a read model: its items, whether more follow, and the seq to continue below. */
export interface ReadModelPage<T> {
  readonly items: readonly T[];
  readonly hasMore: boolean;
  /** The seq of the page's last item (the next page's cursor), or null for an empty page. */
  readonly lastSeq: number | null;
}

export type InvoicePage = ReadModelPage<InvoiceRow>;

const OPEN: readonly InvoiceStatus[] = ['created', 'pending'];

/** A page of the invoices table, newest first (order of arrival). */
export async function listInvoices(pool: Pick<Pool, 'query'>, filter: InvoiceListFilter): Promise<InvoicePage> {
  const where = ['project_id = $1', 'mode = $2'];
  const params: unknown[] = [filter.projectId, filter.mode];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (filter.orderId !== undefined) add('order_id = ?', filter.orderId);
  if (filter.status !== undefined && filter.at !== undefined && OPEN.includes(filter.status)) {
    add('status = ?', filter.status);
    add('expires_at > ?', filter.at);
  } else if (filter.status === 'expired' && filter.at !== undefined) {
    add(`(status = 'expired' OR (status IN ('created', 'pending') AND expires_at <= ?))`, filter.at);
  } else if (filter.status !== undefined) add('status = ?', filter.status);
  if (filter.from !== undefined) add('created_at >= ?', filter.from);
  if (filter.to !== undefined) add('created_at < ?', filter.to);
  if (filter.before !== null) {
    // Below the previous page's last invoice where it stands now (a rebuild renumbers), else below the cursor's seq;
    // only an invoice of this list anchors it (a cursor naming another merchant's must not say where that one stands).
    params.push(filter.beforeId ?? null, filter.before);
    where.push(
      `seq < coalesce((SELECT a.seq FROM invoices a WHERE a.id = $${params.length - 1}::uuid AND a.project_id = $1 AND a.mode = $2), $${params.length})`,
    );
  }
  params.push(filter.limit + 1);
  const rows = await pool.query<{ seq: string; item: InvoiceRow }>(
    `SELECT seq, item FROM invoices WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT $${params.length}`,
    params,
  );
  return pageOf(rows.rows, filter.limit);
}

/** The first `limit` of `limit + 1` rows read, newest first. */
export function pageOf<T>(rows: readonly { seq: string; item: T }[], limit: number): ReadModelPage<T> {
  const page = rows.slice(0, limit);
  return {
    items: page.map((r) => r.item),
    hasMore: rows.length > limit,
    lastSeq: page.length > 0 ? Number(page[page.length - 1]!.seq) : null,
  };
}
