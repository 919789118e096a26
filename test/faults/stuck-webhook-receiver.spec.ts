/**
 * A stuck webhook receiver (accepts the connection, never answers) does not slow the
 * API and does not starve other projects' webhooks. One project's webhook URL points
 * at such a receiver and 100 of its test invoices are paid, so that 100 deliveries
 * hang (each attempt until the 10 s limit); meanwhile:
 * - 200 API requests (creates, reads, lists, balances) are all answered, each with
 *   its right status (latencies are printed for information, not asserted);
 * - a second project's webhook reaches its healthy receiver while the stuck
 *   receiver still holds its first attempts, long before all 100 were even tried.
 */
import { RunningGateway, startGateway } from '../support/gateway-process';
import { Client, expectStatus, Json, Merchant, Operator, orderId, poll, Reply } from '../support/merchant-fixtures';
import { startWebhookReceiver, validSignature, WebhookReceiver } from '../support/webhook-receiver';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-stuck-webhooks-0042';
const STUCK_EVENTS = 100;
const REQUESTS = 200;

jest.setTimeout(120_000);

describe('a stuck webhook receiver', () => {
  let db: TestDatabase;
  let gateway: RunningGateway | null = null;
  let stuck: WebhookReceiver;
  let healthy: WebhookReceiver;

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    stuck = await startWebhookReceiver();
    stuck.answer = () => 'hang';
    healthy = await startWebhookReceiver();
    // The whole gateway in one process: the dispatcher shares the API's event loop and pool.
    gateway = await startGateway('gateway', {
      DATABASE_URL: db.url,
      ADMIN_TOKEN,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      // Sends more than 60 requests a second with one key, and reads each invoice again within 3 s; the
      // limits have their own suite (rate-limits.spec.ts).
      RATE_LIMIT_PER_SECOND: '1000000',
      POLL_INTERVAL_SECONDS: '0',
    });
  });

  afterAll(async () => {
    // SIGKILL: a graceful stop would wait for the hanging attempts.
    await gateway?.kill('SIGKILL');
    await stuck?.close();
    await healthy?.close();
    await db?.drop();
  });

  it('slows neither the API nor the webhooks of other projects', async () => {
    const operator = new Operator(gateway!.baseUrl, ADMIN_TOKEN);
    const stuckProject: Merchant = await operator.merchant({ webhookUrl: stuck.url } as never);
    const healthyProject: Merchant = await operator.merchant({ webhookUrl: healthy.url } as never);

    // 100 paid test invoices: 100 invoice.paid deliveries to the receiver that never answers.
    const stuckInvoices: string[] = [];
    for (let i = 0; i < STUCK_EVENTS; i += 10) {
      const created = await Promise.all(
        Array.from({ length: 10 }, () => stuckProject.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('stuck'), method: 'sbp' })),
      );
      for (const r of created) expectStatus(r, 201);
      const ids = created.map((r) => r.body.id as string);
      for (const r of await Promise.all(ids.map((id) => operator.payment(id, 'paid')))) expectStatus(r, 200);
      stuckInvoices.push(...ids);
    }
    await poll(
      () => operator.http.get(`/admin/v1/webhook-deliveries?projectId=${stuckProject.projectId}&limit=100`),
      (r) => r.status === 200 && r.body.items.length === STUCK_EVENTS,
      `${STUCK_EVENTS} deliveries enqueued for the stuck receiver`,
      30_000,
    );
    await stuck.waitFor((r) => r.length > 0, 'the first attempts to hang on the stuck receiver');

    // The other project's webhook: an invoice paid now.
    const healthyInvoice = await healthyProject.test.post('/v1/invoices', { amount: '250.00', orderId: orderId('healthy'), method: 'sbp' });
    expectStatus(healthyInvoice, 201);
    expectStatus(await operator.payment(healthyInvoice.body.id, 'paid'), 200);
    const healthyDelivered = healthy
      .waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === healthyInvoice.body.id), 'the healthy project’s invoice.paid', 60_000)
      .then(() => ({ stuckAttemptsBefore: stuck.received.length, at: Date.now() }));

    // Meanwhile, 200 API requests of both projects, ten at a time.
    const started = Date.now();
    const requests: { what: string; expected: number; send: (c: Client) => Promise<Reply>; client: Client }[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const invoiceId = stuckInvoices[i % stuckInvoices.length]!;
      switch (i % 4) {
        case 0:
          requests.push({
            what: 'POST /v1/invoices',
            expected: 201,
            client: healthyProject.test,
            send: (c) => c.post('/v1/invoices', { amount: '100.00', orderId: orderId('during'), method: 'sbp' }),
          });
          break;
        case 1:
          requests.push({ what: 'GET /v1/invoices/{id}', expected: 200, client: stuckProject.test, send: (c) => c.get(`/v1/invoices/${invoiceId}`) });
          break;
        case 2:
          requests.push({ what: 'GET /v1/invoices', expected: 200, client: stuckProject.test, send: (c) => c.get('/v1/invoices?limit=20') });
          break;
        default:
          requests.push({ what: 'GET /v1/balance', expected: 200, client: stuckProject.test, send: (c) => c.get('/v1/balance') });
      }
    }
    const results: { what: string; expected: number; status: number; body: Json; ms: number }[] = [];
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const request = requests[next++]!;
        const t0 = performance.now();
        const reply = await request.send(request.client);
        results.push({ what: request.what, expected: request.expected, status: reply.status, body: reply.body, ms: performance.now() - t0 });
      }
    };
    await Promise.all(Array.from({ length: 10 }, worker));
    const stuckAttemptsDuringBatch = stuck.received.length;

    // Every request answered, with its right status and body.
    expect(results).toHaveLength(REQUESTS);
    for (const r of results) expect({ what: r.what, status: r.status, error: r.body?.error }).toEqual({ what: r.what, status: r.expected, error: undefined });
    for (const r of results.filter((x) => x.what === 'GET /v1/invoices/{id}')) expect(r.body.status).toBe('paid');
    for (const r of results.filter((x) => x.what === 'GET /v1/invoices')) expect(r.body.items.length).toBeGreaterThan(0);
    const ms = results.map((r) => r.ms).sort((a, b) => a - b);
    const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))]!.toFixed(1);
    console.log(
      `${REQUESTS} API requests while ${stuckAttemptsDuringBatch} attempts hung on the stuck receiver: ${Date.now() - started} ms in all, ` +
        `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${ms[ms.length - 1]!.toFixed(1)} ms`,
    );

    // The healthy project's webhook arrived while the stuck receiver still held its first
    // attempts: it did not wait behind the 100 deliveries that hang.
    const delivered = await healthyDelivered;
    console.log(
      `healthy webhook delivered ${delivered.at - started} ms after the batch started; the stuck receiver had then been sent ${delivered.stuckAttemptsBefore} attempts`,
    );
    expect(delivered.stuckAttemptsBefore).toBeLessThan(STUCK_EVENTS);
    const hook = healthy.received.find((w) => w.body?.data?.invoice?.id === healthyInvoice.body.id)!;
    expect(hook.headers['x-service-event']).toBe('invoice.paid');
    expect(validSignature(hook, healthyProject.project.webhookSecret)).toBe(true);
    // No stuck delivery was recorded as answered, and none is lost: each still pending (retried later) or failed.
    const stuckDeliveries = await operator.http.get(`/admin/v1/webhook-deliveries?projectId=${stuckProject.projectId}&limit=100`);
    expectStatus(stuckDeliveries, 200);
    expect(stuckDeliveries.body.items).toHaveLength(STUCK_EVENTS);
    for (const d of stuckDeliveries.body.items as Json[]) expect(d.status).toBe('pending');
  });
});
