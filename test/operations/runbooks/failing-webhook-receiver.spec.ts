/**
 * The runbook "A failing webhook receiver" of docs/operations.md, executed (issue 33):
 * an API process and a projector process apart on one database, merchants whose
 * receivers answer 500. The signs show on the projector's /metrics; the steps are the
 * operator calls and the SQL the runbook prints, run as printed:
 * 1. the attempts listed, 2. their cause (the receiver's status code and reply),
 * 3. another merchant's webhooks arrive meanwhile, 4. once the receiver is fixed the
 * pending deliveries go out at their next attempt and one call resends the failed ones,
 * 5. a changed URL: the PATCH, the SQL that re-addresses the queued deliveries, the
 * resend, 6. unsubscribing stops new deliveries and nothing is enqueued later.
 * The `refused: …` causes of step 2 (private and the host's own addresses) are
 * test/webhooks/webhook-address.spec.ts and test/webhooks/webhooks.spec.ts.
 */
import { expectStatus, Json, Merchant, orderId, poll } from '../../support/merchant-fixtures';
import { paidInvoice } from '../../support/money-out-fixtures';
import { after, Deployment, docSection, fill, inlineCode, metric, operatorCall, projectorMetrics, startDeployment } from '../../support/runbooks';
import { createTestDatabase, TestDatabase } from '../../support/test-database';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../../support/webhook-receiver';

jest.setTimeout(120_000);

const RUNBOOK = docSection('A failing webhook receiver');
const step = (n: number) => after(RUNBOOK, `${n}. **`);
/** The retry schedule after the first attempt (seconds on the clock): seven attempts, then `failed`. */
const SCHEDULE = [60, 300, 1800, 7200, 43_200, 86_400];
const BROKEN = { status: 500, body: 'сломалось' };

