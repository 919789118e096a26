import { randomUUID } from 'node:crypto';
import { Answer, Json, SpecClient, sleep } from './spec-client';

/** The amounts of one cycle, in rubles: the refund and the payout are paid for by the funding invoice. */
export const CYCLE = { invoice: '1000.00', refund: '100.00', payout: '150.00' } as const;
/** Each merchant's first invoice: enough available for every refund and payout before the projector posts the cycles' payments. */
export const FUNDING = '100000.00';
const PAYOUT_PHONE = '+79161234567';

export const toKopecks = (money: string): number => {
  const [whole, fraction = '00'] = money.split('.');
  return Number(whole) * 100 + Number(fraction.padEnd(2, '0'));
};

export interface LoadMerchant {
  readonly index: number;
  readonly accountId: string;
  readonly projectId: string;
  readonly liveKey: string;
  readonly addressId: number;
}

/** What the gateway acknowledged for one invoice and what followed it. */
export interface InvoiceRecord {
  readonly merchant: number;
  readonly orderId: string;
  invoiceId: string | null;
  netKopecks: number;
  paid: boolean;
  /** A refund and a payout were asked for (acknowledged or not). */
  refundAsked: boolean;
  payoutAsked: boolean;
  refund: { readonly id: string; readonly key: string; readonly amountKopecks: number } | null;
  payout: { readonly id: number; readonly orderId: string; readonly amountKopecks: number } | null;
  payoutPaid: boolean;
}

export const OPERATION_KINDS = ['create invoice', 'refund', 'payout', 'operator: pay invoice', 'operator: approve, process, pay payout'] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

export class Tally {
  attempted = 0;
  acknowledged = 0;
  readonly failures: string[] = [];
}

/**
 * The merchants of the check and their streams of operations: each creates a live
 * invoice (with an orderId), the operator pays it, the merchant refunds part of it
 * (Idempotency-Key) and requests a payout (orderId, live key), and the operator
 * approves, processes and pays the payout. Every acknowledged operation is
 * recorded, to be found again (exactly once) after the run.
 */
export class Load {
  readonly merchants: LoadMerchant[] = [];
  readonly invoices: InvoiceRecord[] = [];
  readonly tallies = new Map<OperationKind, Tally>(OPERATION_KINDS.map((k) => [k, new Tally()]));
  private stopping = false;
  private workers: Promise<void>[] = [];
  private readonly run = randomUUID().slice(0, 8);

  constructor(
    private readonly client: SpecClient,
    private readonly adminToken: string,
  ) {}

  /** Accounts, live projects without hold, confirmed payout details, and a paid funding invoice each. */
  async setUp(count: number): Promise<void> {
    for (let index = 0; index < count; index++) {
      const account = await this.operatorCall('POST', '/admin/v1/accounts', {
        name: `Магазин ${index + 1}`,
        email: `deploy-check-${this.run}-${index}@example.com`,
      });
      const project = await this.operatorCall('POST', '/admin/v1/projects', { accountId: account.id, name: `Магазин ${index + 1}`, holdHours: 0 });
      const address = await this.operatorCall('POST', `/admin/v1/accounts/${account.id}/payout-addresses`, {
        method: 'sbp',
        account: PAYOUT_PHONE,
        bank: 'Сбербанк',
      });
      await this.operatorCall('POST', `/admin/v1/payout-addresses/${address.id}/confirm`);
      const merchant: LoadMerchant = { index, accountId: account.id, projectId: project.id, liveKey: project.keys.live.secretKey, addressId: address.id };
      this.merchants.push(merchant);
      const funding = this.record(merchant, `deploy-check-${this.run}-${index}-funding`);
      const created = await this.merchantCall(merchant, 'POST', '/v1/invoices', { amount: FUNDING, orderId: funding.orderId, method: 'sbp' });
      funding.invoiceId = created.id;
      funding.netKopecks = toKopecks(created.netAmount);
      await this.operatorCall('POST', `/admin/v1/invoices/${created.id}/payment`, { outcome: 'paid' });
      funding.paid = true;
    }
    // The projector posts the payments to the ledgers: wait until every funding is available.
    for (const merchant of this.merchants) {
      const funded = this.invoices.find((r) => r.merchant === merchant.index)!.netKopecks;
      const deadline = Date.now() + 30_000;
      for (;;) {
        const balance = await this.operatorCall('GET', `/admin/v1/accounts/${merchant.accountId}/balance?mode=live`);
        if (toKopecks(balance.available) >= funded) break;
        if (Date.now() > deadline) throw new Error(`merchant ${merchant.index}: the funding never became available (${JSON.stringify(balance)})`);
        await sleep(100);
      }
    }
  }

  /** Every merchant runs cycles, one at a time, at most `cyclesPerSecond` each, until stop(). */
  start(cyclesPerSecond: number): void {
    const intervalMs = 1000 / cyclesPerSecond;
    this.workers = this.merchants.map(async (merchant, m) => {
      // Spread the merchants over the interval.
      await sleep((intervalMs * m) / this.merchants.length);
      for (let cycle = 0; !this.stopping; cycle++) {
        const started = performance.now();
        await this.cycle(merchant, cycle);
        const left = intervalMs - (performance.now() - started);
        if (left > 0 && !this.stopping) await sleep(left);
      }
    });
  }

