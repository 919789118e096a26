/**
 * Recovery does not stop at one bad item. The all-in-one gateway runs on a database
 * where one refund request cannot be recovered (its read-model row names an invoice
 * that does not exist: advancing it throws a plain Error, not a PaymentsError) and
 * one pending refund cannot be completed (no refund stream behind its row), both
 * older than everything else, so they come first in every selection. Half-done
 * refund requests of the merchant are still recovered, funded and completed; the
 * bad items are logged with their ids and counted in worker_item_failures_total.
 */
import { randomUUID } from 'node:crypto';
import { handleCommand, PostgresEventStore } from '#event-store';
import { invoiceDecider, invoiceStreamName } from '#domain';
import { newRefundId } from '#payments/refunds';
import { RunningGateway, startGateway } from '../support/gateway-process';
import { Operator, poll } from '../support/merchant-fixtures';
import { instantMerchant, paidInvoice, waitForBalance } from '../support/money-out-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-worker-item-tests-01';
const POISONED_REQUEST = `rf_${'p'.repeat(24)}`;
const POISONED_PENDING = `rf_${'q'.repeat(24)}`;

jest.setTimeout(120_000);

describe('periodic workers: each item fails alone', () => {
  let db: TestDatabase;
  let gateway: RunningGateway | null = null;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 4 });
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await gateway?.kill('SIGKILL');
    await store.close();
    await db.drop();
  });

  it('BUG: a refund request that throws a non-payments error does not stop recovery of the others, nor a bad pending refund their completion', async () => {
    // REFUND_PROCESSING_SECONDS=1: the refunds complete within the test's wait, on the system clock.
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN, REFUND_PROCESSING_SECONDS: '1' });
    const operator = new Operator(gateway.baseUrl, gateway.adminToken);
    const merchant = await instantMerchant(operator);
    const invoices = [await paidInvoice(operator, merchant.live, '3000.00'), await paidInvoice(operator, merchant.live, '2000.00')];
    await waitForBalance(merchant.live, {}, 15_000);
    await poll(
      async () => (await db.pool.query("SELECT count(*)::int AS n FROM ledger_entries WHERE kind = 'payment_recorded'")).rows[0]!.n as number,
      (n) => n === 2,
      'both payments in the ledger',
    );

    // The bad items, oldest of all: first in every selection, oldest first.
    const dayAgo = new Date(Date.now() - 86_400_000);
    await db.pool.query(
      `INSERT INTO refunds (id, invoice_id, project_id, account_id, mode, amount, status, requested_at, process_at)
       VALUES ($1, $3, $4, $5, 'live', 10000, 'requested', $6, NULL), ($2, $3, $4, $5, 'live', 10000, 'pending', $6, $6)`,
      [POISONED_REQUEST, POISONED_PENDING, randomUUID(), merchant.projectId, merchant.accountId, dayAgo],
    );

    // Three refund requests left half-done (step 1 only: the API "died" before reserving).
    const requested: string[] = [];
    for (const [i, invoiceId] of [invoices[0]!, invoices[0]!, invoices[1]!].entries()) {
      const refundId = newRefundId();
      const granted = await handleCommand(store, invoiceStreamName(invoiceId), invoiceDecider, {
        type: 'RequestRefund',
        refundId,
        amount: 10_000 * (i + 1),
        at: new Date().toISOString(),
      });
      expect(granted.ok).toBe(true);
      requested.push(refundId);
    }

    // Recovered (funded, pending) and then completed by the refund processor.
    const statuses = await poll(
      async () => (await db.pool.query<{ id: string; status: string }>('SELECT id, status FROM refunds ORDER BY id')).rows,
      (rows) => requested.every((id) => rows.find((r) => r.id === id)?.status === 'succeeded'),
      'the half-done refunds to be recovered and completed',
      60_000,
    );
    expect(statuses.find((r) => r.id === POISONED_REQUEST)?.status).toBe('requested');
    expect(statuses.find((r) => r.id === POISONED_PENDING)?.status).toBe('pending');

    // Each bad item is logged with its id and counted; it is retried, not dropped.
    const logLines = gateway
      .output()
      .split('\n')
      .filter((line) => line.includes('worker item failed'))
      .map((line) => JSON.parse(line) as { worker: string; item: string; failures: number; retryAt: string });
    expect(logLines).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ worker: 'flow-recovery', item: `refund ${POISONED_REQUEST}`, failures: 1 }),
        expect.objectContaining({ worker: 'refund-processor', item: POISONED_PENDING, failures: 1 }),
      ]),
    );
    const metrics = await fetch(`${gateway.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const text = await metrics.text();
    const failures = (worker: string) => Number(new RegExp(`^worker_item_failures_total\\{worker="${worker}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
    expect(failures('flow-recovery')).toBeGreaterThanOrEqual(1);
    expect(failures('refund-processor')).toBeGreaterThanOrEqual(1);
    expect(failures('hold-release')).toBe(0);
    expect(failures('invoice-expiry')).toBe(0);
  });
});
