import type { PoolClient } from 'pg';
import type { Migration } from '../../database/src';
import type { RecordedEvent } from '../../event-store/src';
import { evolveInvoice, initialInvoice, Invoice, INVOICE_CATEGORY, InvoiceEvent } from '../../domain/src';
import { foldBatchIntoTable, FoldedTable } from './folded-row';

export const invoicesReadModelMigration: Migration = {
  version: 8,
  name: 'read_model_invoices',
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
  upgrade: (stored) => ({ ...initialInvoice(), ...stored }),
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
