/**
 * A webhook is addressed with the project's settings in force when its event happened
 * (decision 0065: "subscription changes apply to events from then on"), not with those
 * it has when the outbox gets to the event: with the projector stopped or behind, an
 * event that happened while the project was subscribed was recorded not_subscribed and
 * never sent, one that happened while it was not was sent, and a project created after
 * a payout was paid got that payout's webhook. Real PostgreSQL, the real outbox and
 * Registry; the outbox runs after every change, as a lagging projector would.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '#platform/clock';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { EventStore, handleCommand, PostgresEventStore } from '#event-store';
import { PayoutCommand, payoutDecider, PayoutRequestedData, payoutStreamName } from '#domain';
import { Registry, UpdateProject, UpdateProjectHandler, WEBHOOK_EVENTS } from '#payments/merchants';
import { webhookOutbox } from '#payments/webhooks';
import { CreateInvoice, CreateInvoiceHandler } from '../../apps/api/src/invoices/create-invoice/create-invoice.handler';
import { RecordPaymentResult, RecordPaymentResultHandler } from '../../apps/api/src/invoices/record-payment-result/record-payment-result.handler';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { projectToHead } from '../support/project-to-head';
import { webhookProject } from '../support/webhook-project';
import { invoiceRequest } from '../support/invoice-request';

const SECRETS = new SecretBox(fixedKeys([randomBytes(32)]));
const START = new Date('2026-06-01T09:00:00.000Z');

let db: TestDatabase;
let store: EventStore;
let registry: Registry;
let now = START;
const clock: Clock = { now: () => now };
/** The gateway clock a minute later: each step of a test happens at its own instant. */
const later = () => {
  now = new Date(now.getTime() + 60_000);
  return now;
};

beforeAll(async () => {
  db = await createTestDatabase();
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
  registry = new Registry(db.pool, SECRETS);
});
afterAll(async () => {
  await store?.close();
  await db?.drop();
});

const runOutbox = () =>
  projectToHead(
    db.pool,
    store,
    webhookOutbox(store, registry, clock, () => 'http://127.0.0.1:3000'),
  );

async function paidInvoice(project: Awaited<ReturnType<typeof webhookProject>>, at = later): Promise<string> {
  const { invoice } = await new CreateInvoiceHandler(store).execute(
    new CreateInvoice(project, 'test', invoiceRequest({ amount: 1000_00, orderId: `at-${randomBytes(6).toString('hex')}` }), at()),
  );
  // Paid by a process whose clock reads `at` (behind, in one case).
  const paidAt = at();
  await new RecordPaymentResultHandler(store, registry, { now: () => paidAt }).execute(
    new RecordPaymentResult(invoice.created.invoiceId, 'paid', null, paidAt),
  );
  return invoice.created.invoiceId;
}

/** What the project's merchant sees of the invoice's event (GET /v1/events): its delivery's URL, or null when not subscribed; absent: not addressed. */
async function addressedTo(projectId: string, eventType: string, subject: string): Promise<(string | null)[]> {
  const { rows } = await db.pool.query<{ url: string | null }>(
    `SELECT d.url FROM merchant_events e LEFT JOIN webhook_deliveries d ON d.id = e.delivery_id
     WHERE e.project_id = $1 AND e.type = $2 AND e.body LIKE '%' || $3 || '%'`,
    [projectId, eventType, subject],
  );
  return rows.map((r) => r.url);
}

const settings = (
  project: Awaited<ReturnType<typeof webhookProject>>,
  change: { webhookUrl?: string | null; webhookEvents?: (typeof WEBHOOK_EVENTS)[number][] },
) => new UpdateProjectHandler(db.pool).execute(new UpdateProject(project.id, (current) => ({ ...current, ...change }), later()));

