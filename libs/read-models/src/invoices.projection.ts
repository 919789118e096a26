import type { PoolClient } from 'pg';
import type { Migration } from '../../database/src';
import type { RecordedEvent } from '../../event-store/src';
import { evolveInvoice, initialInvoice, Invoice, INVOICE_CATEGORY, InvoiceEvent } from '../../domain/src';
import { foldIntoRow } from './folded-row';

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

/**
 * Invoices for lists and the expiry worker. A single invoice is always read from its
 * own stream (immediately consistent); this table answers the collection queries.
 * Idempotent: each event applies only above the revision already stored.
 */
export const invoicesProjection = {
  name: 'invoices',
  tables: ['invoices'],
  filter: { streamNamePrefixes: [`${INVOICE_CATEGORY}-`] },
  async apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> {
    for (const recorded of events) {
      const event = { type: recorded.type, data: recorded.data } as unknown as InvoiceEvent;
      const revision = recorded.revision.toString();
      if (event.type === 'InvoiceCreated') {
        const d = event.data;
        const state = evolveInvoice(initialInvoice(), event);
        await tx.query(
          `INSERT INTO invoices (id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at, state, last_revision)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING`,
          [d.invoiceId, d.projectId, d.accountId, d.mode, d.orderId, state.status, d.amount, d.method, d.createdAt, d.expiresAt, state, revision],
        );
        continue;
      }
      // Rows written before the invoice state grew a field read it as its initial value.
      const state = await foldIntoRow<Invoice>(tx, 'invoices', event.data.invoiceId, recorded.revision, (s) =>
        evolveInvoice({ ...initialInvoice(), ...s }, event),
      );
      if (!state) continue;
      await tx.query(
        `UPDATE invoices SET status = $2, method = $3, paid_at = $4, state = $5, last_revision = $6 WHERE id = $1`,
        [event.data.invoiceId, state.status, state.method, state.paidAt, state, revision],
      );
    }
  },
};
