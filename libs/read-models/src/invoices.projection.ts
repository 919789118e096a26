import type { PoolClient } from 'pg';
import type { Migration } from '../../database/src';
import type { RecordedEvent } from '../../event-store/src';
import { INVOICE_CATEGORY, InvoiceEvent } from '../../domain/src';

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
      switch (event.type) {
        case 'InvoiceCreated': {
          const d = event.data;
          await tx.query(
            `INSERT INTO invoices (id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at, last_revision)
             VALUES ($1, $2, $3, $4, $5, 'created', $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`,
            [d.invoiceId, d.projectId, d.accountId, d.mode, d.orderId, d.amount, d.method, d.createdAt, d.expiresAt, revision],
          );
          break;
        }
        case 'InvoiceMethodChosen':
          await tx.query(`UPDATE invoices SET status = 'pending', method = $2, last_revision = $3 WHERE id = $1 AND last_revision < $3`, [
            event.data.invoiceId,
            event.data.method,
            revision,
          ]);
          break;
        case 'InvoicePaid':
          await tx.query(
            `UPDATE invoices SET status = 'paid', method = $2, paid_at = $3, last_revision = $4 WHERE id = $1 AND last_revision < $4`,
            [event.data.invoiceId, event.data.method, event.data.paidAt, revision],
          );
          break;
        case 'InvoiceFailed':
          await tx.query(`UPDATE invoices SET status = 'failed', last_revision = $2 WHERE id = $1 AND last_revision < $2`, [
            event.data.invoiceId,
            revision,
          ]);
          break;
        case 'InvoiceExpired':
          await tx.query(`UPDATE invoices SET status = 'expired', last_revision = $2 WHERE id = $1 AND last_revision < $2`, [
            event.data.invoiceId,
            revision,
          ]);
          break;
      }
    }
  },
};
