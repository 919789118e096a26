/**
 * Observability, end to end on a started gateway: the request id of every answer
 * (header and log line), the Prometheus text at /metrics (requests per route
 * pattern, projection lag, webhook queue, command conflicts under a real burst),
 * readiness with each projection's lag, the METRICS_PORT listener of a projector-only
 * process, gauges left out while their database refuses connections; and, in process,
 * the hooks the metrics hang on.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { loadConfig } from '#payments/composition';
import { EventStore, handleCommand, observeCommands, RecordedEvent, StreamNotFoundError, WrongExpectedRevisionError } from '#event-store';
import { readiness } from '../../apps/api/src/health/readiness';
import { startGateway, startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import {
  ADMIN_TOKEN,
  api,
  expectError,
  expectStatus,
  InvoiceGateway,
  Json,
  Merchant,
  orderId,
  poll,
  Reply,
  startInvoiceGateway,
  UUID,
} from '../support/merchant-fixtures';
import { paidInvoice } from '../support/money-out-fixtures';
import { after, docSection } from '../support/runbooks';
import { createTestDatabase } from '../support/test-database';
import { startWebhookReceiver, WebhookReceiver } from '../support/webhook-receiver';

// ---------------------------------------------------------------------------------
// The Prometheus text exposition format, parsed strictly enough to catch a broken line.

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/;

function parseExposition(text: string): Sample[] {
  expect(text.endsWith('\n')).toBe(true);
  const samples: Sample[] = [];
  const typed = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      if (type) typed.set(type[1]!, type[2]!);
      else if (!/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*$/.test(line)) throw new Error(`not a HELP or TYPE line: ${line}`);
      continue;
    }
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    let rest = match[2] ?? '';
    while (rest !== '') {
      const label = LABEL.exec(rest);
      if (!label) throw new Error(`bad labels in: ${line}`);
      labels[label[1]!] = label[2]!;
      rest = rest.slice(label[0].length);
    }
    const raw = match[3]!;
    // Go's ParseFloat, as Prometheus reads it: NaN and Inf in any case (prom-client writes "Nan").
    const special: Record<string, number> = { nan: NaN, inf: Infinity, '+inf': Infinity, '-inf': -Infinity };
    const value = raw.toLowerCase() in special ? special[raw.toLowerCase()]! : Number(raw);
    if (Number.isNaN(value) && raw.toLowerCase() !== 'nan') throw new Error(`bad value in: ${line}`);
    const family = match[1]!.replace(/_(bucket|sum|count)$/, '');
    if (!typed.has(match[1]!) && !typed.has(family)) throw new Error(`sample without a TYPE: ${line}`);
    samples.push({ name: match[1]!, labels, value });
  }
  return samples;
}

/** The samples of `name` whose labels include `labels`. */
const series = (samples: readonly Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

/** The one sample of `name` with exactly these labels, or undefined. */
const valueOf = (samples: readonly Sample[], name: string, labels: Record<string, string>): number | undefined => {
  const found = samples.filter(
    (s) => s.name === name && Object.keys(s.labels).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  expect(found.length).toBeLessThanOrEqual(1);
  return found[0]?.value;
};

/** Sum over the samples of `name` matching `labels`. */
const total = (samples: readonly Sample[], name: string, labels: Record<string, string> = {}) =>
  series(samples, name, labels).reduce((sum, s) => sum + s.value, 0);

/** JSON log lines of a process's output (other lines skipped). */
const logLines = (output: string): Json[] =>
  output
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });

const REFUND_PROCESSING_SECONDS = 3600;

