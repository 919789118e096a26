/**
 * Retention (issue 12, item 5), on the manual clock, against a running gateway whose
 * projector sweeps every few seconds: a finished webhook delivery (delivered, or
 * failed for good) goes with its attempts once its last attempt is older than
 * WEBHOOK_RETENTION_DAYS; pending ones and recently attempted ones stay; a replay of
 * the outbox does not enqueue (and send) a swept delivery again; used signatures go
 * after their 10-minute window, also when no request comes.
 */
import { randomUUID } from 'node:crypto';
import { expectStatus, InvoiceGateway, Json, Merchant, orderId, poll, sleep, startInvoiceGateway } from '../support/merchant-fixtures';
import { startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';
import { SIGNATURE_REUSE_WINDOW_SECONDS } from '#payments/access';

const DAY = 86_400;

describe('retention of the webhook history and of used signatures (WEBHOOK_RETENTION_DAYS=2, CLOCK=manual)', () => {
  let gw: InvoiceGateway;
  let hooks: WebhookReceiver;
  let failing: WebhookReceiver;

  beforeAll(async () => {
    // CLOCK=manual: the retention's days pass through the operator's clock. WEBHOOK_ALLOW_PRIVATE_NETWORKS: the receiver
    // listens on 127.0.0.1. WEBHOOK_RETENTION_DAYS=2: what the test checks.
    gw = await startInvoiceGateway({ CLOCK: 'manual', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETENTION_DAYS: '2' });
    hooks = await startWebhookReceiver();
    failing = await startWebhookReceiver();
    failing.answer = () => ({ status: 500, body: 'down' });
  });
  afterAll(async () => {
    await hooks?.close();
    await failing?.close();
    await gw?.close();
  });

  const deliveriesOf = async (projectId: string): Promise<Json[]> => {
    const r = await gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${projectId}`);
    expectStatus(r, 200);
    return r.body.items;
  };
  const hooked = async (url: string): Promise<Merchant> => gw.operator.merchant({ name: 'Хранение', holdHours: 0, webhookUrl: url } as never);
  const paidInvoice = async (m: Merchant): Promise<string> => {
    const r = await m.test.post('/v1/invoices', { amount: '100.00', method: 'sbp', orderId: orderId('keep') });
    expectStatus(r, 201);
    expectStatus(await gw.operator.payment(r.body.id, 'paid'), 200);
    return r.body.id;
  };
  const count = async (sql: string, params: unknown[]): Promise<number> => Number((await gw.db.pool.query(sql, params)).rows[0].n);

  /** A finished delivery written straight into the queue, enqueued and attempted `ageSeconds` before `now`. */
  async function oldDelivery(
    projectId: string,
    status: 'delivered' | 'failed',
    now: Date,
    ageSeconds: number,
    lastAttemptAgeSeconds = ageSeconds,
  ): Promise<string> {
    const id = randomUUID();
    const at = (age: number) => new Date(now.getTime() - age * 1000);
    await gw.db.pool.query(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, 'https://shop.example/hooks', '{}', true, $4, 2, NULL, $5)`,
      [id, randomUUID(), projectId, status, at(ageSeconds)],
    );
    await gw.db.pool.query(
      `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error)
       VALUES ($1, 1, $2, 500, 'x', 3, NULL), ($1, 2, $3, $4, 'y', 3, NULL)`,
      [id, at(ageSeconds), at(lastAttemptAgeSeconds), status === 'delivered' ? 200 : 500],
    );
    return id;
  }

  it('sweeps finished deliveries with their attempts after the period, keeps pending and recently attempted ones, and a replay of the outbox sends nothing again', async () => {
    const kept = await hooked(hooks.url);
    const invoiceId = await paidInvoice(kept);
    await hooks.waitFor((all) => all.some((w) => w.body?.data?.invoice?.id === invoiceId), 'the webhook');
    const [delivered] = await poll(
      () => deliveriesOf(kept.projectId),
      (items) => items.length === 1 && items[0].status === 'delivered',
      'the delivered delivery',
    );
    const stuck = await hooked(failing.url);
    await paidInvoice(stuck);
    await poll(
      () => deliveriesOf(stuck.projectId),
      (items) => items.length === 1 && items[0].attempts.length === 1,
      'the first failed attempt',
    );

    const now = await gw.operator.advance(0);
    const oldFailed = await oldDelivery(kept.projectId, 'failed', now, 3 * DAY);
    const resentLately = await oldDelivery(kept.projectId, 'delivered', now, 3 * DAY, 60);
    const young = await oldDelivery(kept.projectId, 'delivered', now, DAY);

    // Day 0: only the one past the period goes (with its attempts).
    await poll(
      () => count('SELECT count(*) AS n FROM webhook_deliveries WHERE id = $1', [oldFailed]),
      (n) => n === 0,
      'the old failed delivery to be swept',
      20_000,
    );
    expect(await count('SELECT count(*) AS n FROM webhook_attempts WHERE delivery_id = $1', [oldFailed])).toBe(0);
    for (const id of [resentLately, young, delivered.id]) expect(await count('SELECT count(*) AS n FROM webhook_deliveries WHERE id = $1', [id])).toBe(1);

    // 2.5 days later every finished delivery is past the period; the pending one stays (its
    // endpoint, failing for less than 3 days, is not disabled: endpoint-health.spec.ts).
    await gw.operator.advance(2.5 * DAY);
    await poll(
      () => deliveriesOf(kept.projectId),
      (items) => items.length === 0,
      'every finished delivery of the project to be swept',
      20_000,
    );
    expect(await count('SELECT count(*) AS n FROM webhook_attempts WHERE delivery_id = ANY($1::uuid[])', [[delivered.id, resentLately, young]])).toBe(0);
    const pending = await deliveriesOf(stuck.projectId);
    expect(pending).toHaveLength(1);
    expect(pending[0].status).toBe('pending');

    // The outbox follows the log again from the start (a replay, a rebuild): the swept delivery is not enqueued again, nor sent.
    const received = hooks.received.length;
    const applied = await count(`SELECT events_applied AS n FROM projection_checkpoints WHERE projection = 'webhook_outbox'`, []);
    expect(applied).toBeGreaterThan(0);
    await gw.db.pool.query(
      `UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0, events_applied = 0 WHERE projection = 'webhook_outbox'`,
    );
    // The running outbox notices the reset at its next batch (its compare-and-set fails) and starts over from zero.
    await paidInvoice(await gw.operator.merchant({ name: 'Без вебхуков' }));
    await poll(
      () => count(`SELECT events_applied AS n FROM projection_checkpoints WHERE projection = 'webhook_outbox'`, []),
      (n) => n > applied,
      'the outbox to read the log again',
      20_000,
    );
    await sleep(1000);
    expect(await deliveriesOf(kept.projectId)).toEqual([]);
    expect(hooks.received).toHaveLength(received);
  });

  it('forgets used signatures after their 11 minutes without any request coming', async () => {
    const now = await gw.operator.advance(0);
    const old = `${randomUUID()}-old`;
    const recent = `${randomUUID()}-recent`;
    await gw.db.pool.query('INSERT INTO used_signatures (signature, used_at) VALUES ($1, $2), ($3, $4)', [
      old,
      new Date(now.getTime() - (SIGNATURE_REUSE_WINDOW_SECONDS + 1) * 1000),
      recent,
      new Date(now.getTime() - (SIGNATURE_REUSE_WINDOW_SECONDS - 60) * 1000),
    ]);
    await poll(
      () => count('SELECT count(*) AS n FROM used_signatures WHERE signature = $1', [old]),
      (n) => n === 0,
      'the old signature to be forgotten',
      20_000,
    );
    expect(await count('SELECT count(*) AS n FROM used_signatures WHERE signature = $1', [recent])).toBe(1);
  });
});
