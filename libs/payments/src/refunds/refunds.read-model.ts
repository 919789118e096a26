import type { Pool, PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import type { RecordedEvent } from '#event-store';
import { INVOICE_CATEGORY, InvoiceEvent, REFUND_CATEGORY, RefundEvent } from '#domain';
import type { Projection } from '#event-store/projections';
import type { RowFold } from '../read-models/folded-row';

export const refundsReadModelMigration: Migration = {
  id: 'payments:0009_read_model_refunds',
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
CREATE TRIGGER refunds_reset_counted AFTER TRUNCATE ON refunds FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('refunds');
-- The PostgreSQL log's refund requests by refund id, so that a refund answered 202 is found before this read model
-- has it (invoiceOfRefund). Partial: only those events carry an entry.
CREATE INDEX events_refund_requests ON events ((data->>'refundId')) WHERE event_type = 'InvoiceRefundRequested';
`,
};

/** A row of `refunds` as a batch folds it (times as the events carry them). */
interface RefundRow {
  readonly id: string;
  invoiceId: string;
  projectId: string;
  accountId: string;
  mode: string;
  amount: number;
  status: string;
  requestedAt: string;
  processAt: string | null;
  completedAt: string | null;
}

/** How one event moves a refund's row (null: none yet), exactly as its own statement used to. */
function evolveRefundRow(row: RefundRow | null, event: InvoiceEvent | RefundEvent): RefundRow | null {
  switch (event.type) {
    case 'InvoiceRefundRequested': {
      const d = event.data;
      if (row) return row; // INSERT ... ON CONFLICT DO NOTHING
      return {
        id: d.refundId,
        invoiceId: d.invoiceId,
        projectId: d.projectId,
        accountId: d.accountId,
        mode: d.mode,
        amount: d.amount,
        status: 'requested',
        requestedAt: d.at,
        processAt: null,
        completedAt: null,
      };
    }
    case 'InvoiceRefundReleased':
      return row && event.data.reason === 'refused' && row.status === 'requested' ? { ...row, status: 'refused' } : row;
    case 'RefundCreated': {
      const d = event.data;
      if (!row) {
        return {
          id: d.refundId,
          invoiceId: d.invoiceId,
          projectId: d.projectId,
          accountId: d.accountId,
          mode: d.mode,
          amount: d.amount,
          status: 'pending',
          requestedAt: d.createdAt,
          processAt: d.processAt,
          completedAt: null,
        };
      }
      return row.status === 'requested' ? { ...row, status: 'pending', processAt: d.processAt } : row;
    }
    case 'RefundSucceeded':
    case 'RefundFailed':
      return row && (row.status === 'requested' || row.status === 'pending')
        ? { ...row, status: event.type === 'RefundSucceeded' ? 'succeeded' : 'failed', completedAt: event.data.at }
        : row;
    default:
      return row;
  }
}

const refundIdOf = (event: InvoiceEvent | RefundEvent): string | null => {
  switch (event.type) {
    case 'InvoiceRefundRequested':
    case 'InvoiceRefundReleased':
    case 'RefundCreated':
    case 'RefundSucceeded':
    case 'RefundFailed':
      return event.data.refundId;
    default:
      return null;
  }
};

const asEvent = (recorded: RecordedEvent) => ({ type: recorded.type, data: recorded.data }) as unknown as InvoiceEvent | RefundEvent;

/** The refunds table as a fold of the log: ledger:verify folds it again to check the table the projection below writes. */
export const refundsFold: RowFold<RefundRow | null> = {
  idOf: (e) => refundIdOf(asEvent(e)),
  initial: () => null,
  evolve: (row, e) => evolveRefundRow(row, asEvent(e)),
  columns: (
    [
      ['invoice_id', 'uuid', 'invoiceId'],
      ['project_id', 'uuid', 'projectId'],
      ['account_id', 'uuid', 'accountId'],
      ['mode', 'text', 'mode'],
      ['amount', 'bigint', 'amount'],
      ['status', 'text', 'status'],
      ['requested_at', 'timestamptz', 'requestedAt'],
      ['process_at', 'timestamptz', 'processAt'],
      ['completed_at', 'timestamptz', 'completedAt'],
    ] as const
  ).map(([name, type, field]) => ({ name, type, value: (r: RefundRow | null) => r?.[field] ?? null })),
};

/**
 * Every refund request and where it stands: for the refund processor (pending and
 * due), for the recovery worker (requested, never funded nor refused), and for audit.
 * A single refund is read from its own stream. Idempotent: each status moves only
 * forwards. A batch is applied in three statements whatever its size: the statuses of
 * the refunds it touches are read (and locked), each refund's events are folded in
 * memory in log order, new rows are inserted and changed ones updated at once.
 */
export const refundsProjection: Projection = {
  name: 'refunds',
  tables: ['refunds'],
  filter: { streamNamePrefixes: [`${INVOICE_CATEGORY}-`, `${REFUND_CATEGORY}-`], eventTypePrefixes: ['InvoiceRefund', 'Refund'] },
  async apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> {
    const byRefund = new Map<string, (InvoiceEvent | RefundEvent)[]>();
    for (const recorded of events) {
      const event = asEvent(recorded);
      const id = refundIdOf(event);
      if (id === null) continue;
      const list = byRefund.get(id);
      if (list) list.push(event);
      else byRefund.set(id, [event]);
    }
    if (byRefund.size === 0) return;
    const stored = await tx.query<{ id: string; status: string }>('SELECT id, status FROM refunds WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE', [
      [...byRefund.keys()],
    ]);
    const storedStatus = new Map(stored.rows.map((r) => [r.id, r.status]));

    const inserted: RefundRow[] = [];
    const updated: RefundRow[] = [];
    for (const [id, refundEvents] of byRefund) {
      const status = storedStatus.get(id);
      // A stored row is folded from its status: the transitions read nothing else, and
      // every column they write (status, process_at, completed_at) is written back.
      const before: RefundRow | null =
        status === undefined
          ? null
          : { id, invoiceId: '', projectId: '', accountId: '', mode: '', amount: 0, status, requestedAt: '', processAt: null, completedAt: null };
      let row = before;
      for (const event of refundEvents) row = evolveRefundRow(row, event);
      if (row === null || row === before) continue;
      if (before === null) inserted.push(row);
      else updated.push(row);
    }
    if (inserted.length > 0) {
      await tx.query(
        `INSERT INTO refunds (id, invoice_id, project_id, account_id, mode, amount, status, requested_at, process_at, completed_at)
         SELECT * FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $6::bigint[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::timestamptz[])`,
        [
          inserted.map((r) => r.id),
          inserted.map((r) => r.invoiceId),
          inserted.map((r) => r.projectId),
          inserted.map((r) => r.accountId),
          inserted.map((r) => r.mode),
          inserted.map((r) => r.amount),
          inserted.map((r) => r.status),
          inserted.map((r) => r.requestedAt),
          inserted.map((r) => r.processAt),
          inserted.map((r) => r.completedAt),
        ],
      );
    }
    if (updated.length > 0) {
      // process_at and completed_at are null on every row a transition starts from
      // (requested, or pending for completed_at), so null here keeps the stored value.
      await tx.query(
        `UPDATE refunds r SET status = u.status, process_at = coalesce(u.process_at, r.process_at), completed_at = coalesce(u.completed_at, r.completed_at)
         FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS u(id, status, process_at, completed_at)
         WHERE r.id = u.id`,
        [updated.map((r) => r.id), updated.map((r) => r.status), updated.map((r) => r.processAt), updated.map((r) => r.completedAt)],
      );
    }
  },
};

/**
 * The invoice a refund was asked of, or null: from the read model, else from its
 * request in the log. The read model trails the log (by milliseconds, or for as long
 * as an open transaction holds the log's readers back), and a 202 is answered once the
 * request is in the log: an operator's outcome or a GET right after it must find it.
 */
export async function invoiceOfRefund(pool: Pool, refundId: string): Promise<string | null> {
  const r = await pool.query<{ invoice_id: string }>(
    `SELECT invoice_id::text FROM refunds WHERE id = $1
     UNION ALL
     (SELECT data->>'invoiceId' FROM events WHERE event_type = 'InvoiceRefundRequested' AND data->>'refundId' = $1 LIMIT 1)
     LIMIT 1`,
    [refundId],
  );
  return r.rows[0]?.invoice_id ?? null;
}
