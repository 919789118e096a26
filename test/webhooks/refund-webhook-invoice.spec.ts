/**
 * The invoice in a refund's webhook (real PostgreSQL, the real outbox and runner):
 * `data.invoice` is the invoice as that refund's outcome left it (refundedAmount,
 * status), whichever of the two appends the outbox meets first: the refund's outcome
 * (RefundSucceeded or RefundFailed on the refund's stream) or the invoice's record of
 * it (InvoiceRefunded or InvoiceRefundReleased). The webhook's id is the refund event's
 * id, it is enqueued once, and a replay of the outbox from zero changes nothing.
 */
import { randomBytes } from 'node:crypto';
import { SystemClock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { EventStore, handleCommand, PostgresEventStore, RecordedEvent } from '#event-store';
import { invoiceStreamName, RefundCommand, refundDecider, refundStreamName } from '#domain';
import { findInvoice, invoiceView, newRefundId, refundView, runInvoiceCommand } from '#payments';
import { Registry } from '#payments/merchants';
import { DEFAULT_WEBHOOK_RETENTION_DAYS, renderWebhook, webhookOutbox } from '#payments/webhooks';
import { CreateInvoice, CreateInvoiceHandler } from '../../apps/api/src/invoices/create-invoice/create-invoice.handler';
import { RecordPaymentResult, RecordPaymentResultHandler } from '../../apps/api/src/invoices/record-payment-result/record-payment-result.handler';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { projectToHead } from '../support/project-to-head';
import { webhookProject } from '../support/webhook-project';
import { invoiceRequest } from '../support/invoice-request';

const PUBLIC_URL = 'http://127.0.0.1:3000';
const SECRETS = new SecretBox(fixedKeys([randomBytes(32)]));

let db: TestDatabase;
let store: EventStore;
let registry: Registry;
let project: Awaited<ReturnType<typeof webhookProject>>;
const clock = new SystemClock();

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  registry = new Registry(db.pool, SECRETS);
  project = await webhookProject(registry, clock.now());
});
afterAll(async () => {
  await store?.close();
  await db?.drop();
});

const outbox = () => webhookOutbox(store, registry, clock, () => PUBLIC_URL);
const runOutbox = () => projectToHead(db.pool, store, outbox());

/** A paid test invoice of 1,000.00 (no hold). */
async function paidInvoice(): Promise<string> {
  const { invoice } = await new CreateInvoiceHandler(store).execute(
    new CreateInvoice(project, 'test', invoiceRequest({ amount: 1000_00, orderId: `refund-hook-${randomBytes(6).toString('hex')}` }), clock.now()),
  );
  const invoiceId = invoice.created.invoiceId;
  await new RecordPaymentResultHandler(store, registry, clock).execute(new RecordPaymentResult(invoiceId, 'paid', null, clock.now()));
  return invoiceId;
}

/** A refund of `amount` granted by the invoice (its request recorded there), its stream not written yet. */
async function requestedRefund(
  invoiceId: string,
  amount: number,
): Promise<{ refundId: string; data: Extract<RefundCommand, { type: 'CreateRefund' }>['data'] }> {
  const refundId = newRefundId();
  const at = clock.now().toISOString();
  await runInvoiceCommand(store, invoiceId, { type: 'RequestRefund', refundId, amount, at });
  const data = { refundId, invoiceId, projectId: project.id, accountId: project.accountId, mode: 'test' as const, amount, createdAt: at, processAt: at };
  return { refundId, data };
}

/** Decides on the refund's stream; answers the events appended. */
async function onRefund(refundId: string, command: RefundCommand): Promise<readonly RecordedEvent[]> {
  const result = await handleCommand(store, refundStreamName(refundId), refundDecider, command);
  if (!result.ok) throw result.failure;
  return (await store.readStream(refundStreamName(refundId))).slice(-result.events.length);
}

const resolve = (invoiceId: string, refundId: string, outcome: 'succeeded' | 'failed') =>
  runInvoiceCommand(store, invoiceId, { type: 'ResolveRefund', refundId, outcome, at: clock.now().toISOString() });

/** A refund of `amount` requested, created, completed and recorded on its invoice: its RefundSucceeded. */
async function succeededRefund(invoiceId: string, amount: number): Promise<{ refundId: string; succeeded: RecordedEvent }> {
  const { refundId, data } = await requestedRefund(invoiceId, amount);
  await onRefund(refundId, { type: 'CreateRefund', data });
  const [succeeded] = await onRefund(refundId, { type: 'CompleteRefund', at: clock.now().toISOString() });
  await resolve(invoiceId, refundId, 'succeeded');
  return { refundId, succeeded: succeeded! };
}

