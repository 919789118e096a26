/**
 * Helpers for the money going out (refunds and payouts): a merchant with a funded
 * balance, confirmed payout details, and waits for the balance read model.
 */
import { Client, expectStatus, InvoiceGateway, Json, Merchant, Mode, Operator, orderId, poll, Reply, startInvoiceGateway } from './merchant-fixtures';

/** The recovery worker takes over a request left half-done for this long (RECOVERY_GRACE_SECONDS), on the gateway clock. */
export const RECOVERY_GRACE_SECONDS = 5;

/**
 * A gateway on the manual clock whose refunds stay pending while a test moves the clock for the recovery worker;
 * POLL_INTERVAL_SECONDS=0: the tests read a refund's invoice or a payout again at once to see what the worker did.
 */
export const startRecoveryGateway = (): Promise<InvoiceGateway> =>
  startInvoiceGateway({ CLOCK: 'manual', REFUND_PROCESSING_SECONDS: '3600', POLL_INTERVAL_SECONDS: '0' });

/** A merchant's ledger stream in a mode. */
export const ledgerStream = (m: Merchant, mode: Mode): string => `ledger-${mode}_${m.accountId}`;

/** A stream's events (type and data), oldest first, read from the gateway's database. */
export const streamEvents = async (gw: InvoiceGateway, stream: string): Promise<Json[]> =>
  (await gw.db.pool.query('SELECT event_type AS type, data FROM events WHERE stream_name = $1 ORDER BY stream_revision', [stream])).rows;

/** The kinds of the entries of an account's live ledger, in its order, from the log itself (no read model). */
export const liveLedgerKinds = async (gw: InvoiceGateway, accountId: string): Promise<string[]> =>
  (
    await gw.db.pool.query<{ kind: string }>(`SELECT data->>'kind' AS kind FROM events WHERE stream_name = $1 ORDER BY stream_revision`, [
      `ledger-live_${accountId}`,
    ])
  ).rows.map((r) => r.kind);

/** Valid payout details, one per method. */
export const PHONE = '+79161234567';
export const TRC20 = 'TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE';
export const BEP20 = '0x52908400098527886E0F7030069857D2E4169EE7';

export interface Balance {
  readonly available: string;
  readonly pending: string;
  readonly reserved: string;
}

/** A merchant whose projects release payments at once (holdHours 0), so paid money is available. */
export async function instantMerchant(operator: Operator, accountId?: string): Promise<Merchant> {
  return operator.merchant({ holdHours: 0 }, accountId);
}

/** Creates an invoice of `amount` rubles (SBP, merchant pays the fee) and pays it: its id. */
export async function paidInvoice(operator: Operator, client: Client, amount: string): Promise<string> {
  const created = await client.post('/v1/invoices', { amount, orderId: orderId('paid'), method: 'sbp' });
  expectStatus(created, 201);
  const paid = await operator.payment(created.body.id, 'paid');
  expectStatus(paid, 200);
  return created.body.id as string;
}

export async function balanceOf(client: Client): Promise<Balance> {
  const r = await client.get('/v1/balance');
  expectStatus(r, 200);
  return r.body as Balance;
}

/** Waits until GET /balance says `expected` (the ledger read model is fed asynchronously). */
export function waitForBalance(client: Client, expected: Partial<Balance>, timeoutMs = 15_000): Promise<Balance> {
  return poll(
    () => balanceOf(client),
    (b) => Object.entries(expected).every(([k, v]) => b[k as keyof Balance] === v),
    `balance ${JSON.stringify(expected)}`,
    timeoutMs,
  );
}

/** Pays invoices into the mode's ledger until `available` has grown by what they net; returns the new available. */
export async function fund(operator: Operator, merchant: Merchant, mode: Mode, invoiceAmounts: readonly string[]): Promise<Balance> {
  const client = merchant[mode];
  // The ledger itself (rebuilt from the log), not the read model that may still lag it.
  const ledger = await operator.http.get(`/admin/v1/accounts/${merchant.accountId}/balance?mode=${mode}`);
  expectStatus(ledger, 200);
  let expected = toKopecks(ledger.body.available);
  for (const amount of invoiceAmounts) {
    const id = await paidInvoice(operator, client, amount);
    const invoice = await operator.http.get(`/admin/v1/streams/invoice-${id}`);
    expectStatus(invoice, 200);
    const paid = (invoice.body.events as Json[]).find((e) => e.type === 'InvoicePaid');
    expected += paid.data.netAmount as number;
  }
  return waitForBalance(client, { available: fromKopecks(expected) });
}

/** Adds a payout detail to the account through the operator API and (by default) confirms it: its id. */
export async function payoutAddress(
  operator: Operator,
  accountId: string,
  detail: { method: string; account: string; bank?: string; label?: string },
  confirm = true,
): Promise<Json> {
  const added = await operator.http.post(`/admin/v1/accounts/${accountId}/payout-addresses`, detail);
  if (added.status !== 201 && added.status !== 200) throw new Error(`address not added: ${added.status} ${JSON.stringify(added.body)}`);
  if (!confirm) return added.body;
  const confirmed = await operator.http.post(`/admin/v1/payout-addresses/${added.body.id}/confirm`);
  expectStatus(confirmed, 200);
  return confirmed.body;
}

/** An operator transition of a payout: the raw reply. */
export function transition(operator: Operator, payoutId: number, name: string, body?: unknown): Promise<Reply> {
  return operator.http.post(`/admin/v1/payouts/${payoutId}/${name}`, body);
}

export const toKopecks = (money: string): number => {
  const [whole, fraction = '00'] = money.split('.');
  return Number(whole) * 100 + Number(fraction.padEnd(2, '0'));
};
export const fromKopecks = (kopecks: number): string => `${Math.trunc(kopecks / 100)}.${String(kopecks % 100).padStart(2, '0')}`;