describe('observability of a running gateway (API + projector in one process)', () => {
  let gw: InvoiceGateway;
  let hooks: WebhookReceiver;
  let merchant: Merchant;
  let metricsPortUrl: string;

  beforeAll(async () => {
    hooks = await startWebhookReceiver();
    // "A transaction left open on the cluster" holds its horizon: on a server of its own (test/support/test-database.ts says why).
    gw = await startInvoiceGateway(
      {
        METRICS_PORT: '0',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        REFUND_PROCESSING_SECONDS: String(REFUND_PROCESSING_SECONDS),
      },
      'gateway',
      { serverOfItsOwn: true },
    );
    const [, url] = await gw.gateway.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)\/metrics/);
    metricsPortUrl = url!;
    const account = await gw.operator.createAccount();
    const project = await gw.operator.http.post('/admin/v1/projects', { accountId: account, name: 'Магазин', holdHours: 0, webhookUrl: hooks.url });
    expectStatus(project, 201);
    merchant = gw.operator.clientsOf(account, project.body, project.body.keys);
  });

  afterAll(async () => {
    await gw?.close();
    await hooks?.close();
  });

  const scrape = async (): Promise<Sample[]> => {
    const r = await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await r.text());
  };

  const projectionNames = async (): Promise<string[]> => {
    const ready = await api(gw.baseUrl, ADMIN_TOKEN).get('/health/ready');
    expectStatus(ready, 200);
    return (ready.body.projections as Json[]).map((p) => p.projection as string);
  };

  describe('X-Request-Id', () => {
    it('every answer has one, unique: success, 404, 400 validation, 400 bad URL, 415, 401', async () => {
      const anonymous = api(gw.baseUrl);
      const replies: [string, Reply, number][] = [
        ['success', await merchant.test.get('/v1/methods'), 200],
        ['unknown route', await anonymous.get('/v1/nothing-here'), 404],
        ['unknown invoice', await merchant.test.get(`/v1/invoices/${randomUUID()}`), 404],
        ['validation', await merchant.test.post('/v1/invoices', { amount: 'много', orderId: orderId() }), 400],
        [
          'malformed JSON',
          await merchant.test.raw('POST', '/v1/invoices', {
            body: '{"amount":',
            headers: { authorization: `Bearer ${merchant.keys.test.secretKey}`, 'content-type': 'application/json' },
          }),
          400,
        ],
        ['bad URL', await anonymous.get('/v1/invoices/%E0%A4%A'), 400],
        ['not JSON', await merchant.test.raw('POST', '/v1/invoices', { body: 'amount=1', headers: { 'content-type': 'text/plain' } }), 415],
        ['no key', await anonymous.get('/v1/invoices'), 401],
        ['health', await anonymous.get('/health/live'), 200],
      ];
      const ids = replies.map(([what, reply, status]) => {
        expect({ what, status: reply.status }).toEqual({ what, status });
        const id = reply.headers.get('x-request-id');
        expect({ what, id }).toEqual({ what, id: expect.stringMatching(UUID) });
        return id;
      });
      expect(new Set(ids).size).toBe(ids.length);
      // The error bodies are still the spec's.
      expectError(replies[7]![1], 401, 'unauthorized');
      expectError(replies[6]![1], 415, 'unsupported_media_type');
    });

    it('a sane id sent by the client is echoed; a malformed or oversized one is replaced by a fresh UUID', async () => {
      const send = (id: string) => api(gw.baseUrl).raw('GET', '/v1/nothing-here', { headers: { 'x-request-id': id } });
      for (const sane of ['trace-1', 'abc.DEF:123-xyz_0', 'a'.repeat(128), randomUUID()]) {
        const r = await send(sane);
        expect(r.status).toBe(404);
        expect(r.headers.get('x-request-id')).toBe(sane);
      }
      for (const malformed of ['has space', 'a'.repeat(129), '<script>', 'semi;colon', 'quote"d', 'slash/id', 'plus+id']) {
        const r = await send(malformed);
        expect(r.status).toBe(404);
        expect(r.headers.get('x-request-id')).toMatch(UUID);
      }
      // Echoed on an error answered in a hook too.
      const hooked = await api(gw.baseUrl).raw('POST', '/v1/invoices', { body: 'x', headers: { 'content-type': 'text/plain', 'x-request-id': 'hook-415' } });
      expect(hooked.status).toBe(415);
      expect(hooked.headers.get('x-request-id')).toBe('hook-415');
    });

    it('the request line of the log carries the id, with method, route pattern, status and duration', async () => {
      const id = `log-probe-${randomUUID()}`;
      const invoiceId = randomUUID();
      const r = await merchant.test.raw('GET', `/v1/invoices/${invoiceId}`, {
        headers: { authorization: `Bearer ${merchant.keys.test.secretKey}`, 'x-request-id': id },
      });
      expect(r.status).toBe(404);
      const line = await poll(
        async () => logLines(gw.gateway.output()).find((l) => l.requestId === id),
        (l) => l !== undefined,
        'the log line of the request',
      );
      expect(line).toMatchObject({ level: 30, msg: 'request', requestId: id, method: 'GET', route: '/v1/invoices/:id', status: 404 });
      expect(typeof line.durationMs).toBe('number');
      // One line per request, and the raw URL (with the id) is not the route.
      expect(logLines(gw.gateway.output()).filter((l) => l.requestId === id)).toHaveLength(1);
      expect(JSON.stringify(line)).not.toContain(invoiceId);
    });
  });

  describe('/metrics', () => {
    it('asks for the operator token on the API port, and answers in the error shape with a request id', async () => {
      const none = await api(gw.baseUrl).get('/metrics');
      expectError(none, 401, 'unauthorized');
      expect(none.headers.get('x-request-id')).toMatch(UUID);
      const wrong = await api(gw.baseUrl, 'not-the-operator-token').get('/metrics');
      expectError(wrong, 401, 'unauthorized');
    });

    it('counts requests per route pattern (never the raw URL) with their status, and unknown routes as "unmatched"', async () => {
      const before = await scrape();
      const key = { method: 'GET', route: '/v1/invoices/:id', status: '404' };
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      for (const id of ids) expectError(await merchant.test.get(`/v1/invoices/${id}`), 404, 'invoice_not_found');
      const created = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), method: 'sbp' });
      expectStatus(created, 201);
      for (let i = 0; i < 2; i++) await api(gw.baseUrl).get(`/v1/no-such-route-${randomUUID()}`);
      const after = await scrape();

      const delta = (labels: Record<string, string>) =>
        (valueOf(after, 'http_requests_total', labels) ?? 0) - (valueOf(before, 'http_requests_total', labels) ?? 0);
      expect(delta(key)).toBe(3);
      expect(delta({ method: 'POST', route: '/v1/invoices', status: '201' })).toBe(1);
      expect(delta({ method: 'GET', route: 'unmatched', status: '404' })).toBe(2);
      const durations = (s: Sample[]) => valueOf(s, 'http_request_duration_seconds_count', { method: 'GET', route: '/v1/invoices/:id' }) ?? 0;
      expect(durations(after) - durations(before)).toBe(3);
      const buckets = series(after, 'http_request_duration_seconds_bucket', { method: 'GET', route: '/v1/invoices/:id' });
      expect(buckets.find((b) => b.labels.le === '+Inf')?.value).toBe(durations(after));

      // No label value is a raw URL: every route is a pattern or "unmatched".
      const routes = new Set(series(after, 'http_requests_total').map((s) => s.labels.route));
      for (const route of routes) expect(route === 'unmatched' || /^\/[a-z0-9/:_.-]*$/i.test(route!)).toBe(true);
      for (const id of [...ids, created.body.id]) expect([...routes].some((r) => r!.includes(id))).toBe(false);
      expect([...routes].some((r) => r!.includes('no-such-route'))).toBe(false);
      // Default process metrics are there too.
      expect(series(after, 'process_cpu_user_seconds_total')).toHaveLength(1);
    });

    it('shows the lag of every projection, which comes back to zero once the projector caught up', async () => {
      const names = await projectionNames();
      expect(names).toEqual(expect.arrayContaining(['stream_catalog', 'ledger', 'invoices', 'refunds', 'payouts', 'webhook_outbox']));
      // The invoices created above reached the read models through this process's
      // runners. (A committed event joins the visible log only once every older
      // transaction of the cluster has ended, and other test files share the cluster:
      // until then the lag is 0 without it, so wait for both.)
      const settled = await poll(
        scrape,
        (s) =>
          names.every((projection) => valueOf(s, 'projection_lag_events', { projection }) === 0) &&
          (valueOf(s, 'projection_events_applied_total', { projection: 'invoices' }) ?? 0) > 0,
        'every projection at the head of the log, the invoices applied',
      );
      expect(new Set(series(settled, 'projection_lag_events').map((s) => s.labels.projection))).toEqual(new Set(names));
      for (const projection of names) {
        expect(valueOf(settled, 'projection_events_applied_total', { projection })).toBeGreaterThanOrEqual(0);
        expect(valueOf(settled, 'projection_batch_failures_total', { projection })).toBe(0);
      }
    });

    it('shows the webhook queue depth and the outcomes of delivery attempts', async () => {
      const before = await scrape();
      expect(valueOf(before, 'webhook_queue_depth', { status: 'pending' })).toEqual(expect.any(Number));
      expect(valueOf(before, 'webhook_queue_depth', { status: 'due' })).toEqual(expect.any(Number));
      const delivered = (s: Sample[]) => valueOf(s, 'webhook_attempts_total', { outcome: 'delivered' }) ?? 0;

      const invoiceId = await paidInvoice(gw.operator, merchant.test, '100.00');
      await hooks.waitFor((r) => r.some((w) => w.headers['x-service-event'] === 'invoice.paid' && w.body?.data?.invoice?.id === invoiceId), 'invoice.paid');
      const after = await poll(
        scrape,
        (s) => delivered(s) > delivered(before) && valueOf(s, 'webhook_queue_depth', { status: 'pending' }) === 0,
        'the delivery counted and the queue empty',
      );
      expect(delivered(after)).toBeGreaterThan(delivered(before));
      expect(valueOf(after, 'webhook_attempts_total', { outcome: 'failed' })).toBe(0);
      expect(valueOf(after, 'webhook_queue_depth', { status: 'due' })).toBe(0);
    });

    it('counts revision conflicts and retries of commands under 20 concurrent refunds of one invoice', async () => {
      const invoiceId = await paidInvoice(gw.operator, merchant.test, '1000.00');
      // The payment reaches the merchant's ledger through the projector: wait until refunds can be reserved.
      await poll(
        () => gw.operator.http.get(`/admin/v1/accounts/${merchant.accountId}/balance?mode=test`),
        (r) => r.status === 200 && Number(r.body.available) >= 500,
        'the paid invoice in the ledger',
      );
      const before = await scrape();
      const conflicts = (s: Sample[]) => total(s, 'command_conflicts_total');
      let after = before;
      let refunds = 0;
      // Concurrency is real, so its conflicts are not scheduled: a burst almost always has
      // some; a few bursts make it certain enough (each answer is checked either way).
      for (let burst = 0; burst < 5 && conflicts(after) === conflicts(before); burst++) {
        const replies = await Promise.all(Array.from({ length: 20 }, () => merchant.test.post(`/v1/invoices/${invoiceId}/refund`, { amount: '5.00' })));
        for (const r of replies) expectStatus(r, 202);
        refunds += replies.length;
        after = await scrape();
      }
      expect(conflicts(after)).toBeGreaterThan(conflicts(before));
      const delta = (name: string, labels: Record<string, string>) => total(after, name, labels) - total(before, name, labels);
      // Every refund appended once to the invoice (RequestRefund) and once to its own new stream (CreateRefund).
      expect(delta('commands_total', { category: 'refund', outcome: 'appended' })).toBe(refunds);
      expect(delta('commands_total', { category: 'invoice', outcome: 'appended' })).toBeGreaterThanOrEqual(refunds);
      expect(delta('command_conflicts_total', { category: 'invoice' }) + delta('command_conflicts_total', { category: 'ledger' })).toBeGreaterThan(0);

      // Once nothing is in flight: every conflict was retried (no command gave up), and each
      // retry is one more decision in command_attempts (sum - count = retries), per category.
      await poll(
        scrape,
        (s) =>
          ['invoice', 'ledger', 'refund'].every((category) => {
            const attempts = total(s, 'command_attempts_sum', { category }) - total(s, 'command_attempts_count', { category });
            return (
              attempts === total(s, 'command_retries_total', { category }) &&
              total(s, 'command_retries_total', { category }) === total(s, 'command_conflicts_total', { category })
            );
          }),
        'attempts, retries and conflicts to agree',
      );
    });
  });

  describe('a transaction left open on the cluster', () => {
    it('the visible log trails while projection lag says 0: metrics and readiness show the trail and the transaction; they clear once it ends', async () => {
      const names = await projectionNames();
      // Another session of the cluster (here in another database, as an operator's psql
      // or a report would be) opens a transaction and takes a transaction id.
      const holder = new Client({ connectionString: gw.db.adminUrl, application_name: 'visibility-test-holder' });
      await holder.connect();
      let open = true;
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT txid_current()');
        const created = await merchant.test.post('/v1/invoices', { amount: '100.00', orderId: orderId(), method: 'sbp' });
        expectStatus(created, 201);

        const trailing = await poll(
          scrape,
          (s) =>
            (valueOf(s, 'event_log_invisible_events', {}) ?? 0) >= 1 &&
            names.every((projection) => valueOf(s, 'projection_lag_events', { projection }) === 0) &&
            series(s, 'database_oldest_transaction_seconds', { application_name: 'visibility-test-holder' }).length === 1,
          'the trail shown while every projection lag is 0',
        );
        expect(valueOf(trailing, 'event_log_invisible_oldest_seconds', {})).toBeGreaterThanOrEqual(0);
        expect(series(trailing, 'database_oldest_transaction_seconds', { application_name: 'visibility-test-holder', database: 'postgres' })).toHaveLength(1);
        // The alerts docs/operations.md suggests for this case name series of this scrape, as an operator would paste them.
        const alerts = after(docSection('What the operator sees'), 'Suggested alerts:').split('\n\n')[0]!;
        const alerted = [...new Set([...alerts.matchAll(/`[^`]*?\b([a-z][a-z0-9_]*_(?:seconds|total|events))\b[^`]*`/g)].map((m) => m[1]!))];
        expect(alerted).toEqual(['event_log_invisible_oldest_seconds', 'database_oldest_transaction_seconds', 'metrics_collect_failures_total']);
        for (const name of alerted) expect({ name, series: series(trailing, name, {}).length > 0 }).toEqual({ name, series: true });

        const ready = await poll(
          () => api(gw.baseUrl, ADMIN_TOKEN).get('/health/ready'),
          (r) =>
            r.status === 200 &&
            r.body.eventLog?.invisibleEvents >= 1 &&
            r.body.eventLog?.oldestTransaction?.applicationName === 'visibility-test-holder' &&
            (r.body.projections as Json[]).every((p) => p.lag === 0),
          'readiness showing the trail while every lag is 0',
        );
        expect(ready.body).toMatchObject({ status: 'ready', ready: true });
        expect(ready.body.eventLog).toEqual({
          invisibleEvents: expect.any(Number),
          oldestInvisibleSeconds: expect.any(Number),
          oldestTransaction: {
            applicationName: 'visibility-test-holder',
            database: 'postgres',
            pid: expect.any(Number),
            state: 'idle in transaction',
            ageSeconds: expect.any(Number),
          },
        });
        // The invoice is stored (its own stream reads it) but no read model has it yet.
        expectStatus(await merchant.test.get(`/v1/invoices/${created.body.id}`), 200);
        const listed = await merchant.test.get('/v1/invoices?limit=100');
        expectStatus(listed, 200);
        expect((listed.body.items as Json[]).some((i) => i.id === created.body.id)).toBe(false);

        await holder.query('COMMIT');
        open = false;
        const cleared = await poll(
          scrape,
          (s) =>
            valueOf(s, 'event_log_invisible_events', {}) === 0 &&
            series(s, 'database_oldest_transaction_seconds', { application_name: 'visibility-test-holder' }).length === 0,
          'the trail to clear',
        );
        expect(valueOf(cleared, 'event_log_invisible_oldest_seconds', {})).toBe(0);
        await poll(
          () => merchant.test.get('/v1/invoices?limit=100'),
          (r) => r.status === 200 && (r.body.items as Json[]).some((i) => i.id === created.body.id),
          'the invoice in the read model',
        );
      } finally {
        if (open) await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
    });
  });

  describe('readiness', () => {
    it('GET /health/ready shows ready and each projection with its state and lag', async () => {
      const names = await projectionNames();
      const ready = await poll(
        () => api(gw.baseUrl, ADMIN_TOKEN).get('/health/ready'),
        (r) => r.status === 200 && (r.body.projections as Json[]).every((p) => p.lag === 0),
        'every projection caught up',
      );
      expect(ready.body).toMatchObject({ status: 'ready', ready: true, database: 'ok' });
      expect(ready.headers.get('x-request-id')).toMatch(UUID);
      for (const p of ready.body.projections as Json[]) {
        expect(p).toEqual({ projection: expect.any(String), state: 'live', checkpoint: expect.stringMatching(/^\d+\/\d+$/), lastError: null, lag: 0 });
      }
      expect((ready.body.projections as Json[]).map((p) => p.projection)).toEqual(names);
    });

    it('the METRICS_PORT listener serves /metrics without a token, and /health', async () => {
      const metrics = await fetch(`${metricsPortUrl}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('x-request-id')).toMatch(UUID);
      const samples = parseExposition(await metrics.text());
      expect(series(samples, 'projection_lag_events').length).toBeGreaterThan(0);
      expect(series(samples, 'http_requests_total', { route: '/v1/invoices/:id' }).length).toBeGreaterThan(0);

      const ready = await api(metricsPortUrl).get('/health/ready');
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({ status: 'ready', ready: true, database: 'ok' });
      expect((ready.body.projections as Json[]).every((p) => typeof p.lag === 'number')).toBe(true);
      expect((await api(metricsPortUrl).get('/health/live')).body).toEqual({ status: 'ok' });
      const unknown = await api(metricsPortUrl).raw('GET', '/v1/methods', { headers: { 'x-request-id': 'mp-1' } });
      expect(unknown.status).toBe(404);
      expect(unknown.headers.get('x-request-id')).toBe('mp-1');
    });
  });
});

describe('split deployment: a projector-only process serves its metrics on METRICS_PORT', () => {
  it('the projector reports projections and the webhook queue; the API process its requests', async () => {
    const db = await createTestDatabase({ migrate: false });
    const env = { DATABASE_URL: db.url, ADMIN_TOKEN };
    const projector = startProcess('projector', { ...env, METRICS_PORT: '0', PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    try {
      const [, url] = await projector.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)\/metrics/);
      const apiProcess = await startGateway('api', env);
      try {
        expect(apiProcess.output()).not.toContain('METRICS_PORT');
        await api(apiProcess.baseUrl).get('/v1/nothing-here');
        const apiMetrics = await fetch(`${apiProcess.baseUrl}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        expect(apiMetrics.status).toBe(200);
        const apiSamples = parseExposition(await apiMetrics.text());
        expect(valueOf(apiSamples, 'http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
        // The API process runs no projection: lag is the projector's to tell.
        expect(series(apiSamples, 'projection_lag_events')).toHaveLength(0);
        expect(series(apiSamples, 'webhook_queue_depth')).toHaveLength(0);

        const projectorSamples = await poll(
          async () => parseExposition(await (await fetch(`${url}/metrics`)).text()),
          (s) => series(s, 'projection_lag_events').length > 0 && series(s, 'projection_lag_events').every((l) => l.value === 0),
          'the projector caught up',
        );
        expect(series(projectorSamples, 'projection_lag_events', { projection: 'stream_catalog' })).toHaveLength(1);
        expect(valueOf(projectorSamples, 'webhook_queue_depth', { status: 'pending' })).toBe(0);
        const ready = await api(url!).get('/health/ready');
        expect(ready.status).toBe(200);
        expect((ready.body.projections as Json[]).map((p) => p.projection)).toContain('stream_catalog');
      } finally {
        await apiProcess.kill();
      }
    } finally {
      await projector.kill();
      await db.drop();
    }
  });
});

describe('a gauge that could not be read is left out of the scrape', () => {
  it('with its database refusing connections, a projector shows no gauge read from it, counts each failure, and shows them again once it is back', async () => {
    const db = await createTestDatabase({ migrate: false });
    const projector = startProcess('projector', { DATABASE_URL: db.url, ADMIN_TOKEN, METRICS_PORT: '0', PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    // Stands in for the database going down: no session to it is let in, those it has are ended.
    const admin = new Client({ connectionString: process.env.TEST_ADMIN_DATABASE_URL });
    await admin.connect();
    const allowConnections = (allow: boolean) => admin.query(`ALTER DATABASE ${db.name} WITH ALLOW_CONNECTIONS ${allow}`);
    const READ_FROM_THE_DATABASE = [
      'event_log_invisible_events',
      'event_log_invisible_oldest_seconds',
      'database_oldest_transaction_seconds',
      'projection_lag_events',
      'webhook_queue_depth',
      'webhook_endpoints_disabled',
    ];
    const UNLABELLED = ['event_log_invisible_events', 'event_log_invisible_oldest_seconds', 'webhook_endpoints_disabled'];
    const failures = (s: readonly Sample[], gauge: string) => valueOf(s, 'metrics_collect_failures_total', { gauge }) ?? 0;
    try {
      const [, url] = await projector.waitForOutput(/metrics and health \(METRICS_PORT, no token\): (http:\/\/127\.0\.0\.1:\d+)\/metrics/);
      const scrape = async () => parseExposition(await (await fetch(`${url}/metrics`)).text());
      const before = await poll(scrape, (s) => READ_FROM_THE_DATABASE.every((name) => series(s, name).length > 0), 'every gauge read');

      await allowConnections(false);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [db.name]);
      // A scrape's failed reads show in the next one (its counter is taken before they end).
      await poll(scrape, (s) => UNLABELLED.every((gauge) => failures(s, gauge) > failures(before, gauge)), 'failed reads counted');
      const down = await scrape();
      for (const name of READ_FROM_THE_DATABASE) expect({ name, samples: series(down, name) }).toEqual({ name, samples: [] });
      for (const gauge of READ_FROM_THE_DATABASE) expect(failures(down, gauge)).toBeGreaterThan(failures(before, gauge));
      // The family is still declared: its HELP and TYPE lines stay.
      const text = await (await fetch(`${url}/metrics`)).text();
      for (const name of READ_FROM_THE_DATABASE) expect(text).toMatch(new RegExp(`^# HELP ${name} .+\\n# TYPE ${name} gauge$`, 'm'));

      await allowConnections(true);
      const back = await poll(scrape, (s) => READ_FROM_THE_DATABASE.every((name) => series(s, name).length > 0), 'every gauge read again');
      for (const name of UNLABELLED) expect(valueOf(back, name, {})).toBeGreaterThanOrEqual(0);
    } finally {
      await allowConnections(true).catch(() => undefined);
      await admin.end();
      await projector.kill();
      await db.drop();
    }
  });
});

describe('the hooks under the metrics (in process)', () => {
  afterEach(() => observeCommands(null));

  /** A store of one stream whose first append finds that someone else appended first. */
  function racingStore(): EventStore {
    const events: RecordedEvent[] = [];
    let raced = false;
    const store: Partial<EventStore> = {
      async readStream(streamName) {
        if (events.length === 0) throw new StreamNotFoundError(streamName);
        return events;
      },
      async appendToStream(streamName, toAppend, options) {
        if (!raced) {
          raced = true;
          events.push({
            id: randomUUID(),
            type: 'Counted',
            streamName,
            revision: 0n,
            data: { by: 1 },
            metadata: {},
            position: { commit: 1n, prepare: 1n },
            createdAt: new Date(),
          });
          throw new WrongExpectedRevisionError(streamName, options?.expectedRevision ?? 'any', 0n);
        }
        for (const e of toAppend) {
          events.push({ ...e, streamName, revision: BigInt(events.length), metadata: {}, position: { commit: 2n, prepare: 2n }, createdAt: new Date() });
        }
        return { nextExpectedRevision: BigInt(events.length - 1), position: { commit: 2n, prepare: 2n } };
      },
    };
    return store as EventStore;
  }

  type CounterEvent = { type: 'Counted'; data: { by: number } };
  const counter = {
    initialState: () => 0,
    evolve: (n: number, e: CounterEvent) => n + e.data.by,
    decide: (command: { by: number }, n: number): CounterEvent[] | string =>
      command.by < 0 ? 'negative' : n >= 10 ? [] : [{ type: 'Counted', data: { by: command.by } }],
  };

  it('handleCommand tells the observer of a conflict it retries, and how each command ended', async () => {
    const seen: string[] = [];
    observeCommands({
      conflict: (category, retrying) => seen.push(`conflict ${category} ${retrying}`),
      handled: (category, attempts, outcome) => seen.push(`handled ${category} ${attempts} ${outcome}`),
    });
    const store = racingStore();
    const first = await handleCommand(store, 'counter-1', counter, { by: 2 });
    expect(first).toMatchObject({ ok: true, state: 3, attempts: 2 });
    expect(await handleCommand(store, 'counter-1', counter, { by: -1 })).toMatchObject({ ok: false, failure: 'negative' });
    expect(seen).toEqual(['conflict counter true', 'handled counter 2 appended', 'handled counter 1 refused']);
  });

  it('a conflict on the last attempt is counted as given up, and the command as an error', async () => {
    const seen: string[] = [];
    observeCommands({
      conflict: (category, retrying) => seen.push(`conflict ${category} ${retrying}`),
      handled: (category, attempts, outcome) => seen.push(`handled ${category} ${attempts} ${outcome}`),
    });
    await expect(handleCommand(racingStore(), 'counter-2', counter, { by: 1 }, { maxAttempts: 1 })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    expect(seen).toEqual(['conflict counter false', 'handled counter 1 error']);
  });

  it('an observer that throws never breaks a command', async () => {
    observeCommands({
      conflict: () => {
        throw new Error('observer bug');
      },
      handled: () => {
        throw new Error('observer bug');
      },
    });
    expect(await handleCommand(racingStore(), 'counter-3', counter, { by: 1 })).toMatchObject({ ok: true, state: 2 });
  });

  it('readiness answers 503 with ready false when the database does not answer, and keeps the projections report', async () => {
    const down = { query: () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })) };
    const report = { projections: [{ projection: 'ledger', state: 'failing', checkpoint: '1/1', lastError: 'connect ECONNREFUSED', lag: null }] };
    const answer = await readiness(down as never, async () => report);
    expect(answer).toEqual({ status: 503, body: { status: 'not_ready', ready: false, database: 'unreachable', ...report } });
    const up = { query: () => Promise.resolve({ rows: [] }) };
    const failingProbe = await readiness(up as never, () => Promise.reject(new Error('probe failed')));
    expect(failingProbe).toEqual({ status: 200, body: { status: 'ready', ready: true, database: 'ok' } });
  });

  it('METRICS_PORT is validated: unset is no listener, a port number or 0, never the API port', () => {
    expect(loadConfig({}).metricsPort).toBeNull();
    expect(loadConfig({ METRICS_PORT: '9464' }).metricsPort).toBe(9464);
    expect(loadConfig({ METRICS_PORT: '0' }).metricsPort).toBe(0);
    expect(() => loadConfig({ METRICS_PORT: 'prometheus' })).toThrow(/METRICS_PORT must be an integer from 0 to 65535/);
    expect(() => loadConfig({ METRICS_PORT: '70000' })).toThrow(/METRICS_PORT/);
    expect(() => loadConfig({ PORT: '3000', METRICS_PORT: '3000' })).toThrow(/METRICS_PORT must differ from PORT/);
  });
});
