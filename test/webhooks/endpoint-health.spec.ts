/**
 * Endpoint health (issue 36, item 4): a webhook endpoint whose deliveries all fail for
 * 3 days in a row on the gateway clock is disabled; the merchant's events say
 * endpoint_disabled; the operator console shows it with a button that re-enables it
 * and sends what is still owed. Attempts that got no status code (no reply in time, a
 * refused connection) are failures too.
 */
import { expectStatus, InvoiceGateway, Json, Merchant, orderId, poll } from '../support/merchant-fixtures';
import { hookedGateway, startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';
import { formTokenOf, login, request } from '../console/console-fixture';
import { randomUUID } from 'node:crypto';
import { disableFailingEndpoints, resendDelivery, resendFailedDeliveries, ResendCutShortError, RETRY_SCHEDULE_SECONDS } from '#payments/webhooks';
import { MAYBE_WRITTEN_MARK, toApiError, wroteNothing } from '../../apps/api/src/http/errors/error.filter';
import { OPERATOR_OPENAPI_DOCUMENT } from '../../apps/api/src/docs/operator-document';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { metric } from '../support/runbooks';

describe('endpoint health', () => {
  let gw: InvoiceGateway;
  let receiver: WebhookReceiver;
  let shop: Merchant;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ gw, receiver, shop, close } = await hookedGateway());
  });
  afterAll(() => close?.());

  const paid = async (): Promise<string> => {
    const created = await shop.test.post('/v1/invoices', { amount: '300.00', orderId: orderId('health'), method: 'sbp' });
    expectStatus(created, 201);
    expectStatus(await gw.operator.payment(created.body.id, 'paid'), 200);
    return created.body.id;
  };
  const events = async (): Promise<Json[]> => (await shop.test.get('/v1/events?limit=100')).body.items;

  it('disables an endpoint failing for 3 days, refuses resends while disabled, and the console button re-enables it and sends what is owed', async () => {
    receiver.answer = () => ({ status: 500, body: 'down' });
    await paid();
    await receiver.waitFor((r) => r.length === 1, 'the first attempt');
    // Every retry of the schedule fails (about 39 hours).
    for (const [i, delay] of RETRY_SCHEDULE_SECONDS.entries()) {
      await gw.operator.advance(delay);
      await receiver.waitFor((r) => r.length === i + 2, `retry ${i + 1}`);
    }
    // Day 2: a new event fails too; the endpoint is still on (2 days of failures).
    await gw.operator.advance(12 * 3600);
    await paid();
    await receiver.waitFor((r) => r.length === RETRY_SCHEDULE_SECONDS.length + 2, 'the second event');
    // The receiver has the attempt before the dispatcher records its outcome: wait for the record.
    const failing = await poll(events, (items) => items.every((e) => e.deliveryStatus !== 'pending'), 'both attempts recorded');
    expect(failing.map((e) => e.deliveryStatus)).toEqual(['failing', 'failing']);
    const history = (await gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${shop.projectId}`)).body.items as Json[];
    const firstFailure = history.flatMap((d) => d.attempts.map((a: Json) => a.at as string)).sort()[0];

    // Past 3 days since the first failure: disabled, the pending retry stopped.
    await gw.operator.advance(24 * 3600);
    await poll(events, (items) => items.every((e) => e.deliveryStatus === 'endpoint_disabled'), 'the endpoint disabled');
    // An event while disabled is recorded as owed, not sent.
    await paid();
    const owed = await poll(events, (items) => items.length === 3, 'the third event');
    expect(owed.map((e) => e.deliveryStatus)).toEqual(['endpoint_disabled', 'endpoint_disabled', 'endpoint_disabled']);
    const deliveries = await gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${shop.projectId}`);
    expect(deliveries.body.items.map((d: Json) => d.status)).toEqual(['failed', 'failed', 'failed']);
    const sent = receiver.received.length;
    const disabledAt = (await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookDisabledAt;
    expect(disabledAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // The operator sees it where the retries and the queue went quiet: one warn line naming the project, the
    // URL's host (not its path or query), when the failures began and the deliveries stopped; and a gauge.
    const disabledLines = gw.gateway
      .output()
      .split('\n')
      .filter((line) => line.includes('webhook endpoint disabled'))
      .map((line) => JSON.parse(line) as Json);
    expect(disabledLines).toEqual([expect.objectContaining({ level: 40, projectId: shop.projectId, host: new URL(receiver.url).host, stoppedDeliveries: 1 })]);
    expect(disabledLines[0]!.failingSince).toBe(firstFailure);
    expect(JSON.stringify(disabledLines[0])).not.toContain(new URL(receiver.url).pathname);
    const scrape = await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.gateway.adminToken}` } });
    expect(metric(await scrape.text(), 'webhook_endpoints_disabled')).toBe(1);

    // Resending one delivery, or the project's failed ones, is refused while disabled (409 conflict, nothing
    // queued): only enabling the endpoint sends again what it is owed.
    receiver.answer = () => ({ status: 200, body: 'ok' });
    const one = deliveries.body.items[0].id;
    for (const path of [`/admin/v1/webhook-deliveries/${one}/resend`, `/admin/v1/projects/${shop.projectId}/webhook-deliveries/resend-failed`]) {
      const refused = await gw.operator.http.post(path, {});
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('conflict');
      expect(refused.body.error.message).toContain(`/admin/v1/projects/${shop.projectId}/webhook-endpoint/enable`);
      expect(refused.body.error.message).toContain('«Включить и отправить долг»');
    }
    const cookie = await login(gw.baseUrl, gw.gateway.adminToken);
    const page = await request(gw.baseUrl, 'GET', `/admin/accounts/${shop.accountId}?mode=test`, { cookie });
    const form = { formToken: formTokenOf(page.html), accountId: shop.accountId, mode: 'test' };
    const resendPressed = await request(gw.baseUrl, 'POST', `/admin/webhook-deliveries/${one}/resend`, { cookie, form });
    expect(resendPressed.status).toBe(409);
    expect(resendPressed.html).toContain('Адрес вебхуков проекта отключён');
    expect(resendPressed.html).toContain('«Включить и отправить долг»');
    const after = await gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${shop.projectId}`);
    expect(after.body.items.map((d: Json) => [d.status, d.nextAttemptAt, d.attempts.length])).toEqual(
      deliveries.body.items.map((d: Json) => ['failed', null, d.attempts.length]),
    );
    expect((await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookDisabledAt).toBe(disabledAt);

    // The console shows it with the button; pressing it re-enables the endpoint and sends the three.
    expect(page.html).toContain('вебхуки отключены');
    const action = `/admin/projects/${shop.projectId}/webhook-endpoint/enable`;
    expect(page.html).toContain(`action="${action}"`);
    const pressed = await request(gw.baseUrl, 'POST', action, { cookie, form });
    expect(pressed.status).toBe(303);
    await receiver.waitFor((r) => r.length === sent + 3, 'the owed deliveries');
    expect(new Set(receiver.received.slice(sent).map((w) => w.body.id))).toEqual(new Set(owed.map((e) => e.id)));
    await poll(events, (items) => items.every((e) => e.deliveryStatus === 'delivered'), 'all delivered');
    expect((await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookDisabledAt).toBeNull();
    const rescrape = await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.gateway.adminToken}` } });
    expect(metric(await rescrape.text(), 'webhook_endpoints_disabled')).toBe(0);
    expect((await request(gw.baseUrl, 'GET', `/admin/accounts/${shop.accountId}?mode=test`, { cookie })).html).not.toContain('вебхуки отключены');
  });

  // A disabled endpoint stayed off after the merchant moved to a working URL: every event after it was recorded
  // failed, never posted, until someone pressed enable (review 90 F4).
  it('a new URL is a new endpoint: a PATCH to another URL turns a disabled endpoint on; the same URL keeps it off', async () => {
    const moved = await startWebhookReceiver();
    try {
      const m = await gw.operator.merchant({ webhookUrl: receiver.url } as never);
      const disabled = async () => (await gw.operator.http.get(`/admin/v1/projects/${m.projectId}`)).body.webhookDisabledAt;
      await gw.db.pool.query('UPDATE projects SET webhook_disabled_at = now() WHERE id = $1', [m.projectId]);
      expectStatus(await gw.operator.http.patch(`/admin/v1/projects/${m.projectId}`, { webhookUrl: receiver.url }), 200);
      expect(await disabled()).not.toBeNull();
      expectStatus(await gw.operator.http.patch(`/admin/v1/projects/${m.projectId}`, { webhookUrl: moved.url }), 200);
      expect(await disabled()).toBeNull();
      const created = await m.test.post('/v1/invoices', { amount: '300.00', orderId: orderId('moved'), method: 'sbp' });
      expectStatus(await gw.operator.payment(created.body.id, 'paid'), 200);
      await moved.waitFor((r) => r.some((w) => w.body?.data?.invoice?.id === created.body.id), 'the webhook at the new URL');
    } finally {
      await moved.close();
    }
  });

  it('enabling an endpoint that is not disabled leaves its failing streak as it is: still disabled 3 days after the first failure', async () => {
    receiver.answer = () => ({ status: 500, body: 'down' });
    const base = receiver.received.length;
    await paid();
    await receiver.waitFor((r) => r.length === base + 1, 'the first attempt');
    // Half a day of failed retries, then the operator presses enable "to be safe": nothing is disabled, nothing failed to resend.
    const early = RETRY_SCHEDULE_SECONDS.slice(0, -1);
    for (const [i, delay] of early.entries()) {
      await gw.operator.advance(delay);
      await receiver.waitFor((r) => r.length === base + i + 2, `retry ${i + 1}`);
    }
    const enabled = await gw.operator.http.post(`/admin/v1/projects/${shop.projectId}/webhook-endpoint/enable`, {});
    expect(enabled.status).toBe(202);
    expect(enabled.body).toEqual({ projectId: shop.projectId, resent: 0 });
    // The last retry fails (day 2), a new event on day 2 fails and is retried past 3 days since the first failure.
    await gw.operator.advance(RETRY_SCHEDULE_SECONDS[RETRY_SCHEDULE_SECONDS.length - 1]!);
    await receiver.waitFor((r) => r.length === base + RETRY_SCHEDULE_SECONDS.length + 1, 'the last retry');
    await gw.operator.advance(12 * 3600);
    await paid();
    await receiver.waitFor((r) => r.length === base + RETRY_SCHEDULE_SECONDS.length + 2, 'the second event');
    await gw.operator.advance(24 * 3600);
    const project = await poll(
      async () => (await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body,
      (p: Json) => p.webhookDisabledAt !== null,
      'the endpoint disabled 3 days after its first failure, not 3 days after the enable',
    );
    expect(project.webhookDisabledAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });
});

describe('endpoint health of a receiver that never answers', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** Until a session of this database waits for a lock (`what` names it). */
  const someoneWaitsForALock = (what: string) =>
    poll(
      async () =>
        (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))
          .rows[0]!.n,
      (n) => n > 0,
      what,
    );

  /** A project whose one delivery is still being retried, with an attempt a day for `days` days, each ending as `attempt` says. */
  async function retriedProject(now: Date, days: number, attempt: { status: number | null; error: string | null }): Promise<string> {
    const account = randomUUID();
    const project = randomUUID();
    const delivery = randomUUID();
    const daysAgo = (n: number) => new Date(now.getTime() - n * 86_400_000);
    await db.pool.query(`INSERT INTO accounts (id, name, email, created_at) VALUES ($1, 'Магазин', 'shop@example.com', $2)`, [account, daysAgo(days + 1)]);
    await db.pool.query(
      `INSERT INTO projects (id, account_id, name, status, webhook_url, webhook_events, usdt_enabled, hold_hours, methods, customer_fee_share,
                             webhook_secret, id_namespace, created_at, updated_at)
       VALUES ($1, $2, 'Магазин', 'active', 'https://shop.example/hooks', '{}', false, 0, '{}', 0, 'sealed:v1:test', $3, $4, $4)`,
      [project, account, randomUUID(), daysAgo(days + 1)],
    );
    await db.pool.query(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, 'https://shop.example/hooks', '{}', true, 'pending', $4, $5, $6)`,
      [delivery, randomUUID(), project, days + 1, now, daysAgo(days)],
    );
    await db.pool.query(
      `INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base)
       SELECT id, seq, url, next_attempt_at, attempts_made, 0 FROM webhook_deliveries WHERE id = $1`,
      [delivery],
    );
    for (let n = 0; n <= days; n++) {
      await db.pool.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error) VALUES ($1, $2, $3, $4, NULL, 10000, $5)`,
        [delivery, n + 1, daysAgo(days - n), attempt.status, attempt.error],
      );
    }
    return project;
  }

  it('counts attempts without a status code (no reply in time, connection refused) as failed: 4 days of them disable the endpoint', async () => {
    const now = new Date('2025-06-10T12:00:00Z');
    const silent = await retriedProject(now, 4, { status: null, error: 'no reply within 10 s' });
    const refused = await retriedProject(now, 4, { status: null, error: 'connect ECONNREFUSED 203.0.113.7:443' });
    const failing = await retriedProject(now, 4, { status: 500, error: null });
    const recent = await retriedProject(now, 2, { status: null, error: 'no reply within 10 s' });
    expect(new Set((await disableFailingEndpoints(db.pool, now)).map((d) => d.projectId))).toEqual(new Set([silent, refused, failing]));
    const { rows } = await db.pool.query<{ id: string; disabled: boolean }>(
      'SELECT id, webhook_disabled_at IS NOT NULL AS disabled FROM projects WHERE id = $1',
      [recent],
    );
    expect(rows).toEqual([{ id: recent, disabled: false }]);
  });

  it('does not count attempts at a URL the project no longer uses: a new endpoint starts with no failures', async () => {
    const now = new Date('2025-06-11T12:00:00Z');
    const moved = await retriedProject(now, 4, { status: 500, error: null });
    const stayed = await retriedProject(now, 4, { status: 500, error: null });
    // The merchant changed the URL (PATCH webhookUrl); the old URL's retries go on as queued.
    await db.pool.query(`UPDATE projects SET webhook_url = 'https://shop.example/new-hooks' WHERE id = $1`, [moved]);
    const disabled = (await disableFailingEndpoints(db.pool, now)).map((d) => d.projectId);
    expect(disabled).toContain(stayed);
    expect(disabled).not.toContain(moved);
  });

  it('does not count attempts at a URL from before the project last changed to it: a URL changed back starts afresh', async () => {
    const now = new Date('2025-06-12T12:00:00Z');
    const daysAgo = (n: number) => new Date(now.getTime() - n * 86_400_000);
    const back = await retriedProject(now, 4, { status: 500, error: null });
    // Its URL moved away on day -3 and back on day -1: of its failed attempts (daily, days -4 to 0) only day 0's counts.
    await db.pool.query(
      `INSERT INTO project_webhook_settings (project_id, valid_from, webhook_url, webhook_events)
       VALUES ($1, $2, 'https://shop.example/hooks', '{}'), ($1, $3, 'https://shop.example/elsewhere', '{}'), ($1, $4, 'https://shop.example/hooks', '{}')`,
      [back, daysAgo(5), daysAgo(3), daysAgo(1)],
    );
    const control = await retriedProject(now, 4, { status: 500, error: null });
    const disabled = (await disableFailingEndpoints(db.pool, now)).map((d) => d.projectId);
    expect(disabled).toContain(control);
    expect(disabled).not.toContain(back);
  });

  it("a resend to the project's new URL does not bring the old URL's failures: the new endpoint starts with none", async () => {
    const now = new Date('2025-06-13T12:00:00Z');
    const daysAgo = (n: number) => new Date(now.getTime() - n * 86_400_000);
    // The URL changed 4.5 days ago; the delivery queued before went on failing at the old URL for 4 days, then ended.
    const moved = await retriedProject(now, 4, { status: 500, error: null });
    await db.pool.query(`UPDATE projects SET webhook_url = 'https://shop.example/new-hooks' WHERE id = $1`, [moved]);
    await db.pool.query(
      `INSERT INTO project_webhook_settings (project_id, valid_from, webhook_url, webhook_events) VALUES ($1, $2, 'https://shop.example/new-hooks', '{}')`,
      [moved, daysAgo(4.5)],
    );
    await db.pool.query(`DELETE FROM webhook_queue q USING webhook_deliveries d WHERE q.id = d.id AND d.project_id = $1`, [moved]);
    await db.pool.query(`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL WHERE project_id = $1`, [moved]);

    // The operator resends it: it goes to the new URL, which has failed nothing yet.
    expect(await resendFailedDeliveries(db.pool, moved, now)).toBe(1);
    const { rows } = await db.pool.query<{ url: string }>('SELECT url FROM webhook_deliveries WHERE project_id = $1', [moved]);
    expect(rows).toEqual([{ url: 'https://shop.example/new-hooks' }]);
    expect((await disableFailingEndpoints(db.pool, now)).map((d) => d.projectId)).not.toContain(moved);
  });

  /** A project with seven failed deliveries, and a trigger run by each batch's queue insert (its body: plpgsql statements over `new_rows`). */
  async function failedProjectWithTrigger(now: Date, body: string): Promise<{ project: string; drop: () => Promise<void> }> {
    const project = await retriedProject(now, 1, { status: 500, error: null });
    await db.pool.query(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, next_attempt_at, created_at)
       SELECT gen_random_uuid(), gen_random_uuid(), 'invoice.paid', $1, 'https://shop.example/hooks', '{}', true, 'failed', 7, NULL, $2
       FROM generate_series(1, 7)`,
      [project, new Date(now.getTime() - 86_400_000)],
    );
    await db.pool.query(`CREATE TABLE batches_run (tx xid8, rows int)`);
    await db.pool.query(`CREATE FUNCTION after_batch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body} RETURN NULL; END $$`);
    await db.pool.query(
      `CREATE TRIGGER after_batch AFTER INSERT ON webhook_queue REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION after_batch()`,
    );
    const drop = async () => {
      await db.pool.query(`DROP TRIGGER IF EXISTS after_batch ON webhook_queue; DROP FUNCTION IF EXISTS after_batch(); DROP TABLE IF EXISTS batches_run`);
    };
    return { project, drop };
  }

  it("resends a project's failed deliveries in batches, each batch a statement and a transaction of its own", async () => {
    // One statement of them all passed the statement timeout past a million or so (a month
    // of failures of a busy endpoint): the endpoint could then never be re-enabled.
    const now = new Date('2025-06-14T12:00:00Z');
    // Rows each statement puts in the queue, by transaction.
    const { project, drop } = await failedProjectWithTrigger(now, `INSERT INTO batches_run SELECT pg_current_xact_id(), count(*) FROM new_rows;`);
    try {
      expect(await resendFailedDeliveries(db.pool, project, now, { batch: 3 })).toBe(7);
      const statements = await db.pool.query<{ tx: string; rows: number }>(`SELECT tx::text, rows FROM batches_run WHERE rows > 0`);
      expect(statements.rows.map((r) => r.rows)).toEqual([3, 3, 1]);
      expect(new Set(statements.rows.map((r) => r.tx)).size).toBe(3);
      const left = await db.pool.query(`SELECT 1 FROM webhook_deliveries WHERE project_id = $1 AND status = 'failed'`, [project]);
      expect(left.rows).toEqual([]);
    } finally {
      await drop();
    }
  });

  // A later batch's failure was answered as a lost connection (the marked 503's text), also the refusal of an
  // endpoint disabled meanwhile, whose 409 says what to do.
  it('a later batch that finds the endpoint disabled meanwhile is refused (conflict), as the first would be', async () => {
    const now = new Date('2025-06-15T12:00:00Z');
    // The health check disables the endpoint once the first batch is queued (in its transaction, here).
    const { project, drop } = await failedProjectWithTrigger(now, `UPDATE projects SET webhook_disabled_at = now() WHERE webhook_disabled_at IS NULL;`);
    try {
      await expect(resendFailedDeliveries(db.pool, project, now, { batch: 3 })).rejects.toMatchObject({
        code: 'conflict',
        message: expect.stringContaining('отключён'),
      });
      // The first batch stays resent: the operator document of both routes that resend says so (it said "nothing sent",
      // and enable listed no 409).
      expect((await db.pool.query(`SELECT 1 FROM webhook_deliveries WHERE project_id = $1 AND status = 'failed'`, [project])).rowCount).toBe(4);
      for (const path of ['/projects/{id}/webhook-deliveries/resend-failed', '/projects/{id}/webhook-endpoint/enable']) {
        const conflict = (OPERATOR_OPENAPI_DOCUMENT.paths[path]!.post!.responses as Record<string, { description: string }>)['409'];
        expect({ path, description: conflict?.description }).toEqual({ path, description: expect.stringContaining('уже снова в очереди') });
      }
    } finally {
      await drop();
    }
  });

  it('a later batch that fails otherwise: the batches before it stay resent, told as such (the marked 503), and a repeat resends the rest', async () => {
    const now = new Date('2025-06-16T12:00:00Z');
    const { project, drop } = await failedProjectWithTrigger(
      now,
      `INSERT INTO batches_run VALUES (NULL, 0); IF (SELECT count(*) FROM batches_run) = 2 THEN RAISE EXCEPTION 'the second batch fails'; END IF;`,
    );
    try {
      const failure = await resendFailedDeliveries(db.pool, project, now, { batch: 3 }).then(
        () => null,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(ResendCutShortError);
      expect((failure as ResendCutShortError).resent).toBe(3);
      const answer = toApiError(failure);
      expect(answer.status).toBe(503);
      expect(answer.body().error.message).toContain(MAYBE_WRITTEN_MARK);
      expect(answer.body().error.message).toContain('не меньше 3 доставок');
      expect(wroteNothing(failure)).toBe(false);
      const left = async () => (await db.pool.query(`SELECT 1 FROM webhook_deliveries WHERE project_id = $1 AND status = 'failed'`, [project])).rowCount;
      expect(await left()).toBe(4);
      await drop();
      expect(await resendFailedDeliveries(db.pool, project, now, { batch: 3 })).toBe(4);
      expect(await left()).toBe(0);
    } finally {
      await drop();
    }
  });

  // The health check's update locked the project's pending deliveries in scan order, a batch of attempt records locks
  // them in id order: the two deadlocked, and a record batch aborted so lost its attempts (made again, to every
  // merchant of the batch).
  it('stops the pending deliveries locking them in id order, as a batch of records does: the two never deadlock', async () => {
    const now = new Date('2025-06-12T12:00:00Z');
    const project = await retriedProject(now, 4, { status: 500, error: null });
    // Queued in this order: the later id first (a scan by the project's seq meets it first).
    const [high, low] = ['ffffffff-ffff-4fff-bfff-ffffffffffff', '00000000-0000-4000-8000-000000000001'];
    for (const id of [high, low]) {
      await db.pool.query(
        `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, next_attempt_at, created_at)
         VALUES ($1, $2, 'invoice.paid', $3, 'https://shop.example/hooks', '{}', true, 'pending', 1, $4, $4)`,
        [id, randomUUID(), project, now],
      );
      await db.pool.query(
        `INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base) SELECT id, seq, url, next_attempt_at, 1, 0 FROM webhook_deliveries WHERE id = $1`,
        [id],
      );
    }
    // A batch of records: the lower id locked, then the higher, in one transaction.
    const batch = await db.pool.connect();
    try {
      await batch.query('BEGIN');
      await batch.query('SELECT id FROM webhook_deliveries WHERE id = $1 FOR NO KEY UPDATE', [low]);
      const health = disableFailingEndpoints(db.pool, now);
      await someoneWaitsForALock('the health check waiting for the batch');
      await batch.query('SELECT id FROM webhook_deliveries WHERE id = $1 FOR NO KEY UPDATE', [high]);
      await batch.query('COMMIT');
      expect(await health).toEqual([expect.objectContaining({ projectId: project, stoppedDeliveries: 3 })]);
    } finally {
      batch.release();
    }
  });

  it('a resend that commits while the health check waits for the project is stopped with the others: nothing stays queued against a disabled endpoint', async () => {
    const now = new Date('2025-06-13T12:00:00Z');
    const project = await retriedProject(now, 4, { status: 500, error: null });
    // A second delivery of the project, failed for good (not queued): the operator resends it.
    const failed = randomUUID();
    await db.pool.query(
      `INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, attempts_made, next_attempt_at, created_at)
       VALUES ($1, $2, 'invoice.paid', $3, 'https://shop.example/hooks', '{}', true, 'failed', 7, NULL, $4)`,
      [failed, randomUUID(), project, new Date(now.getTime() - 4 * 86_400_000)],
    );
    // The resend's statement holds the project for share (its transaction kept open to order the two runs).
    const resending = await db.pool.connect();
    try {
      await resending.query('BEGIN');
      expect(await resendDelivery(resending, failed, now)).toMatchObject({ id: failed });
      const health = disableFailingEndpoints(db.pool, now);
      await someoneWaitsForALock('the health check waiting for the project');
      await resending.query('COMMIT');
      expect(await health).toEqual([expect.objectContaining({ projectId: project, host: 'shop.example', stoppedDeliveries: 2 })]);
    } finally {
      resending.release();
    }
    const { rows } = await db.pool.query(
      `SELECT d.status, d.next_attempt_at, q.id IS NOT NULL AS queued FROM webhook_deliveries d LEFT JOIN webhook_queue q ON q.id = d.id WHERE d.project_id = $1`,
      [project],
    );
    expect(rows).toEqual([
      { status: 'failed', next_attempt_at: null, queued: false },
      { status: 'failed', next_attempt_at: null, queued: false },
    ]);
  });
});