  /** Lets every cycle in progress finish, then returns. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.workers);
  }

  private record(merchant: LoadMerchant, orderId: string): InvoiceRecord {
    const record: InvoiceRecord = {
      merchant: merchant.index,
      orderId,
      invoiceId: null,
      netKopecks: 0,
      paid: false,
      refundAsked: false,
      payoutAsked: false,
      refund: null,
      payout: null,
      payoutPaid: false,
    };
    this.invoices.push(record);
    return record;
  }

  private async cycle(merchant: LoadMerchant, cycle: number): Promise<void> {
    const record = this.record(merchant, `deploy-check-${this.run}-${merchant.index}-${cycle}`);
    const created = await this.operation('create invoice', () =>
      this.client.send('POST', '/v1/invoices', { token: merchant.liveKey, body: { amount: CYCLE.invoice, orderId: record.orderId, method: 'sbp' } }),
    );
    if (!created) return;
    record.invoiceId = created.body.id;
    record.netKopecks = toKopecks(created.body.netAmount);

    const paid = await this.operation(
      'operator: pay invoice',
      () => this.client.send('POST', `/admin/v1/invoices/${record.invoiceId}/payment`, { token: this.adminToken, body: { outcome: 'paid' } }),
      // A retry after a lost answer finds the invoice paid already (409): the stream says whether it was.
      () => this.streamHas(`invoice-${record.invoiceId}`, ['InvoicePaid']),
    );
    if (!paid) return;
    record.paid = true;

    const key = `${record.orderId}-refund`;
    record.refundAsked = true;
    const refund = await this.operation('refund', () =>
      this.client.send('POST', `/v1/invoices/${record.invoiceId}/refund`, {
        token: merchant.liveKey,
        body: { amount: CYCLE.refund },
        headers: { 'idempotency-key': key },
      }),
    );
    if (!refund) return;
    record.refund = { id: refund.body.id, key, amountKopecks: toKopecks(refund.body.amount) };

    const payoutOrderId = `${record.orderId}-payout`;
    record.payoutAsked = true;
    const payout = await this.operation('payout', () =>
      this.client.send('POST', '/v1/payouts', {
        token: merchant.liveKey,
        body: { amount: CYCLE.payout, addressId: merchant.addressId, orderId: payoutOrderId },
      }),
    );
    if (!payout) return;
    record.payout = { id: payout.body.id, orderId: payoutOrderId, amountKopecks: toKopecks(payout.body.amount) };

    const reached: Record<string, string[]> = {
      approve: ['PayoutApproved', 'PayoutProcessingStarted', 'PayoutPaid'],
      process: ['PayoutProcessingStarted', 'PayoutPaid'],
      pay: ['PayoutPaid'],
    };
    const settled = await this.operation('operator: approve, process, pay payout', async () => {
      let last: Answer | null = null;
      for (const transition of ['approve', 'process', 'pay']) {
        last = await this.client.send('POST', `/admin/v1/payouts/${record.payout!.id}/${transition}`, { token: this.adminToken });
        if (last.status === 409 && last.ambiguous && (await this.streamHas(`payout-${record.payout!.id}`, reached[transition]!))) continue;
        if (last.reason !== null) return last;
      }
      return { ...last!, status: 200, reason: null };
    });
    record.payoutPaid = settled !== null;
  }

  /**
   * One operation with its retries: its 2xx body, or null when it failed (the reason
   * is kept). `alreadyDone` settles a 409 that follows an attempt whose answer was lost.
   */
  private async operation(kind: OperationKind, send: () => Promise<Answer>, alreadyDone?: () => Promise<boolean>): Promise<{ body: Json } | null> {
    const tally = this.tallies.get(kind)!;
    tally.attempted += 1;
    const answer = await send();
    if (answer.reason === null) {
      tally.acknowledged += 1;
      return { body: answer.body };
    }
    if (answer.status === 409 && answer.ambiguous && alreadyDone && (await alreadyDone())) {
      tally.acknowledged += 1;
      return { body: answer.body };
    }
    tally.failures.push(`${kind}: ${answer.reason}`);
    return null;
  }

  private async streamHas(stream: string, types: readonly string[]): Promise<boolean> {
    const answer = await this.client.send('GET', `/admin/v1/streams/${stream}`, { token: this.adminToken });
    return answer.reason === null && (answer.body.events as Json[]).some((e: Json) => types.includes(e.type));
  }

  /** A set-up call that must succeed. */
  async operatorCall(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Json> {
    const answer = await this.client.send(method, path, { token: this.adminToken, body });
    if (answer.reason !== null) throw new Error(`${method} ${path}: ${answer.reason} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }

  async merchantCall(merchant: LoadMerchant, method: 'GET' | 'POST', path: string, body?: unknown): Promise<Json> {
    const answer = await this.client.send(method, path, { token: merchant.liveKey, body });
    if (answer.reason !== null) throw new Error(`${method} ${path}: ${answer.reason} ${JSON.stringify(answer.body)}`);
    return answer.body;
  }
}
