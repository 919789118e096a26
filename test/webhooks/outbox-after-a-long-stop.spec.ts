/**
 * The webhook outbox after a stop longer than WEBHOOK_RETENTION_DAYS (real PostgreSQL,
 * the real projection runner): the events it never reached are enqueued when it comes
 * back, however old, so a webhook is late but not lost. Before, it skipped every event
 * older than the period, without a trace. A seed:load while the outbox is behind leaves
 * it all that it never reached.
 * An event it did reach, whose delivery the sweeper may have deleted, is still not
 * enqueued again when its checkpoint is moved back (retention.spec.ts on a gateway).
 */
import type { Pool } from 'pg';
import { randomBytes, randomUUID } from 'node:crypto';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { Clock, SystemClock } from '#platform/clock';
import { PostgresEventStore } from '#event-store';
import { CreateInvoice, CreateInvoiceHandler } from '../../apps/api/src/invoices/create-invoice/create-invoice.handler';
import { RecordPaymentResult, RecordPaymentResultHandler } from '../../apps/api/src/invoices/record-payment-result/record-payment-result.handler';
import { Registry } from '#payments/merchants';
import {
  DEFAULT_WEBHOOK_RETENTION_DAYS,
  retentionHorizon,
  WEBHOOK_OUTBOX,
  WEBHOOK_OUTBOX_FILTER,
  webhookOutbox,
  webhookOutboxReachFromCheckpointMigration,
} from '#payments/webhooks';
import { sweepMerchantEvents } from '#payments/events';
import { allMigrations, loadConfig } from '#payments/composition';
import { migrate } from '#platform/database';
import { hasEventsLeft, seedLoad } from '../../apps/tools/src/seed/seed-load';
import { InMemoryEventStore } from '../support/in-memory-event-store';
import { projectToHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { webhookProject } from '../support/webhook-project';
import { invoiceRequest } from '../support/invoice-request';

jest.setTimeout(300_000);

const SECRETS = new SecretBox(fixedKeys([randomBytes(32)]));
const DAY = 86_400_000;

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await db.drop();
});

/** Runs the outbox, on a clock `daysLater` ahead of the events, until it has passed the log's visible head; then stops it. */
async function runOutboxToTheHead(pool: Pool, registry: Registry, daysLater: number): Promise<void> {
  const store = new PostgresEventStore(pool, { pollIntervalMs: 10 });
  const later: Clock = { now: () => new Date(Date.now() + daysLater * DAY) };
  try {
    await projectToHead(
      pool,
      store,
      webhookOutbox(store, registry, later, () => 'http://127.0.0.1:3000'),
    );
  } finally {
    await store.close();
  }
}

/** A paid invoice of a project with a webhook URL: its invoice.paid event, which the outbox has not reached. */
async function paidInvoiceOfAHookedProject(registry: Registry): Promise<{ invoiceId: string; projectId: string }> {
  const clock = new SystemClock();
  const store = new PostgresEventStore(db.pool);
  const project = await webhookProject(registry, clock.now(), 'http://127.0.0.1:9/hooks');
  const { invoice } = await new CreateInvoiceHandler(store).execute(
    new CreateInvoice(project, 'test', invoiceRequest({ amount: 100_00, orderId: 'long-stop' }), clock.now()),
  );
  const invoiceId = invoice.created.invoiceId;
  await new RecordPaymentResultHandler(store, registry, clock).execute(new RecordPaymentResult(invoiceId, 'paid', null, clock.now()));
  await store.close();
  return { invoiceId, projectId: project.id };
}

it('enqueues the events it never reached after a stop longer than the retention period, and not again after a rewind', async () => {
  const registry = new Registry(db.pool, SECRETS);
  const { invoiceId, projectId } = await paidInvoiceOfAHookedProject(registry);

  // The outbox comes back a day after the period: the payment is older than it, and was never reached.
  const daysLater = DEFAULT_WEBHOOK_RETENTION_DAYS + 1;
  await runOutboxToTheHead(db.pool, registry, daysLater);
  const enqueued = await db.pool.query<{ body: string; status: string }>('SELECT body, status FROM webhook_deliveries');
  expect(enqueued.rows.map((r) => ({ invoice: JSON.parse(r.body).data.invoice.id, type: JSON.parse(r.body).type, status: r.status }))).toEqual([
    { invoice: invoiceId, type: 'invoice.paid', status: 'pending' },
  ]);
  // Its GET /v1/events record is kept as long as the delivery: the retention sweep goes by when it was recorded.
  await sweepMerchantEvents(db.pool, retentionHorizon(new Date(Date.now() + daysLater * DAY), DEFAULT_WEBHOOK_RETENTION_DAYS));
  const recorded = await db.pool.query('SELECT type FROM merchant_events WHERE project_id = $1', [projectId]);
  expect(recorded.rows).toEqual([{ type: 'invoice.paid' }]);

  // Its delivery finished and was swept; the checkpoint is moved back by hand: the event is not enqueued again.
  await db.pool.query('DELETE FROM webhook_queue');
  await db.pool.query('DELETE FROM webhook_deliveries');
  await db.pool.query(`UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0 WHERE projection = 'webhook_outbox'`);
  await runOutboxToTheHead(db.pool, registry, daysLater);
  expect((await db.pool.query('SELECT 1 FROM webhook_deliveries')).rows).toEqual([]);
});

