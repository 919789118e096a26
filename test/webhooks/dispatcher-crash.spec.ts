/**
 * Crash safety of webhook delivery: the gateway (outbox and dispatcher) is killed
 * with SIGKILL while deliveries are in flight (the receiver answers slowly), then
 * restarted. Every event is then delivered at least once, and an event reaches the
 * receiver twice only where the gateway never recorded the first attempt's answer
 * (it died before): what it recorded as delivered is never sent again.
 */
import { RunningGateway, startGateway } from '../support/gateway-process';
import { expectStatus, Operator, orderId, poll } from '../support/merchant-fixtures';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../support/webhook-receiver';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-webhook-crash-0042';
const INVOICES = 40;

jest.setTimeout(120_000);

describe('SIGKILL of the dispatcher with deliveries in flight', () => {
  let db: TestDatabase;
  let receiver: WebhookReceiver;
  let gateway: RunningGateway | null = null;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await gateway?.kill('SIGKILL');
    await receiver?.close();
    await db?.drop();
  });

  it('delivers every event at least once and resends only what was not recorded', async () => {
    // WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver listens on 127.0.0.1 (the guarded path: keep-alive-delivery.spec.ts).
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    let operator = new Operator(gateway.baseUrl, gateway.adminToken);
    const merchant = await operator.merchant({ webhookUrl: receiver.url } as never);
    const invoiceIds: string[] = [];
    for (let i = 0; i < INVOICES; i++) {
      const r = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('hook'), method: 'sbp' });
      expectStatus(r, 201);
      invoiceIds.push(r.body.id);
    }
    // Slow answers keep many attempts in flight at the moment of the kill.
    receiver.answer = () => ({ status: 200, body: 'ok', delayMs: 400 });
    await Promise.all(invoiceIds.map(async (id) => expectStatus(await operator.payment(id, 'paid'), 200)));
    await receiver.waitFor((r) => r.length >= 5, 'the first deliveries');
    const killedAt = new Date();
    await gateway.kill('SIGKILL');
    const receivedBeforeKill = receiver.received.length;

    receiver.answer = () => ({ status: 200, body: 'ok' });
    const restartedAt = Date.now();
    // WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver listens on 127.0.0.1 (the guarded path: keep-alive-delivery.spec.ts).
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });
    operator = new Operator(gateway.baseUrl, gateway.adminToken);

    // Every invoice.paid arrives (deliveries claimed by the dead process after their 15 s lease).
    const eventsOf = () => new Set(receiver.received.map((r) => r.body?.id as string));
    await receiver.waitFor(() => eventsOf().size === INVOICES, `all ${INVOICES} events`, 60_000);
    const history = await poll(
      () => operator.http.get(`/admin/v1/webhook-deliveries?projectId=${merchant.projectId}&limit=100`),
      (r) => r.status === 200 && r.body.items.length === INVOICES && r.body.items.every((d: { status: string }) => d.status === 'delivered'),
      'every delivery recorded as delivered',
      30_000,
    );

    for (const webhook of receiver.received) expect(validSignature(webhook, merchant.project.webhookSecret)).toBe(true);
    const paidInvoices = new Set(receiver.received.map((r) => r.body.data.invoice.id as string));
    expect([...paidInvoices].sort()).toEqual([...invoiceIds].sort());

    for (const delivery of history.body.items as { id: string; eventId: string; attempts: { at: string; statusCode: number | null }[] }[]) {
      const receptions = receiver.received.filter((r) => r.headers['x-service-delivery-id'] === delivery.id);
      // One delivery id per event, the same on every attempt.
      expect(new Set(receptions.map((r) => r.body.id))).toEqual(new Set([delivery.eventId]));
      const recordedByTheDeadProcess = delivery.attempts.some((a) => a.statusCode === 200 && new Date(a.at) < killedAt);
      if (recordedByTheDeadProcess) {
        // Acknowledged and recorded before the kill: never sent again.
        expect(receptions).toHaveLength(1);
      } else {
        // At most one more after the restart, whatever the dead process had in flight.
        expect(receptions.filter((r) => r.receivedAt >= restartedAt)).toHaveLength(1);
        expect(receptions.filter((r) => r.receivedAt < restartedAt).length).toBeLessThanOrEqual(1);
      }
    }
    // The kill did land mid-stream: some were delivered before it, some only after.
    expect(receivedBeforeKill).toBeGreaterThan(0);
    expect(receiver.received.filter((r) => r.receivedAt >= restartedAt).length).toBeGreaterThan(0);
  });
});
