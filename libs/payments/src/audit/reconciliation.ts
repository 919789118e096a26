import type { Pool } from 'pg';
import { isUuid, payoutReservationId } from '#domain';
import { EntryFact, HOLD_RELEASE_GRACE_MS, PaidInvoiceFact, PaidPayoutFact, reconcile, ReconciliationDifference, SucceededRefundFact } from '#ledger';

export interface ReconciliationReport {
  readonly from: string;
  readonly to: string;
  readonly checked: { readonly paidInvoices: number; readonly succeededRefunds: number; readonly paidPayouts: number; readonly entries: number };
  readonly differences: readonly ReconciliationDifference[];
}

const RECONCILED_KINDS = ['payment_recorded', 'hold_released', 'reservation_settled'];

type EntryRow = {
  entry_id: string;
  account_id: string;
  mode: string;
  kind: string;
  cause: string;
  occurred_at: Date;
  postings: { account: string; amount: number }[];
};
const ENTRY_COLUMNS = `e.entry_id, e.account_id, e.mode, e.kind, e.cause, e.occurred_at,
  COALESCE((SELECT json_agg(json_build_object('account', p.account, 'amount', p.amount) ORDER BY p.ordinal)
            FROM ledger_postings p WHERE p.entry_id = e.entry_id), '[]') AS postings`;
const entryFact = (r: EntryRow): EntryFact => ({
  entryId: r.entry_id,
  accountId: r.account_id,
  mode: r.mode,
  kind: r.kind,
  cause: r.cause,
  occurredAt: r.occurred_at.toISOString(),
  postings: r.postings.map((p) => ({ account: p.account, amount: Number(p.amount) })),
});

type InvoiceRow = {
  id: string;
  account_id: string;
  mode: string;
  paid_at: Date | null;
  status: string;
  net: string | null;
  fee: string | null;
  available_at: Date | null;
};
const INVOICE_COLUMNS = `id::text, account_id::text, mode, paid_at, status, net_amount AS net, fee_amount AS fee, available_at`;
const invoiceFact = (r: InvoiceRow): PaidInvoiceFact => ({
  invoiceId: r.id,
  accountId: r.account_id,
  mode: r.mode,
  netAmount: Number(r.net ?? 0),
  feeAmount: Number(r.fee ?? 0),
  paidAt: r.paid_at!.toISOString(),
  availableAt: r.available_at?.toISOString() ?? null,
});

type RefundRow = { id: string; invoice_id: string; account_id: string; mode: string; amount: string; status: string };
const REFUND_COLUMNS = `id, invoice_id::text, account_id::text, mode, amount, status`;
const refundFact = (r: RefundRow): SucceededRefundFact => ({
  refundId: r.id,
  invoiceId: r.invoice_id,
  accountId: r.account_id,
  mode: r.mode,
  amount: Number(r.amount),
});

type PayoutRow = { id: string; account_id: string; status: string; amount: string; fee: string };
const PAYOUT_COLUMNS = `id::text, account_id::text, status, amount, fee_amount AS fee`;
const payoutFact = (r: PayoutRow): PaidPayoutFact => ({
  payoutId: r.id,
  reservationId: payoutReservationId(Number(r.id)),
  accountId: r.account_id,
  mode: 'live',
  amount: Number(r.amount),
  feeAmount: Number(r.fee),
});

/**
 * Reconciles the period (from, to] from the read models, in one REPEATABLE READ
 * snapshot: the flows of the period (invoices paid or their holds due, refunds
 * succeeded, payouts paid in it), the entries of the period (payment_recorded, hold_released, reservation_settled),
 * then each side's counterpart whatever its time (the entries the flows' causes posted,
 * the flows the entries name), and the pure comparison (`reconcile`, libs/ledger).
 */