it('a seed:load while the outbox is behind leaves what it never reached to it', async () => {
  const registry = new Registry(db.pool, SECRETS);
  const { invoiceId } = await paidInvoiceOfAHookedProject(registry);
  // The load writes after the payment, which the outbox has not reached: it is left behind, to catch up.
  const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  const loaded = await seedLoad({ pool: db.pool, store, terms: loadConfig({}), secrets: SECRETS }, { events: 300, seed: 'outbox behind', days: 2 });
  await store.close();
  expect(loaded.followers.toCatchUp).toContain('webhook_outbox');

  await runOutboxToTheHead(db.pool, registry, DEFAULT_WEBHOOK_RETENTION_DAYS + 1);
  const enqueued = await db.pool.query<{ body: string }>('SELECT body FROM webhook_deliveries');
  expect(enqueued.rows.map((r) => JSON.parse(r.body).data.invoice.id)).toEqual([invoiceId]);
});

it('a seed:load after events the outbox does not take (its checkpoint a little behind them) leaves it at the head', async () => {
  // An invoice created, not paid: no webhook event; the outbox's checkpoint is still at the start, behind it.
  const store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  const project = await webhookProject(new Registry(db.pool, SECRETS), new Date(), 'http://127.0.0.1:9/hooks');
  await new CreateInvoiceHandler(store).execute(new CreateInvoice(project, 'test', invoiceRequest({ amount: 100_00, orderId: 'unpaid' }), new Date()));
  const loaded = await seedLoad({ pool: db.pool, store, terms: loadConfig({}), secrets: SECRETS }, { events: 300, seed: 'outbox idle', days: 2 });
  await store.close();
  expect(loaded.followers.atHead).toContain('webhook_outbox');
  expect((await db.pool.query('SELECT 1 FROM webhook_outbox_reach')).rows).toHaveLength(1);
});

it('on another event store, a follower is behind by the events it takes in the log there, not by the empty events table', async () => {
  const elsewhere = new InMemoryEventStore({ eventIds: 'unique_in_store' });
  const behind = async () => hasEventsLeft(db.pool, elsewhere, { name: WEBHOOK_OUTBOX, filter: WEBHOOK_OUTBOX_FILTER });
  expect(await behind()).toBe(false);
  await elsewhere.appendToStream('invoice-x', [{ id: randomUUID(), type: 'InvoiceCreated', data: {} }]);
  expect(await behind()).toBe(false);
  await elsewhere.appendToStream('invoice-x', [{ id: randomUUID(), type: 'InvoicePaid', data: {} }]);
  expect(await behind()).toBe(true);
});

it('on a database the outbox already followed, a migration starts its reach at its checkpoint, never back', async () => {
  const reachAfterMigrating = async (reachBefore: [number, number] | null): Promise<unknown> => {
    const older = await createTestDatabase({ migrate: false });
    try {
      await migrate(older.pool, allMigrations.slice(0, allMigrations.indexOf(webhookOutboxReachFromCheckpointMigration)));
      await older.pool.query(`INSERT INTO projection_checkpoints (projection, commit_position, prepare_position) VALUES ('webhook_outbox', 4242, 17)`);
      if (reachBefore) await older.pool.query('INSERT INTO webhook_outbox_reach (commit_position, prepare_position) VALUES ($1, $2)', reachBefore);
      await migrate(older.pool, allMigrations);
      return (await older.pool.query('SELECT commit_position::text AS commit, prepare_position::text AS prepare FROM webhook_outbox_reach')).rows;
    } finally {
      await older.drop();
    }
  };
  expect(await reachAfterMigrating(null)).toEqual([{ commit: '4242', prepare: '17' }]);
  expect(await reachAfterMigrating([4000, 900])).toEqual([{ commit: '4242', prepare: '17' }]);
  // A checkpoint moved back by hand before the upgrade: the reach the outbox had stays.
  expect(await reachAfterMigrating([9000, 1])).toEqual([{ commit: '9000', prepare: '1' }]);
});
