import type { PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import type { RecordedEvent } from '#event-store';
import { INVOICE_CATEGORY, InvoiceEvent, REFUND_CATEGORY, RefundEvent } from '#domain';
import type { Projection } from '#event-store/projections';

export const refundsReadModelMigration: Migration = {
  id: 'payments:0009_read_model_refunds',
  legacyVersion: 13,
  sql: `
CREATE TABLE refunds (
  id text PRIMARY KEY,
  invoice_id uuid NOT NULL,
  project_id uuid NOT NULL,
  account_id uuid NOT NULL,
  mode text NOT NULL,
  amount bigint NOT NULL,
  -- requested (on the invoice, not yet funded), refused (the balance was short),
  -- then the Refund's own statuses: pending, succeeded, failed
  status text NOT NULL,
  requested_at timestamptz NOT NULL,
  process_at timestamptz,
  completed_at timestamptz
);
CREATE INDEX refunds_requested ON refunds (requested_at) WHERE status = 'requested';
CREATE INDEX refunds_due ON refunds (process_at) WHERE status = 'pending';
CREATE INDEX refunds_invoice ON refunds (invoice_id);
`,
};

/**
 * Every refund request and where it stands: for the refund processor (pending and
 * due), for the recovery worker (requested, never funded nor refused), and for audit.
 * A single refund is read from its own stream. Idempotent: each status moves only forwards.
 */
export const refundsProjection: Projection = {
  name: 'refunds',
  tables: ['refunds'],
  filter: { streamNamePrefixes: [`${INVOICE_CATEGORY}-`, `${REFUND_CATEGORY}-`], eventTypePrefixes: ['InvoiceRefund', 'Refund'] },
  async apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> {
    for (const recorded of events) {
      const event = { type: recorded.type, data: recorded.data } as unknown as InvoiceEvent | RefundEvent;
      switch (event.type) {
        case 'InvoiceRefundRequested': {
          const d = event.data;
          await tx.query(
            `INSERT INTO refunds (id, invoice_id, project_id, account_id, mode, amount, status, requested_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'requested', $7) ON CONFLICT (id) DO NOTHING`,
            [d.refundId, d.invoiceId, d.projectId, d.accountId, d.mode, d.amount, d.at],
          );
          break;
        }
        case 'InvoiceRefundReleased':
          if (event.data.reason === 'refused') {
            await tx.query(`UPDATE refunds SET status = 'refused' WHERE id = $1 AND status = 'requested'`, [event.data.refundId]);
          }
          break;
        case 'RefundCreated': {
          const d = event.data;
          await tx.query(
            `INSERT INTO refunds (id, invoice_id, project_id, account_id, mode, amount, status, requested_at, process_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)
             ON CONFLICT (id) DO UPDATE SET status = 'pending', process_at = EXCLUDED.process_at WHERE refunds.status = 'requested'`,
            [d.refundId, d.invoiceId, d.projectId, d.accountId, d.mode, d.amount, d.createdAt, d.processAt],
          );
          break;
        }
        case 'RefundSucceeded':
        case 'RefundFailed':
          await tx.query(`UPDATE refunds SET status = $2, completed_at = $3 WHERE id = $1 AND status IN ('requested', 'pending')`, [
            event.data.refundId,
            event.type === 'RefundSucceeded' ? 'succeeded' : 'failed',
            event.data.at,
          ]);
          break;
        default:
          break;
      }
    }
  },
};