export async function reconcilePeriod(pool: Pick<Pool, 'connect'>, from: Date, to: Date): Promise<ReconciliationReport> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const q = <R extends object>(text: string, values: unknown[]) => client.query<R>(text, values).then((r) => r.rows);

    // Invoices paid in the period, and those whose hold fell due in it (each bound HOLD_RELEASE_GRACE_MS earlier, so
    // every hold is checked in exactly one period): a hold paid before a period and released late, or never, is a difference.
    const [dueFrom, dueTo] = [from, to].map((at) => new Date(at.getTime() - HOLD_RELEASE_GRACE_MS));
    const invoices = (
      await q<InvoiceRow>(
        `SELECT ${INVOICE_COLUMNS} FROM invoices
         WHERE paid_at > $1 AND paid_at <= $2 OR paid_at IS NOT NULL AND available_at > $3 AND available_at <= $4`,
        [from, to, dueFrom, dueTo],
      )
    ).map(invoiceFact);
    const refunds = (
      await q<RefundRow>(`SELECT ${REFUND_COLUMNS} FROM refunds WHERE status = 'succeeded' AND completed_at > $1 AND completed_at <= $2`, [from, to])
    ).map(refundFact);
    const payouts = (
      await q<PayoutRow>(`SELECT ${PAYOUT_COLUMNS} FROM payouts WHERE status = 'paid' AND processed_at > $1 AND processed_at <= $2`, [from, to])
    ).map(payoutFact);

    const entries = new Map<string, EntryFact>();
    for (const row of await q<EntryRow>(`SELECT ${ENTRY_COLUMNS} FROM ledger_entries e WHERE e.kind = ANY($1) AND e.occurred_at > $2 AND e.occurred_at <= $3`, [
      RECONCILED_KINDS,
      from,
      to,
    ])) {
      entries.set(row.entry_id, entryFact(row));
    }

    // The entries of the flows' causes (the cause index: account, mode, cause).
    const wanted: [string, string, string][] = [
      ...invoices.flatMap((i): [string, string, string][] => [
        [i.accountId, i.mode, `payment:${i.invoiceId}`],
        [i.accountId, i.mode, `hold_release:${i.invoiceId}`],
      ]),
      ...refunds.map((r): [string, string, string] => [r.accountId, r.mode, `settle:${r.refundId}`]),
      ...payouts.map((p): [string, string, string] => [p.accountId, p.mode, `settle:${p.reservationId}`]),
    ];
    const byCause = async (triples: readonly [string, string, string][]) =>
      triples.length === 0
        ? []
        : q<EntryRow>(
            `SELECT ${ENTRY_COLUMNS} FROM ledger_entries e JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(account_id, mode, cause)
               ON e.account_id = w.account_id AND e.mode = w.mode AND e.cause = w.cause`,
            [triples.map((t) => t[0]), triples.map((t) => t[1]), triples.map((t) => t[2])],
          );
    for (const row of await byCause(wanted)) entries.set(row.entry_id, entryFact(row));

    // The flows the period's entries name, whatever their time.
    const knownInvoices = new Set(invoices.map((i) => i.invoiceId));
    const knownRefunds = new Set(refunds.map((r) => r.refundId));
    const knownPayouts = new Set(payouts.map((p) => p.payoutId));
    const invoiceIds = new Set<string>();
    const refundIds = new Set<string>();
    const payoutIds = new Set<string>();
    for (const e of entries.values()) {
      const at = e.cause.indexOf(':');
      const prefix = e.cause.slice(0, at);
      const id = e.cause.slice(at + 1);
      if ((prefix === 'payment' || prefix === 'hold_release') && !knownInvoices.has(id)) invoiceIds.add(id);
      else if (prefix === 'settle' && /^po_\d{1,18}$/.test(id) && !knownPayouts.has(id.slice(3))) payoutIds.add(id.slice(3));
      else if (prefix === 'settle' && !id.startsWith('po_') && !knownRefunds.has(id)) refundIds.add(id);
    }
    const otherReservations: Record<string, string> = {};
    const uuids = [...invoiceIds].filter(isUuid);
    if (uuids.length > 0) {
      for (const row of await q<InvoiceRow>(`SELECT ${INVOICE_COLUMNS} FROM invoices WHERE id = ANY($1::uuid[])`, [uuids])) {
        if (row.paid_at !== null) invoices.push(invoiceFact(row));
      }
    }
    if (refundIds.size > 0) {
      for (const row of await q<RefundRow>(`SELECT ${REFUND_COLUMNS} FROM refunds WHERE id = ANY($1::text[])`, [[...refundIds]])) {
        if (row.status === 'succeeded') refunds.push(refundFact(row));
        else otherReservations[row.id] = row.status;
      }
    }
    if (payoutIds.size > 0) {
      for (const row of await q<PayoutRow>(`SELECT ${PAYOUT_COLUMNS} FROM payouts WHERE id = ANY($1::bigint[])`, [[...payoutIds]])) {
        if (row.status === 'paid') payouts.push(payoutFact(row));
        else otherReservations[payoutReservationId(Number(row.id))] = row.status;
      }
    }
    // Their own entries too, so that a counterpart found here is compared whole.
    const more = [
      ...invoices
        .filter((i) => invoiceIds.has(i.invoiceId))
        .flatMap((i): [string, string, string][] => [
          [i.accountId, i.mode, `payment:${i.invoiceId}`],
          [i.accountId, i.mode, `hold_release:${i.invoiceId}`],
        ]),
    ];
    for (const row of await byCause(more)) entries.set(row.entry_id, entryFact(row));

    const toIso = to.toISOString();
    return {
      from: from.toISOString(),
      to: toIso,
      checked: { paidInvoices: invoices.length, succeededRefunds: refunds.length, paidPayouts: payouts.length, entries: entries.size },
      differences: reconcile({
        from: from.toISOString(),
        to: toIso,
        paidInvoices: invoices,
        succeededRefunds: refunds,
        paidPayouts: payouts,
        entries: [...entries.values()],
        otherReservations,
      }),
    };
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}
