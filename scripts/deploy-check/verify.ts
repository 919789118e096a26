import type { Pool } from 'pg';
import { request } from 'undici';
import { InvoiceRecord, Load, OperationKind, toKopecks } from './load';
import { sleep } from './spec-client';

/** What the database and the operator API say about the acknowledged operations. */
export interface Findings {
  readonly lost: Map<OperationKind, number>;
  readonly doubled: Map<OperationKind, number>;
  /** Accounts whose balance (read model, or rebuilt from the log) differs from what the acknowledged operations add up to. */
  readonly balancesOff: number;
  readonly problems: string[];
}

interface ProjectionReport {
  readonly projection: string;
  readonly state: string;
  readonly lag: number | null;
}

/**
 * Waits until the projector has caught up with the log and the money has settled:
 * every projection live at the head, every refund completed (REFUND_PROCESSING_SECONDS),
 * nothing left reserved. Returns what was still unsettled at the deadline, or null.
 */
export async function waitUntilSettled(pool: Pool, load: Load, projectorHealthUrl: string, timeoutMs: number): Promise<string | null> {
  const accounts = load.merchants.map((m) => m.accountId);
  const deadline = Date.now() + timeoutMs;
  let unsettled = 'nothing read yet';
  while (Date.now() < deadline) {
    unsettled = '';
    try {
      const response = await request(projectorHealthUrl, { reset: true });
      const body = (await response.body.json()) as { projections?: ProjectionReport[] };
      const behind = (body.projections ?? []).filter((p) => p.state !== 'live' || (p.lag ?? 0) > 0);
      if (response.statusCode !== 200 || !body.projections || behind.length > 0)
        unsettled += `projections behind: ${behind.map((p) => `${p.projection} ${p.state} lag ${p.lag}`).join(', ')}; `;
    } catch (error) {
      unsettled += `projector health: ${(error as Error).message}; `;
    }
    const open = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM refunds WHERE account_id = ANY($1::uuid[]) AND status IN ('requested', 'pending')`,
      [accounts],
    );
    if (open.rows[0]!.n > 0) unsettled += `${open.rows[0]!.n} refund(s) not completed; `;
    for (const merchant of load.merchants) {
      const balance = await load.operatorCall('GET', `/admin/v1/accounts/${merchant.accountId}/balance?mode=live`);
      if (toKopecks(balance.reserved) !== 0) unsettled += `merchant ${merchant.index} has ${balance.reserved} reserved; `;
    }
    if (unsettled === '') return null;
    await sleep(250);
  }
  return unsettled;
}

/** Finds every acknowledged invoice, payment, refund and payout exactly once, and checks the balances. */
export async function verify(pool: Pool, load: Load): Promise<Findings> {
  const lost = new Map<OperationKind, number>();
  const doubled = new Map<OperationKind, number>();
  const problems: string[] = [];
  const count = (map: Map<OperationKind, number>, kind: OperationKind, problem: string) => {
    map.set(kind, (map.get(kind) ?? 0) + 1);
    if (problems.length < 20) problems.push(problem);
  };
  const projects = load.merchants.map((m) => m.projectId);
  const accounts = load.merchants.map((m) => m.accountId);
  const acknowledged = load.invoices.filter((r) => r.invoiceId !== null);
  const invoiceIds = acknowledged.map((r) => r.invoiceId!);

  // The log: how many times each thing was decided.
  const created = await pool.query<{ order_id: string; n: number }>(
    `SELECT data->>'orderId' AS order_id, count(*)::int AS n FROM events
     WHERE event_type = 'InvoiceCreated' AND data->>'projectId' = ANY($1::text[]) GROUP BY 1`,
    [projects],
  );
  const createdByOrder = new Map(created.rows.map((r) => [r.order_id, r.n]));
  const paid = await pool.query<{ invoice_id: string; n: number }>(
    `SELECT data->>'invoiceId' AS invoice_id, count(*)::int AS n FROM events
     WHERE event_type = 'InvoicePaid' AND data->>'invoiceId' = ANY($1::text[]) GROUP BY 1`,
    [invoiceIds],
  );
  const paidByInvoice = new Map(paid.rows.map((r) => [r.invoice_id, r.n]));
  const refundRequests = await pool.query<{ invoice_id: string; refund_id: string; amount: string }>(
    `SELECT data->>'invoiceId' AS invoice_id, data->>'refundId' AS refund_id, data->>'amount' AS amount FROM events
     WHERE event_type = 'InvoiceRefundRequested' AND data->>'accountId' = ANY($1::text[])`,
    [accounts],
  );
  const payoutRequests = await pool.query<{ order_id: string | null; payout_id: string }>(
    `SELECT DISTINCT data->>'orderId' AS order_id, data->>'payoutId' AS payout_id FROM events
     WHERE event_type = 'PayoutRequested' AND data->>'accountId' = ANY($1::text[])`,
    [accounts],
  );
  // The read models: what the merchant's GETs show.
  const invoices = await pool.query<{
    id: string;
    status: string;
    item: { refundedAmount: number };
  }>(`SELECT id::text, status, item FROM invoices WHERE project_id = ANY($1::uuid[])`, [projects]);
  const invoiceRows = new Map(invoices.rows.map((r) => [r.id, r]));
  const refunds = await pool.query<{ id: string; invoice_id: string; amount: string; status: string }>(
    `SELECT id, invoice_id::text, amount::text, status FROM refunds WHERE account_id = ANY($1::uuid[])`,
    [accounts],
  );
  const refundRows = new Map(refunds.rows.map((r) => [r.id, r]));
  const payouts = await pool.query<{ id: string; order_id: string | null; status: string }>(
    `SELECT id::text, order_id, status FROM payouts WHERE account_id = ANY($1::uuid[])`,
    [accounts],
  );
  const payoutRows = new Map(payouts.rows.map((r) => [r.id, r]));

  const askedOrders = new Set(load.invoices.map((r) => r.orderId));
  for (const [orderId, n] of createdByOrder) {
    if (n > 1) count(doubled, 'create invoice', `orderId ${orderId}: ${n} invoices created`);
    else if (!askedOrders.has(orderId)) count(doubled, 'create invoice', `orderId ${orderId}: an invoice nobody asked for`);
  }
  for (const record of acknowledged) {
    const invoiceId = record.invoiceId!;
    if (!createdByOrder.has(record.orderId)) count(lost, 'create invoice', `orderId ${record.orderId}: acknowledged, not in the log`);
    const row = invoiceRows.get(invoiceId);
    if (!row) count(lost, 'create invoice', `invoice ${invoiceId}: acknowledged, not in the read model`);
    if (record.paid) {
      const n = paidByInvoice.get(invoiceId) ?? 0;
      if (n === 0) count(lost, 'operator: pay invoice', `invoice ${invoiceId}: payment acknowledged, not in the log`);
      if (n > 1) count(doubled, 'operator: pay invoice', `invoice ${invoiceId}: paid ${n} times`);
      if (row && !['paid', 'partially_refunded', 'refunded'].includes(row.status)) {
        count(lost, 'operator: pay invoice', `invoice ${invoiceId}: read model status ${row.status}`);
      }
    }
    checkRefunds(record, row, refundRequests.rows, refundRows, (kind, problem) => count(kind === 'lost' ? lost : doubled, 'refund', problem));
  }
  for (const record of acknowledged.filter((r) => r.payout)) {
    const { id, orderId } = record.payout!;
    const requested = payoutRequests.rows.filter((r) => r.order_id === orderId);
    if (requested.length === 0) count(lost, 'payout', `payout ${id} (orderId ${orderId}): acknowledged, not in the log`);
    if (requested.length > 1) count(doubled, 'payout', `orderId ${orderId}: ${requested.length} payouts`);
    const row = payoutRows.get(String(id));
    if (!row) count(lost, 'payout', `payout ${id}: acknowledged, not in the read model`);
    else if (record.payoutPaid && row.status !== 'paid') count(lost, 'operator: approve, process, pay payout', `payout ${id}: ${row.status}, not paid`);
  }
  const payoutOrders = new Set(load.invoices.filter((r) => r.payoutAsked).map((r) => `${r.orderId}-payout`));
  for (const request of payoutRequests.rows) {
    if (!request.order_id || !payoutOrders.has(request.order_id)) count(doubled, 'payout', `payout ${request.payout_id}: nobody asked for it`);
  }

  // Balances: the read model (GET /v1/balance), the ledger rebuilt from the log (operator API), and what the acknowledged operations add up to.
  let balancesOff = 0;
  for (const merchant of load.merchants) {
    const own = load.invoices.filter((r) => r.merchant === merchant.index);
    const expected =
      own.filter((r) => r.paid).reduce((sum, r) => sum + r.netKopecks, 0) -
      own.reduce((sum, r) => sum + (r.refund?.amountKopecks ?? 0) + (r.payout?.amountKopecks ?? 0), 0);
    const rebuilt = await load.operatorCall('GET', `/admin/v1/accounts/${merchant.accountId}/balance?mode=live`);
    const shown = await load.merchantCall(merchant, 'GET', '/v1/balance');
    const views = { expected: { available: expected, pending: 0, reserved: 0 }, rebuilt: kopecksOf(rebuilt), shown: kopecksOf(shown) };
    if (JSON.stringify(views.rebuilt) !== JSON.stringify(views.expected) || JSON.stringify(views.shown) !== JSON.stringify(views.expected)) {
      balancesOff += 1;
      problems.push(`merchant ${merchant.index}: balances (kopecks) ${JSON.stringify(views)}`);
    }
  }
  return { lost, doubled, balancesOff, problems };
}

function checkRefunds(
  record: InvoiceRecord,
  row: { item: { refundedAmount: number } } | undefined,
  requests: readonly { invoice_id: string; refund_id: string; amount: string }[],
  refundRows: Map<string, { status: string; amount: string }>,
  report: (kind: 'lost' | 'doubled', problem: string) => void,
): void {
  const invoiceId = record.invoiceId!;
  const onInvoice = requests.filter((r) => r.invoice_id === invoiceId);
  const asked = record.refund ? [record.refund] : [];
  for (const refund of asked) {
    const n = onInvoice.filter((r) => r.refund_id === refund.id).length;
    if (n === 0) report('lost', `refund ${refund.id}: acknowledged, not in the log`);
    if (n > 1) report('doubled', `refund ${refund.id}: requested ${n} times`);
    const refundRow = refundRows.get(refund.id);
    if (!refundRow) report('lost', `refund ${refund.id}: acknowledged, not in the read model`);
    else if (refundRow.status !== 'succeeded') report('lost', `refund ${refund.id}: ${refundRow.status}, not succeeded`);
  }
  const others = onInvoice.filter((r) => !asked.some((a) => a.id === r.refund_id));
  // A refund whose answer never came (a failed operation, counted as such) may exist once.
  for (const other of others.slice(record.refundAsked && !record.refund ? 1 : 0)) {
    report('doubled', `invoice ${invoiceId}: refund ${other.refund_id} nobody acknowledged`);
  }
  const expected = asked.reduce((sum, r) => sum + r.amountKopecks, 0);
  if (row && row.item.refundedAmount !== expected) {
    report(
      row.item.refundedAmount > expected ? 'doubled' : 'lost',
      `invoice ${invoiceId}: refunded ${row.item.refundedAmount}, acknowledged ${expected} (kopecks)`,
    );
  }
}

const kopecksOf = (balance: { available: string; pending: string; reserved?: string }) => ({
  available: toKopecks(balance.available),
  pending: toKopecks(balance.pending),
  reserved: toKopecks(balance.reserved ?? '0.00'),
});
