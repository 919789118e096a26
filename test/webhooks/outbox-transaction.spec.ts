/**
 * The webhook outbox renders before its write transaction (real PostgreSQL, the real
 * projection runner): every registry lookup and stream read of the rendering happens
 * while the runner has no transaction open. Before, `apply` rendered event after
 * event inside the batch's transaction, which from its first insert on held a
 * transaction id: every event appended meanwhile anywhere stayed invisible to every
 * subscriber of the cluster until the whole batch had been rendered.
 */
import { randomBytes } from 'node:crypto';
import { fixedKeys, SecretBox } from '#platform/secrets';
import type { Pool } from 'pg';
import { SystemClock } from '#platform/clock';
import { createPool } from '#platform/database';
import { comparePositions, PostgresEventStore } from '#event-store';
import { CreateInvoice, CreateInvoiceHandler } from '../../apps/api/src/invoices/create-invoice/create-invoice.handler';
import { RecordPaymentResult, RecordPaymentResultHandler } from '../../apps/api/src/invoices/record-payment-result/record-payment-result.handler';
import { ProjectionRunner } from '#event-store/projections';
import { Project, Registry } from '#payments/merchants';
import { webhookOutbox } from '#payments/webhooks';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { invoiceRequest } from '../support/invoice-request';

const RUNNER_APPLICATION = 'outbox-transaction-test';

/** One key for every registry of the test: the watching one must open the secrets the set-up sealed. */
const SECRETS = new SecretBox(fixedKeys([randomBytes(32)]));

/** Before each project lookup of the rendering: what the runner's sessions are doing. */
class WatchingRegistry extends Registry {
  readonly seen: { inTransaction: number; holdingTransactionId: number }[] = [];
  constructor(
    pool: Pool,
    private readonly observer: Pool,
  ) {
    super(pool, SECRETS);
  }
  override async project(id: string): Promise<Project | null> {
    const r = await this.observer.query<{ in_transaction: number; holding: number }>(
      `SELECT count(*) FILTER (WHERE state LIKE 'idle in transaction%' OR xact_start IS NOT NULL AND state <> 'active')::int AS in_transaction,
              count(*) FILTER (WHERE backend_xid IS NOT NULL)::int AS holding
       FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
      [RUNNER_APPLICATION],
    );
    this.seen.push({ inTransaction: r.rows[0]!.in_transaction, holdingTransactionId: r.rows[0]!.holding });
    return super.project(id);
  }
}

let db: TestDatabase;
let runnerPool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  runnerPool = createPool(db.url, { max: 4, applicationName: RUNNER_APPLICATION });
});
afterAll(async () => {
  await runnerPool.end();
  await db.drop();
});

it('renders every webhook of a batch with no transaction of the runner open, then enqueues them in one', async () => {
  const clock = new SystemClock();
  const setupStore = new PostgresEventStore(db.pool);
  const registry = new Registry(db.pool, SECRETS);
  const project = await webhookProject(registry, clock.now(), 'http://127.0.0.1:9/hooks');
  const create = new CreateInvoiceHandler(setupStore);
  const pay = new RecordPaymentResultHandler(setupStore, registry, clock);
  const paid: string[] = [];
  for (let i = 0; i < 4; i++) {
    const { invoice } = await create.execute(new CreateInvoice(project, 'test', invoiceRequest({ amount: 100_00 + i, orderId: `order-${i}` }), clock.now()));
    const invoiceId = invoice.created.invoiceId;
    await pay.execute(new RecordPaymentResult(invoiceId, 'paid', null, clock.now()));
    paid.push(invoiceId);
  }
  // The last event appended, visible or not yet; then wait until subscribers can see it
  // (another transaction of the shared cluster may hold it back a moment), so that the
  // runner finds all four payments in its first batch.
  const last = (
    await db.pool.query<{ commit: string; prepare: string }>(
      'SELECT transaction_id::text AS commit, global_position AS prepare FROM events ORDER BY transaction_id DESC, global_position DESC LIMIT 1',
    )
  ).rows[0]!;
  const head = { commit: BigInt(last.commit), prepare: BigInt(last.prepare) };
  for (const deadline = Date.now() + 30_000; ;) {
    const visible = await setupStore.headPosition();
    if (visible && comparePositions(visible, head) >= 0) break;
    if (Date.now() > deadline) throw new Error('the appended events did not become visible');
    await new Promise((r) => setTimeout(r, 20));
  }
  await setupStore.close();

  const store = new PostgresEventStore(runnerPool, { pollIntervalMs: 10 });
  const watching = new WatchingRegistry(runnerPool, db.pool);
  const runner = new ProjectionRunner(
    runnerPool,
    store,
    webhookOutbox(store, watching, clock, () => 'http://127.0.0.1:3000'),
  );
  runner.start();
  try {
    const deadline = Date.now() + 30_000;
    while (!(runner.status().checkpoint && comparePositions(runner.status().checkpoint!, head) >= 0)) {
      if (Date.now() > deadline)
        throw new Error(`the outbox did not reach the head: ${JSON.stringify(runner.status(), (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await runner.stop();
    await store.close();
  }

  // All four paid invoices were in one batch, each rendered with a project lookup.
  expect(watching.seen).toHaveLength(4);
  expect(watching.seen).toEqual(Array.from({ length: 4 }, () => ({ inTransaction: 0, holdingTransactionId: 0 })));
  const queued = await db.pool.query<{ body: string; status: string }>('SELECT body, status FROM webhook_deliveries ORDER BY seq');
  expect(queued.rows.map((r) => JSON.parse(r.body).data.invoice.id)).toEqual(paid);
  expect(queued.rows.every((r) => r.status === 'pending')).toBe(true);
});