describe('runbook: a failing webhook receiver', () => {
  let db: TestDatabase;
  let gateway: Deployment;
  let shopReceiver: WebhookReceiver;
  let otherReceiver: WebhookReceiver;
  let oldReceiver: WebhookReceiver;
  let newReceiver: WebhookReceiver;
  /** Its receiver fails, then is fixed (steps 1 to 4 and 6). */
  let shop: Merchant;
  /** Its receiver works all along (step 3). */
  let other: Merchant;
  /** Its receiver fails, and it gives a new URL (step 5). */
  let moving: Merchant;

  const secretOf = (m: Merchant) => m.project.webhookSecret as string;
  const deliveries = async (m: Merchant): Promise<Json[]> => {
    const r = await operatorCall(gateway, inlineCode(step(1), 'GET /admin/v1/webhook-deliveries?projectId='), { '<id>': m.projectId });
    expectStatus(r, 200);
    return r.body.items as Json[];
  };
  const waitForDeliveries = (m: Merchant, done: (items: Json[]) => boolean, what: string, timeoutMs = 15_000) =>
    poll(() => deliveries(m), done, what, timeoutMs);
  const eventIdsAt = (receiver: WebhookReceiver) => receiver.received.map((w) => w.body?.id as string);

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    [shopReceiver, otherReceiver, oldReceiver, newReceiver] = await Promise.all([1, 2, 3, 4].map(() => startWebhookReceiver()));
    shopReceiver.answer = () => BROKEN;
    oldReceiver.answer = () => BROKEN;
    gateway = await startDeployment({
      DATABASE_URL: db.url,
      // The retry schedule spans about 39 hours: the test moves the gateway clock through it.
      CLOCK: 'manual',
      // The receivers listen on 127.0.0.1.
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    });
    const { operator } = gateway;
    shop = await operator.merchant({ webhookUrl: shopReceiver.url } as never);
    other = await operator.merchant({ webhookUrl: otherReceiver.url } as never);
    moving = await operator.merchant({ webhookUrl: oldReceiver.url } as never);
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([shopReceiver, otherReceiver, oldReceiver, newReceiver].map((r) => r?.close()));
    await db?.drop();
  });

  it('signs: retries and failures rise, the queue grows; 1-2. the attempts show the receiver’s answers; 3. other merchants’ webhooks go out', async () => {
    const { operator } = gateway;
    // Two payments of each failing merchant: their deliveries go through the whole schedule and fail for good.
    for (const m of [shop, moving]) for (let i = 0; i < 2; i++) await paidInvoice(operator, m.test, '100.00');
    await shopReceiver.waitFor((r) => r.length === 2, 'the first attempts at the shop');
    await oldReceiver.waitFor((r) => r.length === 2, 'the first attempts at the moving merchant');
    const signs = await poll(
      () => projectorMetrics(gateway),
      (m) => (metric(m, 'webhook_attempts_total', { outcome: 'retry' }) ?? 0) >= 4 && (metric(m, 'webhook_queue_depth', { status: 'pending' }) ?? 0) >= 4,
      'webhook_attempts_total{outcome="retry"} and webhook_queue_depth{status="pending"} rising',
    );
    expect(metric(signs, 'webhook_attempts_total', { outcome: 'failed' }) ?? 0).toBe(0);
    for (let i = 0; i < SCHEDULE.length; i++) {
      await operator.advance(SCHEDULE[i]! + 2);
      await shopReceiver.waitFor((r) => r.length === 2 * (i + 2), `attempt ${i + 2} at the shop`);
      await oldReceiver.waitFor((r) => r.length === 2 * (i + 2), `attempt ${i + 2} at the moving merchant`);
    }
    await waitForDeliveries(shop, (items) => items.length === 2 && items.every((d) => d.status === 'failed'), 'the shop’s deliveries failed for good');
    await poll(
      () => projectorMetrics(gateway),
      (m) => (metric(m, 'webhook_attempts_total', { outcome: 'failed' }) ?? 0) >= 4,
      'webhook_attempts_total{outcome="failed"} rising',
    );
    // One more payment each: a delivery still pending, with its next attempt a minute away.
    for (const m of [shop, moving]) await paidInvoice(operator, m.test, '100.00');
    await waitForDeliveries(shop, (items) => items.length === 3 && items[0].attempts.length === 1, 'the third delivery tried once');
    await waitForDeliveries(moving, (items) => items.length === 3 && items[0].attempts.length === 1, 'the moving merchant’s third delivery tried once');

    // 1. See the attempts: each delivery with its url, status, nextAttemptAt and every attempt.
    const [pending, ...failed] = await deliveries(shop);
    for (const d of failed) {
      expect(d).toMatchObject({ url: shopReceiver.url, status: 'failed', nextAttemptAt: null, eventType: 'invoice.paid' });
      expect(d.attempts).toHaveLength(7);
    }
    expect(pending).toMatchObject({ url: shopReceiver.url, status: 'pending', nextAttemptAt: expect.any(String) });
    // 2. Read the cause: the receiver's status code and its reply, each attempt timed.
    for (const d of [pending, ...failed]) {
      for (const a of d.attempts)
        expect(a).toMatchObject({ at: expect.any(String), statusCode: 500, body: 'сломалось', durationMs: expect.any(Number), error: null });
    }

    // 3. Nothing to do for the other merchants: their webhooks go out meanwhile.
    const invoiceId = await paidInvoice(operator, other.test, '250.00');
    await otherReceiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === invoiceId), 'the other merchant’s webhook');
    expect(validSignature(otherReceiver.received.at(-1)!, secretOf(other))).toBe(true);
  });

  it('4. once the receiver is fixed, the pending delivery goes out at its next attempt and the failed ones with the resend call', async () => {
    const before = await deliveries(shop);
    shopReceiver.answer = () => ({ status: 200, body: 'ok' });
    const attemptsBefore = shopReceiver.received.length;

    const resend = await operatorCall(gateway, inlineCode(step(4), 'POST /admin/v1/projects/'), { '{id}': shop.projectId });
    expectStatus(resend, 202);
    expect(resend.body).toEqual({ projectId: shop.projectId, resent: 2 });
    // The failed ones go out at once, each with its delivery id and body.
    await shopReceiver.waitFor((r) => r.length === attemptsBefore + 2, 'the two failed deliveries sent again');
    for (const d of before.filter((x) => x.status === 'failed')) {
      const sent = shopReceiver.received.slice(attemptsBefore).find((w) => w.headers['x-service-delivery-id'] === d.id);
      expect(sent?.body?.id).toBe(d.eventId);
      expect(validSignature(sent!, secretOf(shop))).toBe(true);
    }
    // The pending one at its next attempt (a minute on the clock).
    await gateway.operator.advance(61);
    await shopReceiver.waitFor((r) => r.length === attemptsBefore + 3, 'the pending delivery at its next attempt');
    const after = await waitForDeliveries(shop, (items) => items.every((d) => d.status === 'delivered'), 'every delivery of the shop delivered');
    expect(after.map((d) => d.attempts.at(-1).statusCode)).toEqual([200, 200, 200]);
    // A resend for a project that does not exist is 404.
    const unknown = await operatorCall(gateway, inlineCode(step(4), 'POST /admin/v1/projects/'), { '{id}': '00000000-0000-4000-8000-000000000000' });
    expect({ status: unknown.status, code: unknown.body?.error?.code }).toEqual({ status: 404, code: 'not_found' });
  });

  it('5. the merchant changed the URL: the PATCH, the SQL as printed, and the resend send everything queued to the new URL', async () => {
    const { operator } = gateway;
    await operator.patchProject(moving.projectId, { webhookUrl: newReceiver.url });
    const sql = fill(inlineCode(step(5), 'BEGIN; UPDATE webhook_deliveries SET url'), { '<new>': newReceiver.url, '<id>': moving.projectId });
    await db.pool.query(sql);
    const atOld = oldReceiver.received.length;

    const pending = (await deliveries(moving)).find((d) => d.status === 'pending');
    const resend = await operatorCall(gateway, inlineCode(step(4), 'POST /admin/v1/projects/'), { '{id}': moving.projectId });
    expect(resend.body).toEqual({ projectId: moving.projectId, resent: 2 });
    // The pending one at its next attempt.
    const now = (await operator.advance(0)).getTime();
    await operator.advance(Math.ceil((new Date(pending.nextAttemptAt).getTime() - now) / 1000) + 1);
    const later = await paidInvoice(operator, moving.test, '300.00');
    await newReceiver.waitFor((r) => r.length === 4, 'the two failed, the pending and the new delivery at the new URL');
    expect(oldReceiver.received.length).toBe(atOld);
    expect(newReceiver.received.some((w) => w.body?.data?.invoice?.id === later)).toBe(true);
    const delivered = await waitForDeliveries(
      moving,
      (items) => items.length === 4 && items.every((d) => d.status === 'delivered'),
      'every delivery delivered',
    );
    expect(eventIdsAt(newReceiver).sort()).toEqual(delivered.map((d) => d.eventId as string).sort());
    for (const d of delivered) expect(d.url).toBe(newReceiver.url);
    for (const w of newReceiver.received) expect(validSignature(w, secretOf(moving))).toBe(true);
  });

  it('6. unsubscribing: no URL or fewer events stops new deliveries, and events of the meantime are not enqueued later', async () => {
    const { operator } = gateway;
    const known = (await deliveries(shop)).length;
    const failedPayment = async (m: Merchant): Promise<string> => {
      const created = await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('unsubscribed'), method: 'sbp' });
      expectStatus(created, 201);
      expectStatus(await operator.payment(created.body.id, 'failed'), 200);
      return created.body.id as string;
    };

    await operator.patchProject(shop.projectId, { webhookUrl: null });
    const meantime = await paidInvoice(operator, shop.test, '100.00');
    // The outbox follows the log in order: once a later event of another project is delivered, this one was passed.
    const marker = await paidInvoice(operator, other.test, '100.00');
    await otherReceiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === marker), 'a later webhook of another project');
    expect(await deliveries(shop)).toHaveLength(known);

    // Subscribed again, to invoice.failed only: a payment is not sent, a failure is; the meantime's payment never.
    await operator.patchProject(shop.projectId, { webhookUrl: shopReceiver.url, webhookEvents: ['invoice.failed'] });
    const paid = await paidInvoice(operator, shop.test, '100.00');
    const failed = await failedPayment(shop);
    await shopReceiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === failed), 'the invoice.failed webhook');
    const items = await waitForDeliveries(shop, (all) => all[0]?.status === 'delivered', 'the invoice.failed delivery recorded');
    expect(items).toHaveLength(known + 1);
    expect(items[0]).toMatchObject({ eventType: 'invoice.failed', status: 'delivered' });
    const sentInvoices = shopReceiver.received.map((w) => w.body?.data?.invoice?.id);
    expect(sentInvoices).not.toContain(meantime);
    expect(sentInvoices).not.toContain(paid);
  });

  it('4. an endpoint disabled after 3 days of failures: the project shows it, and the enable call sends what is owed and what comes next', async () => {
    const { operator } = gateway;
    // The moving merchant's old receiver still fails: a new merchant on it fails through the schedule and past 3 days.
    const silent = await operator.merchant({ webhookUrl: oldReceiver.url } as never);
    const atOld = oldReceiver.received.length;
    await paidInvoice(operator, silent.test, '100.00');
    await oldReceiver.waitFor((r) => r.length === atOld + 1, 'the first attempt');
    for (let i = 0; i < SCHEDULE.length; i++) {
      await operator.advance(SCHEDULE[i]! + 2);
      await oldReceiver.waitFor((r) => r.length === atOld + i + 2, `attempt ${i + 2}`);
    }
    await operator.advance(12 * 3600);
    await paidInvoice(operator, silent.test, '100.00');
    await oldReceiver.waitFor((r) => r.length === atOld + SCHEDULE.length + 2, 'the second event tried');
    await waitForDeliveries(silent, (items) => items.length === 2 && items[0].attempts.length === 1, 'the second attempt recorded');
    await operator.advance(24 * 3600);
    const project = inlineCode(step(4), 'GET /admin/v1/projects/{id}');
    const disabled = await poll(
      () => operatorCall(gateway, project, { '{id}': silent.projectId }),
      (r) => r.status === 200 && typeof r.body.webhookDisabledAt === 'string',
      'webhookDisabledAt set',
    );
    expect(disabled.body.webhookDisabledAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // Meanwhile a new event is recorded failed and not sent: resend-failed alone would leave the endpoint off.
    const owedInvoice = await paidInvoice(operator, silent.test, '100.00');
    await waitForDeliveries(silent, (items) => items.length === 3 && items.every((d) => d.status === 'failed'), 'three deliveries failed');
    expect(oldReceiver.received.some((w) => w.body?.data?.invoice?.id === owedInvoice)).toBe(false);

    const fixedReceiver = newReceiver.received.length;
    await operator.patchProject(silent.projectId, { webhookUrl: newReceiver.url });
    const sql = fill(inlineCode(step(5), 'BEGIN; UPDATE webhook_deliveries SET url'), { '<new>': newReceiver.url, '<id>': silent.projectId });
    await db.pool.query(sql);
    const enable = await operatorCall(gateway, inlineCode(step(4), 'POST /admin/v1/projects/{id}/webhook-endpoint/enable'), { '{id}': silent.projectId });
    expectStatus(enable, 202);
    expect(enable.body).toEqual({ projectId: silent.projectId, resent: 3 });
    await newReceiver.waitFor((r) => r.length === fixedReceiver + 3, 'the three owed deliveries');
    const next = await paidInvoice(operator, silent.test, '100.00');
    await newReceiver.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === next), 'the next event sent');
    expect((await operatorCall(gateway, project, { '{id}': silent.projectId })).body.webhookDisabledAt).toBeNull();
  });
});