async function deliveriesOf(eventId: string): Promise<{ id: string; event_type: string; body: string }[]> {
  return (await db.pool.query('SELECT id, event_type, body FROM webhook_deliveries WHERE event_id = $1', [eventId])).rows;
}

/** The one delivery of the event, with the refund and the invoice as their streams say now (the GET shapes). */
async function expectOneWebhook(eventId: string, kind: string, refundId: string, invoiceId: string) {
  const deliveries = await deliveriesOf(eventId);
  expect(deliveries.map((d) => d.event_type)).toEqual([kind]);
  const body = JSON.parse(deliveries[0]!.body);
  const invoice = (await findInvoice(store, invoiceId))!;
  const refund = refundView(
    (await store.readStream(refundStreamName(refundId))).reduce(
      (s, e) => refundDecider.evolve(s, { type: e.type, data: e.data } as never),
      refundDecider.initialState(),
    ) as never,
  );
  expect(body).toMatchObject({ id: eventId, type: kind, isTest: true });
  expect(body.data).toEqual({ refund, invoice: invoiceView(invoice, PUBLIC_URL) });
  return body.data as { refund: Record<string, unknown>; invoice: Record<string, unknown> };
}

describe("a refund's webhook shows the invoice as the refund's outcome left it", () => {
  it('refund.succeeded, the outbox meeting the outcome before the invoice records it: refundedAmount and partially_refunded', async () => {
    const invoiceId = await paidInvoice();
    const { refundId, data } = await requestedRefund(invoiceId, 300_00);
    await onRefund(refundId, { type: 'CreateRefund', data });
    const [succeeded] = await onRefund(refundId, { type: 'CompleteRefund', at: clock.now().toISOString() });
    expect(succeeded!.type).toBe('RefundSucceeded');
    // The outbox runs while the invoice has not yet recorded the outcome (the inline step or the reactor still to come).
    await runOutbox();
    await resolve(invoiceId, refundId, 'succeeded');
    await runOutbox();

    const hook = await expectOneWebhook(succeeded!.id, 'refund.succeeded', refundId, invoiceId);
    expect(hook.invoice).toMatchObject({ status: 'partially_refunded', refundedAmount: '300.00' });
    expect(hook.refund).toMatchObject({ id: refundId, status: 'succeeded', amount: '300.00' });
  });

  /** A refund's outcome the outbox passes before the invoice records it (nothing to render then); the record comes after. */
  async function outcomeMetBeforeItsRecord(amount: number): Promise<{ invoiceId: string; refundId: string; succeeded: RecordedEvent }> {
    const invoiceId = await paidInvoice();
    const { refundId, data } = await requestedRefund(invoiceId, amount);
    await onRefund(refundId, { type: 'CreateRefund', data });
    const [succeeded] = await onRefund(refundId, { type: 'CompleteRefund', at: clock.now().toISOString() });
    await runOutbox();
    expect(await deliveriesOf(succeeded!.id)).toEqual([]);
    await resolve(invoiceId, refundId, 'succeeded');
    return { invoiceId, refundId, succeeded: succeeded! };
  }

  /** The outbox run a day past the retention period: every event here is older than it. */
  const runOutboxPastRetention = () =>
    projectToHead(
      db.pool,
      store,
      webhookOutbox(store, registry, { now: () => new Date(Date.now() + (DEFAULT_WEBHOOK_RETENTION_DAYS + 1) * 86_400_000) }, () => PUBLIC_URL),
    );

  it("met first without the invoice's record, then recorded after a stop longer than the retention period: still enqueued", async () => {
    const { invoiceId, refundId, succeeded } = await outcomeMetBeforeItsRecord(200_00);
    // The outbox meets the record only after the retention period (a stopped reactor, a stopped projector).
    await runOutboxPastRetention();
    await expectOneWebhook(succeeded.id, 'refund.succeeded', refundId, invoiceId);
  });

  it('met first without the record, then both met in one batch after a checkpoint moved back, past the period: enqueued', async () => {
    const { invoiceId, refundId, succeeded } = await outcomeMetBeforeItsRecord(150_00);
    // The outbox's checkpoint moved back by hand before the outcome; it meets outcome and record in one batch.
    await db.pool.query(`UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0, events_applied = 0 WHERE projection = 'webhook_outbox'`);
    await runOutboxPastRetention();
    await expectOneWebhook(succeeded.id, 'refund.succeeded', refundId, invoiceId);
  });

  it('refund.succeeded of the whole remainder, both recorded before the outbox runs: refunded', async () => {
    const invoiceId = await paidInvoice();
    await succeededRefund(invoiceId, 400_00);
    const rest = await succeededRefund(invoiceId, 600_00);
    await runOutbox();

    const hook = await expectOneWebhook(rest.succeeded.id, 'refund.succeeded', rest.refundId, invoiceId);
    expect(hook.invoice).toMatchObject({ status: 'refunded', refundedAmount: '1000.00' });
  });

  it('refund.failed: the amount back in the remainder, only succeeded refunds counted', async () => {
    const invoiceId = await paidInvoice();
    await succeededRefund(invoiceId, 300_00);
    const bad = await requestedRefund(invoiceId, 200_00);
    await onRefund(bad.refundId, { type: 'CreateRefund', data: bad.data });
    const [failed] = await onRefund(bad.refundId, { type: 'FailRefund', at: clock.now().toISOString(), reason: 'банк отказал' });
    await runOutbox();
    await resolve(invoiceId, bad.refundId, 'failed');
    await runOutbox();

    const hook = await expectOneWebhook(failed!.id, 'refund.failed', bad.refundId, invoiceId);
    expect(hook.invoice).toMatchObject({ status: 'partially_refunded', refundedAmount: '300.00' });
    expect(hook.refund).toMatchObject({ status: 'failed', amount: '200.00' });
  });

  it('refund.failed of an unfunded refund, the invoice recording it before the refund stream exists', async () => {
    const invoiceId = await paidInvoice();
    const { refundId, data } = await requestedRefund(invoiceId, 500_00);
    // As RefundFlow.advance does when the ledger refuses a refund that may have been answered.
    await resolve(invoiceId, refundId, 'failed');
    await runOutbox();
    const appended = await onRefund(refundId, { type: 'CreateUnfundedRefund', data, at: clock.now().toISOString(), reason: 'insufficient_balance' });
    const failed = appended.find((e) => e.type === 'RefundFailed')!;
    await runOutbox();

    const hook = await expectOneWebhook(failed.id, 'refund.failed', refundId, invoiceId);
    expect(hook.invoice).toMatchObject({ status: 'paid', refundedAmount: '0.00' });
  });

  it('waits for the invoice to record the outcome (never predicted), while the webhooks after it go out', async () => {
    const invoiceId = await paidInvoice();
    const { refundId, data } = await requestedRefund(invoiceId, 100_00);
    await onRefund(refundId, { type: 'CreateRefund', data });
    const [succeeded] = await onRefund(refundId, { type: 'CompleteRefund', at: clock.now().toISOString() });
    const later = await paidInvoice();
    await runOutbox();
    expect(await deliveriesOf(succeeded!.id)).toEqual([]);
    const paidLater = await db.pool.query(`SELECT 1 FROM webhook_deliveries WHERE event_type = 'invoice.paid' AND body::json->'data'->'invoice'->>'id' = $1`, [
      later,
    ]);
    expect(paidLater.rowCount).toBe(1);

    await resolve(invoiceId, refundId, 'succeeded');
    await runOutbox();
    const hook = await expectOneWebhook(succeeded!.id, 'refund.succeeded', refundId, invoiceId);
    expect(hook.invoice).toMatchObject({ status: 'partially_refunded', refundedAmount: '100.00' });
  });

  // Each refused retry of a refund (the balance short) adds its records to the invoice's stream, and the outbox read
  // that whole stream for every one of them: a merchant retrying in a loop slowed every project's webhooks without bound.
  it('a refund refused for want of balance is no webhook, and the outbox reads nothing for it', async () => {
    const invoiceId = await paidInvoice();
    const { refundId } = await requestedRefund(invoiceId, 100_00);
    await runInvoiceCommand(store, invoiceId, { type: 'ResolveRefund', refundId, outcome: 'refused', at: clock.now().toISOString() });
    const released = (await store.readStream(invoiceStreamName(invoiceId))).find((e) => e.type === 'InvoiceRefundReleased')!;
    const reads: string[] = [];
    const counting = new Proxy(store, {
      get: (target, name, receiver) =>
        name === 'readStream'
          ? (stream: string, options?: object) => (reads.push(stream), target.readStream(stream, options))
          : Reflect.get(target, name, receiver),
    });
    expect(await renderWebhook(counting, registry, released, () => PUBLIC_URL)).toBeNull();
    expect(reads).toEqual([]);
    await runOutbox();
    expect(await deliveriesOf(released.id)).toEqual([]);
  });

  it('a replay of the outbox from zero enqueues nothing again and keeps every body', async () => {
    const before = (await db.pool.query('SELECT id, event_id, body FROM webhook_deliveries ORDER BY id')).rows;
    expect(before.length).toBeGreaterThan(0);
    await db.pool.query("UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0 WHERE projection = 'webhook_outbox'");
    await runOutbox();
    expect((await db.pool.query('SELECT id, event_id, body FROM webhook_deliveries ORDER BY id')).rows).toEqual(before);
  });
});