describe('webhook settings at the time of the event', () => {
  it('an invoice paid while subscribed is sent after an unsubscription, to the URL of that time; one paid while unsubscribed is not', async () => {
    const project = await webhookProject(registry, later(), 'https://shop.example/old');
    const whileSubscribed = await paidInvoice(project);
    await settings(project, { webhookEvents: ['invoice.failed'] });
    const whileUnsubscribed = await paidInvoice(project);
    await settings(project, { webhookEvents: [...WEBHOOK_EVENTS], webhookUrl: 'https://shop.example/new' });
    const afterwards = await paidInvoice(project);
    await runOutbox();

    expect(await addressedTo(project.id, 'invoice.paid', whileSubscribed)).toEqual(['https://shop.example/old']);
    expect(await addressedTo(project.id, 'invoice.paid', whileUnsubscribed)).toEqual([null]);
    expect(await addressedTo(project.id, 'invoice.paid', afterwards)).toEqual(['https://shop.example/new']);
  });

  it('two changes whose clocks were read in the other order than they landed: the last one stays in force', async () => {
    const project = await webhookProject(registry, later(), 'https://shop.example/first');
    const at = later();
    // B read the clock after A but took the project's row lock first (two API processes, or skewed clocks).
    await new UpdateProjectHandler(db.pool).execute(
      new UpdateProject(project.id, (current) => ({ ...current, webhookUrl: 'https://shop.example/b' }), new Date(at.getTime() + 5)),
    );
    const landed = await new UpdateProjectHandler(db.pool).execute(
      new UpdateProject(project.id, (current) => ({ ...current, webhookUrl: 'https://shop.example/a' }), at),
    );
    expect(landed!.webhookUrl).toBe('https://shop.example/a');
    const paid = await paidInvoice(project);
    await runOutbox();
    expect(await addressedTo(project.id, 'invoice.paid', paid)).toEqual(['https://shop.example/a']);
  });

  it("an event dated before its project's first settings (another process's clock behind) is still the project's: listed and sent", async () => {
    const project = await webhookProject(registry, later(), 'https://shop.example/own');
    const behind = () => new Date(now.getTime() - 300);
    const paid = await paidInvoice(project, behind);
    await runOutbox();
    expect(await addressedTo(project.id, 'invoice.paid', paid)).toEqual(['https://shop.example/own']);
  });

  it("a payout's webhook goes to the account's projects that existed when it was paid, not to one created since", async () => {
    const first = await webhookProject(registry, later());
    const payoutId = 900_000 + Math.floor(Math.random() * 99_999);
    const data: PayoutRequestedData = {
      payoutId,
      accountId: first.accountId,
      projectId: first.id,
      method: 'sbp',
      addressId: 7,
      account: '+79161234567',
      bank: 'Т-Банк',
      orderId: `po-${payoutId}`,
      comment: null,
      amount: 500_00,
      feeAmount: 10_00,
      netAmount: 490_00,
      usdtAmount: null,
      usdtRate: null,
      source: 'api',
      createdAt: later().toISOString(),
    };
    const run = async (command: PayoutCommand) => {
      const result = await handleCommand(store, payoutStreamName(payoutId), payoutDecider, command);
      if (!result.ok) throw result.failure;
    };
    await run({ type: 'RequestPayout', data });
    await run({ type: 'RecordReservation', outcome: 'reserved', at: later().toISOString() });
    await run({ type: 'ApprovePayout', at: later().toISOString() });
    await run({ type: 'StartProcessing', at: later().toISOString() });
    await run({ type: 'PayPayout', at: later().toISOString(), externalId: null });
    const { project: second } = await registry.createProject(
      first.accountId,
      { ...first, methodOverrides: {}, webhookUrl: 'https://second.example/hooks', webhookEvents: [...WEBHOOK_EVENTS] },
      later(),
    );
    await runOutbox();

    expect(await addressedTo(first.id, 'payout.paid', `"id":${payoutId}`)).toEqual(['https://shop.example/hooks']);
    expect(await addressedTo(second.id, 'payout.paid', `"id":${payoutId}`)).toEqual([]);
  });
});
