/**
 * Outgoing webhooks end to end: a gateway with CLOCK=manual sends the seven event
 * kinds to a real local receiver (test/support/webhook-receiver.ts), signed, once per
 * event and subscribed project; failed attempts are retried on the gateway clock after
 * 1 min, 5 min, 30 min, 2 h, 12 h and 24 h, then the delivery has failed; the
 * operator sees every attempt and can resend. A second gateway without
 * WEBHOOK_ALLOW_PRIVATE_NETWORKS refuses private and reserved webhook URLs when they
 * are set, and deliveries of both modes to the loopback receiver, to a host name
 * that resolves to loopback and to this machine's own interface address.
 *
 * The tests of the first gateway share one clock and run in order: each advance moves
 * time for all of them (every test has its own projects and receivers).
 */
import http from 'node:http';
import { networkInterfaces } from 'node:os';
import type { AddressInfo } from 'node:net';
import {
  Client,
  expectError,
  expectStatus,
  InvoiceGateway,
  ISO_UTC,
  Json,
  Merchant,
  Operator,
  orderId,
  poll,
  sleep,
  startInvoiceGateway,
  UUID,
} from '../support/merchant-fixtures';
import { fund, PHONE, payoutAddress, transition } from '../support/money-out-fixtures';
import { ReceivedWebhook, startWebhookReceiver, validSignature, validTimestampedSignature, WebhookReceiver } from '../support/webhook-receiver';

const ALL_KINDS = ['invoice.paid', 'invoice.failed', 'invoice.expired', 'refund.succeeded', 'refund.failed', 'payout.paid', 'payout.rejected'];
const SCHEDULE = [60, 300, 1800, 7200, 43_200, 86_400];
/** How long "nothing else arrives" is watched (the dispatcher looks every 100 ms). */
const QUIET_MS = 1000;

interface Hooked extends Merchant {
  readonly secret: string;
}

/** A project (holdHours 0, so paid money is available at once) with webhook settings; a new account unless given. */
async function hookedMerchant(operator: Operator, settings: { webhookUrl: string | null; webhookEvents?: string[] }, accountId?: string): Promise<Hooked> {
  const account = accountId ?? (await operator.createAccount());
  const r = await operator.http.post('/admin/v1/projects', { accountId: account, name: 'Магазин', holdHours: 0, ...settings });
  expectStatus(r, 201);
  expect(r.body.webhookUrl).toBe(settings.webhookUrl);
  expect(r.body.webhookEvents).toEqual(settings.webhookEvents ?? ALL_KINDS);
  expect(r.body.webhookSecret).toEqual(expect.any(String));
  return { ...operator.clientsOf(account, r.body, r.body.keys), secret: r.body.webhookSecret };
}

async function createInvoice(client: Client, body: Record<string, unknown> = {}): Promise<Json> {
  const r = await client.post('/v1/invoices', { amount: '1000.00', method: 'sbp', orderId: orderId('wh'), ...body });
  expectStatus(r, 201);
  return r.body;
}

async function paidInvoice(operator: Operator, client: Client, body: Record<string, unknown> = {}): Promise<Json> {
  const invoice = await createInvoice(client, body);
  expectStatus(await operator.payment(invoice.id, 'paid'), 200);
  return invoice;
}

/** GET of a resource, polled until `done` holds (GET /v1/... reads models fed asynchronously). */
function getWhen(client: Client, path: string, done: (body: Json) => boolean): Promise<Json> {
  return poll(
    async () => {
      const r = await client.get(path);
      expectStatus(r, 200);
      return r.body;
    },
    done,
    `GET ${path}`,
  );
}

const idOf = (w: ReceivedWebhook): unknown => {
  const d = w.body?.data ?? {};
  return d.refund?.id ?? d.payout?.id ?? d.invoice?.id;
};

/** Waits for the webhook of `kind` about the resource `resourceId` and answers it. */
async function arrival(receiver: WebhookReceiver, kind: string, resourceId: unknown): Promise<ReceivedWebhook> {
  const matches = (w: ReceivedWebhook) => w.headers['x-service-event'] === kind && idOf(w) === resourceId;
  await receiver.waitFor((all) => all.some(matches), `${kind} of ${String(resourceId)}`);
  return receiver.received.find(matches)!;
}

/** The gateway clock as unix seconds. */
const clockSeconds = async (operator: Operator): Promise<number> => (await operator.advance(0)).getTime() / 1000;

/** Headers and envelope every delivery has; the timestamp within the gateway-clock window [from, to]. */
function expectEnvelope(w: ReceivedWebhook, kind: string, isTest: boolean, secret: string, window: { from: number; to: number }): void {
  expect(validSignature(w, secret)).toBe(true);
  expect(w.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
  expect(validTimestampedSignature(w, secret)).toBe(true);
  expect(w.headers['content-type']).toMatch(/^application\/json/);
  expect(w.headers['x-service-event']).toBe(kind);
  expect(w.headers['x-service-delivery-id']).toMatch(UUID);
  expect(w.headers['x-service-test']).toBe(String(isTest));
  expect(w.headers['x-service-timestamp']).toMatch(/^\d+$/);
  const ts = Number(w.headers['x-service-timestamp']);
  expect(ts).toBeGreaterThanOrEqual(Math.floor(window.from));
  expect(ts).toBeLessThanOrEqual(Math.ceil(window.to));
  expect(Object.keys(w.body).sort()).toEqual(['createdAt', 'data', 'id', 'isTest', 'type']);
  expect(w.body.id).toMatch(UUID);
  expect(w.body.type).toBe(kind);
  expect(w.body.isTest).toBe(isTest);
  expect(w.body.createdAt).toMatch(ISO_UTC);
  expect(JSON.parse(w.rawBody)).toEqual(w.body);
}

describe('webhooks (CLOCK=manual, private networks allowed)', () => {
  let gw: InvoiceGateway;
  let operator: Operator;
  const receivers: WebhookReceiver[] = [];
  const receiver = async (): Promise<WebhookReceiver> => {
    const r = await startWebhookReceiver();
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      // The retry schedule's hours and days, and the refund's processing, pass on the operator's clock.
      CLOCK: 'manual',
      // The receiver listens on 127.0.0.1.
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      // Reads one invoice (or payout) several times in a row to follow its state; the poll rule has its own suite (rate-limits.spec.ts).
      POLL_INTERVAL_SECONDS: '0',
    });
    operator = gw.operator;
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await gw?.close();
  });

  /** GET /admin/v1/webhook-deliveries with a query. */
  const deliveries = async (query: string): Promise<Json> => {
    const r = await operator.http.get(`/admin/v1/webhook-deliveries?${query}`);
    expectStatus(r, 200);
    return r.body;
  };
  /** The one delivery of an event to a project, polled until `done` holds. */
  const deliveryOf = (eventId: string, projectId: string, done: (d: Json) => boolean = () => true): Promise<Json> =>
    poll(
      async () => (await deliveries(`eventId=${eventId}&projectId=${projectId}`)).items,
      (items) => items.length === 1 && done(items[0]),
      `the delivery of event ${eventId}`,
      15_000,
    ).then((items) => items[0]);

  describe('the seven kinds, each once, signed, with the resource as GET shows it', () => {
    let m: Hooked;
    let hooks: WebhookReceiver;
    let paid: Json; // the test invoice of 1000.00, paid, then refunded in part
    const expected: { kind: string; id: unknown }[] = [];

    beforeAll(async () => {
      hooks = await receiver();
      m = await hookedMerchant(operator, { webhookUrl: hooks.url });
    });

    it('invoice.paid: data.invoice is GET /v1/invoices/{id}; createdAt is paidAt; the history shows one delivered attempt', async () => {
      const from = await clockSeconds(operator);
      paid = await paidInvoice(operator, m.test);
      const w = await arrival(hooks, 'invoice.paid', paid.id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'invoice.paid', id: paid.id });
      expectEnvelope(w, 'invoice.paid', true, m.secret, { from, to });
      const invoice = await getWhen(m.test, `/v1/invoices/${paid.id}`, (i) => i.status === 'paid');
      expect(w.body.data).toEqual({ invoice });
      expect(invoice).toMatchObject({ status: 'paid', refundedAmount: '0.00', isTest: true });
      expect(w.body.createdAt).toBe(invoice.paidAt);

      const delivery = await deliveryOf(w.body.id, m.projectId, (d) => d.status === 'delivered');
      expect(delivery).toEqual({
        id: w.headers['x-service-delivery-id'],
        eventId: w.body.id,
        eventType: 'invoice.paid',
        projectId: m.projectId,
        url: hooks.url,
        status: 'delivered',
        isTest: true,
        createdAt: expect.stringMatching(ISO_UTC),
        nextAttemptAt: null,
        attempts: [
          { attempt: 1, at: expect.stringMatching(ISO_UTC), statusCode: 200, body: 'ok', durationMs: expect.any(Number), error: null, superseded: false },
        ],
      });
      expect(Math.floor(new Date(delivery.attempts[0].at).getTime() / 1000)).toBe(Number(w.headers['x-service-timestamp']));
    });

    it('refund.succeeded: data.refund is GET /v1/refunds/{id} and data.invoice shows the refund (refundedAmount, partially_refunded)', async () => {
      const requested = await m.test.post(`/v1/invoices/${paid.id}/refund`, { amount: '300.00' });
      expectStatus(requested, 202);
      expect(requested.body.status).toBe('pending');
      await sleep(QUIET_MS);
      expect(hooks.received.filter((w) => idOf(w) === requested.body.id)).toEqual([]); // nothing while pending
      const from = await clockSeconds(operator);
      await operator.advance(11);
      const w = await arrival(hooks, 'refund.succeeded', requested.body.id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'refund.succeeded', id: requested.body.id });
      expectEnvelope(w, 'refund.succeeded', true, m.secret, { from, to });
      const refund = await getWhen(m.test, `/v1/refunds/${requested.body.id}`, (r) => r.status === 'succeeded');
      const invoice = await getWhen(m.test, `/v1/invoices/${paid.id}`, (i) => i.refundedAmount === '300.00');
      expect(w.body.data).toEqual({ refund, invoice });
      expect(refund).toMatchObject({ invoiceId: paid.id, amount: '300.00', status: 'succeeded' });
      expect(invoice).toMatchObject({ status: 'partially_refunded', refundedAmount: '300.00' });
      expect(w.body.createdAt).toBe(refund.completedAt);
    });

    it('refund.failed (operator fails it): data.refund failed, data.invoice with only the succeeded refund counted', async () => {
      const requested = await m.test.post(`/v1/invoices/${paid.id}/refund`, { amount: '200.00' });
      expectStatus(requested, 202);
      const from = await clockSeconds(operator);
      const failed = await operator.http.post(`/admin/v1/refunds/${requested.body.id}/fail`, { reason: 'банк отказал' });
      expectStatus(failed, 200);
      const w = await arrival(hooks, 'refund.failed', requested.body.id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'refund.failed', id: requested.body.id });
      expectEnvelope(w, 'refund.failed', true, m.secret, { from, to });
      const refund = await getWhen(m.test, `/v1/refunds/${requested.body.id}`, (r) => r.status === 'failed');
      const invoice = await getWhen(m.test, `/v1/invoices/${paid.id}`, (i) => i.status === 'partially_refunded');
      expect(w.body.data).toEqual({ refund, invoice });
      expect(refund).toMatchObject({ amount: '200.00', status: 'failed' });
      expect(invoice).toMatchObject({ status: 'partially_refunded', refundedAmount: '300.00' });
    });

    it('invoice.failed: the operator reports a failed payment', async () => {
      const created = await createInvoice(m.test, { amount: '500.00' });
      const from = await clockSeconds(operator);
      expectStatus(await operator.payment(created.id, 'failed'), 200);
      const w = await arrival(hooks, 'invoice.failed', created.id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'invoice.failed', id: created.id });
      expectEnvelope(w, 'invoice.failed', true, m.secret, { from, to });
      const invoice = await getWhen(m.test, `/v1/invoices/${created.id}`, (i) => i.status === 'failed');
      expect(w.body.data).toEqual({ invoice });
    });

    it('invoice.expired: the clock passes expiresAt', async () => {
      const created = await createInvoice(m.test, { amount: '400.00', expire: 1 });
      await sleep(300);
      expect(hooks.received.filter((w) => idOf(w) === created.id)).toEqual([]);
      const from = await clockSeconds(operator);
      await operator.advance(61);
      const w = await arrival(hooks, 'invoice.expired', created.id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'invoice.expired', id: created.id });
      expectEnvelope(w, 'invoice.expired', true, m.secret, { from, to });
      const invoice = await getWhen(m.test, `/v1/invoices/${created.id}`, (i) => i.status === 'expired');
      expect(w.body.data).toEqual({ invoice });
      expect(new Date(w.body.createdAt).getTime()).toBeGreaterThanOrEqual(new Date(invoice.expiresAt).getTime());
    });

    let addressId: string;
    it('payout.paid (live): data.payout is GET /v1/payouts/{id}', async () => {
      const from = await clockSeconds(operator);
      await fund(operator, m, 'live', ['1000.00']);
      // The live funding invoice is an invoice.paid of its own, isTest false.
      await hooks.waitFor((all) => all.some((w) => w.headers['x-service-test'] === 'false'), 'the live invoice.paid');
      const live = hooks.received.find((w) => w.headers['x-service-test'] === 'false')!;
      expectEnvelope(live, 'invoice.paid', false, m.secret, { from, to: await clockSeconds(operator) });
      expected.push({ kind: 'invoice.paid', id: idOf(live) });

      addressId = (await payoutAddress(operator, m.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' })).id;
      const created = await m.live.post('/v1/payouts', { amount: '200.00', addressId, orderId: orderId('po') });
      expectStatus(created, 201);
      const id = created.body.id as number;
      for (const step of ['approve', 'process']) expectStatus(await transition(operator, id, step), 200);
      await sleep(300);
      expect(hooks.received.filter((w) => idOf(w) === id)).toEqual([]); // approved and processing send nothing
      const payFrom = await clockSeconds(operator);
      expectStatus(await transition(operator, id, 'pay', { externalId: 'bank-42' }), 200);
      const w = await arrival(hooks, 'payout.paid', id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'payout.paid', id });
      expectEnvelope(w, 'payout.paid', false, m.secret, { from: payFrom, to });
      const payout = await getWhen(m.live, `/v1/payouts/${id}`, (p) => p.status === 'paid');
      expect(w.body.data).toEqual({ payout });
      expect(payout).toMatchObject({ id, status: 'paid', amount: '200.00', externalId: 'bank-42', account: '+7916*****67' });
      expect(w.body.createdAt).toBe(payout.processedAt);
    });

    it('payout.rejected (live): data.payout with the reason', async () => {
      const created = await m.live.post('/v1/payouts', { amount: '300.00', addressId, orderId: orderId('po') });
      expectStatus(created, 201);
      const id = created.body.id as number;
      expectStatus(await transition(operator, id, 'approve'), 200);
      const from = await clockSeconds(operator);
      expectStatus(await transition(operator, id, 'reject', { reason: 'реквизиты не совпадают' }), 200);
      const w = await arrival(hooks, 'payout.rejected', id);
      const to = await clockSeconds(operator);
      expected.push({ kind: 'payout.rejected', id });
      expectEnvelope(w, 'payout.rejected', false, m.secret, { from, to });
      const payout = await getWhen(m.live, `/v1/payouts/${id}`, (p) => p.status === 'rejected');
      expect(w.body.data).toEqual({ payout });
      expect(payout).toMatchObject({ status: 'rejected', statusReason: 'реквизиты не совпадают' });
    });

    it('nothing else arrived: one delivery per event, distinct delivery and event ids', async () => {
      await sleep(QUIET_MS);
      const got = hooks.received.map((w) => ({ kind: w.headers['x-service-event'], id: idOf(w) }));
      expect(got).toHaveLength(expected.length);
      expect(got).toEqual(expect.arrayContaining(expected));
      expect(new Set(hooks.received.map((w) => w.headers['x-service-delivery-id'])).size).toBe(expected.length);
      expect(new Set(hooks.received.map((w) => w.body.id)).size).toBe(expected.length);
      expect(new Set(got.map((g) => g.kind))).toEqual(new Set(ALL_KINDS));
      const history = await deliveries(`projectId=${m.projectId}`);
      expect(history.items).toHaveLength(expected.length);
      expect(history.items.every((d: Json) => d.status === 'delivered' && d.attempts.length === 1)).toBe(true);
      expect(history.items.map((d: Json) => d.id).sort()).toEqual(hooks.received.map((w) => w.headers['x-service-delivery-id']).sort());
    });

    it('the history pages newest first with limit and cursor, filters by event kind, and validates its query', async () => {
      const all = (await deliveries(`projectId=${m.projectId}`)).items;
      const paged: Json[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: Json = await deliveries(`projectId=${m.projectId}&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(page.items.length).toBeLessThanOrEqual(3);
        expect(page.hasMore).toBe(page.nextCursor !== null);
        paged.push(...page.items);
        cursor = page.nextCursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(Math.ceil(all.length / 3));
      expect(paged).toEqual(all);
      const payouts = (await deliveries(`projectId=${m.projectId}&eventType=payout.paid`)).items;
      expect(payouts.map((d: Json) => d.eventType)).toEqual(['payout.paid']);
      expectError(await operator.http.get('/admin/v1/webhook-deliveries?eventType=payout.created'), 400, 'validation', 'eventType');
      expectError(await operator.http.get('/admin/v1/webhook-deliveries?projectId=nope'), 400, 'validation', 'projectId');
      expectError(await operator.http.get('/admin/v1/webhook-deliveries?limit=101'), 400, 'validation', 'limit');
    });
  });

  describe('who gets what', () => {
    it('payout events go to every subscribed project of the account; invoice events only to their own project', async () => {
      const [ra, rb, rd] = [await receiver(), await receiver(), await receiver()];
      const a = await hookedMerchant(operator, { webhookUrl: ra.url });
      const b = await hookedMerchant(operator, { webhookUrl: rb.url, webhookEvents: ['payout.paid'] }, a.accountId);
      const d = await hookedMerchant(operator, { webhookUrl: rd.url, webhookEvents: ['invoice.paid'] }, a.accountId);
      const e = await hookedMerchant(operator, { webhookUrl: null }, a.accountId);
      const other = await hookedMerchant(operator, { webhookUrl: rd.url }); // another account, same receiver as d

      await fund(operator, a, 'live', ['1000.00']);
      const address = await payoutAddress(operator, a.accountId, { method: 'sbp', account: PHONE });
      const pay = await a.live.post('/v1/payouts', { amount: '150.00', addressId: address.id, orderId: orderId('po') });
      expectStatus(pay, 201);
      for (const step of ['approve', 'process', 'pay']) expectStatus(await transition(operator, pay.body.id, step), 200);
      const reject = await a.live.post('/v1/payouts', { amount: '250.00', addressId: address.id, orderId: orderId('po') });
      expectStatus(reject, 201);
      expectStatus(await transition(operator, reject.body.id, 'reject', { reason: 'отказ' }), 200);

      const paidToA = await arrival(ra, 'payout.paid', pay.body.id);
      const paidToB = await arrival(rb, 'payout.paid', pay.body.id);
      await arrival(ra, 'payout.rejected', reject.body.id);
      await sleep(QUIET_MS);

      // payout.paid and payout.rejected may be sent at once: their order is not fixed.
      expect(ra.received.map((w) => w.headers['x-service-event']).sort()).toEqual(['invoice.paid', 'payout.paid', 'payout.rejected']);
      expect(rb.received.map((w) => w.headers['x-service-event'])).toEqual(['payout.paid']);
      expect(rd.received).toEqual([]); // d: invoice.paid of a's invoice is not d's; payouts not subscribed; other: nothing happened
      // One event, one body, two deliveries, each signed with its own project's secret.
      expect(paidToB.rawBody).toBe(paidToA.rawBody);
      expect(paidToB.body.id).toBe(paidToA.body.id);
      expect(paidToB.headers['x-service-delivery-id']).not.toBe(paidToA.headers['x-service-delivery-id']);
      expect(validSignature(paidToA, a.secret)).toBe(true);
      expect(validSignature(paidToB, b.secret)).toBe(true);
      expect(validSignature(paidToB, a.secret)).toBe(false);

      expect((await deliveries(`projectId=${a.projectId}`)).items).toHaveLength(3);
      const ofB = (await deliveries(`projectId=${b.projectId}`)).items;
      expect(ofB.map((x: Json) => [x.eventType, x.id, x.status])).toEqual([['payout.paid', paidToB.headers['x-service-delivery-id'], 'delivered']]);
      for (const project of [d, e, other]) expect((await deliveries(`projectId=${project.projectId}`)).items).toEqual([]);
      expect((await deliveries(`eventId=${paidToA.body.id}`)).items).toHaveLength(2);
    });

    it('an operator cancel is one payout.rejected with status cancelled, to every subscribed project of the account, and in GET /v1/events', async () => {
      const [ra, rb, rc] = [await receiver(), await receiver(), await receiver()];
      const a = await hookedMerchant(operator, { webhookUrl: ra.url });
      const b = await hookedMerchant(operator, { webhookUrl: rb.url, webhookEvents: ['payout.rejected'] }, a.accountId);
      const c = await hookedMerchant(operator, { webhookUrl: rc.url, webhookEvents: ['payout.paid'] }, a.accountId);
      await fund(operator, a, 'live', ['1000.00']);
      const address = await payoutAddress(operator, a.accountId, { method: 'sbp', account: PHONE });
      const created = await a.live.post('/v1/payouts', { amount: '200.00', addressId: address.id, orderId: orderId('po') });
      expectStatus(created, 201);
      const id = created.body.id as number;

      const from = await clockSeconds(operator);
      const cancelled = await transition(operator, id, 'cancel', { reason: 'мерчант передумал' });
      expectStatus(cancelled, 200);
      expect(cancelled.body).toMatchObject({ id, status: 'cancelled', statusReason: 'мерчант передумал' });
      const toA = await arrival(ra, 'payout.rejected', id);
      const toB = await arrival(rb, 'payout.rejected', id);
      const to = await clockSeconds(operator);
      await sleep(QUIET_MS);

      expectEnvelope(toA, 'payout.rejected', false, a.secret, { from, to });
      expectEnvelope(toB, 'payout.rejected', false, b.secret, { from, to });
      const payout = await getWhen(a.live, `/v1/payouts/${id}`, (p) => p.status === 'cancelled');
      expect(payout).toMatchObject({ id, status: 'cancelled', statusReason: 'мерчант передумал', amount: '200.00' });
      expect(toA.body.data).toEqual({ payout });
      expect(toA.body.createdAt).toBe(payout.processedAt);
      expect(toB.rawBody).toBe(toA.rawBody);
      // Exactly once each: the receivers got nothing else about the payout; c is not subscribed to payout.rejected.
      expect(ra.received.filter((w) => idOf(w) === id)).toHaveLength(1);
      expect(rb.received.map((w) => [w.headers['x-service-event'], idOf(w)])).toEqual([['payout.rejected', id]]);
      expect(rc.received).toEqual([]);

      // GET /v1/events of each project of the account: the one event, its body as sent.
      const eventsOf = async (m: Merchant): Promise<Json[]> => {
        const r = await m.live.get('/v1/events?type=payout.rejected');
        expectStatus(r, 200);
        return (r.body.items as Json[]).filter((e) => e.data.payout.id === id);
      };
      const delivered = async (m: Merchant): Promise<Json> => {
        const done = (items: Json[]) => items.length === 1 && items[0].deliveryStatus === 'delivered';
        return (await poll(() => eventsOf(m), done, `the cancellation in GET /v1/events of ${m.projectId}`))[0];
      };
      const listed = await delivered(a);
      expect({ ...listed, deliveryStatus: undefined }).toEqual(toA.body);
      expect((await delivered(b)).id).toBe(toA.body.id);
      const one = await fetch(`${gw.baseUrl}/v1/events/${toA.body.id}`, { headers: { authorization: `Bearer ${a.keys.live.secretKey}` } });
      expect(one.status).toBe(200);
      expect(await one.text()).toBe(toA.rawBody);
      expect((await eventsOf(c)).map((e) => [e.id, e.deliveryStatus])).toEqual([[toA.body.id, 'not_subscribed']]);
    });

    it('an unsubscribed kind never arrives; a project without webhookUrl gets nothing and has no history', async () => {
      const hooks = await receiver();
      const onlyPaid = await hookedMerchant(operator, { webhookUrl: hooks.url, webhookEvents: ['invoice.paid'] });
      const silent = await hookedMerchant(operator, { webhookUrl: null });
      // Events of the silent project first: once the later invoice.paid arrived, the outbox had passed them.
      await paidInvoice(operator, silent.test);
      const silentFailed = await createInvoice(silent.test);
      expectStatus(await operator.payment(silentFailed.id, 'failed'), 200);
      const failed = await createInvoice(onlyPaid.test);
      expectStatus(await operator.payment(failed.id, 'failed'), 200);
      const paid = await paidInvoice(operator, onlyPaid.test);
      await arrival(hooks, 'invoice.paid', paid.id);
      await sleep(QUIET_MS);
      expect(hooks.received.map((w) => [w.headers['x-service-event'], idOf(w)])).toEqual([['invoice.paid', paid.id]]);
      const history = await deliveries(`projectId=${onlyPaid.projectId}`);
      expect(history.items.map((x: Json) => x.eventType)).toEqual(['invoice.paid']);
      expect((await deliveries(`projectId=${onlyPaid.projectId}&eventType=invoice.failed`)).items).toEqual([]);
      expect(await deliveries(`projectId=${silent.projectId}`)).toEqual({ items: [], nextCursor: null, hasMore: false });
    });
  });

  it('a project whose row and webhook settings drifted apart (its row changed by hand in SQL): a PATCH with the URL it shows takes effect', async () => {
    const [before, after] = [await receiver(), await receiver()];
    const m = await hookedMerchant(operator, { webhookUrl: before.url });
    // An operator's UPDATE in psql: the project's row only, not its settings history.
    await gw.db.pool.query('UPDATE projects SET webhook_url = $2 WHERE id = $1', [m.projectId, after.url]);
    expect((await operator.patchProject(m.projectId, { webhookUrl: after.url })).webhookUrl).toBe(after.url);
    const paid = await paidInvoice(operator, m.test);
    await arrival(after, 'invoice.paid', paid.id);
    expect(before.received).toEqual([]);
  });

  describe('resend', () => {
    it('resends a delivered delivery: 202, the same delivery id and body again, a second attempt in the history', async () => {
      const hooks = await receiver();
      const m = await hookedMerchant(operator, { webhookUrl: hooks.url });
      const invoice = await paidInvoice(operator, m.test);
      const first = await arrival(hooks, 'invoice.paid', invoice.id);
      const deliveryId = first.headers['x-service-delivery-id'] as string;
      await deliveryOf(first.body.id, m.projectId, (d) => d.status === 'delivered');

      const r = await operator.http.post(`/admin/v1/webhook-deliveries/${deliveryId}/resend`);
      expectStatus(r, 202);
      await hooks.waitFor((all) => all.length === 2, 'the resent delivery');
      const again = hooks.received[1]!;
      expect(again.headers['x-service-delivery-id']).toBe(deliveryId);
      expect(again.rawBody).toBe(first.rawBody);
      expect(validSignature(again, m.secret)).toBe(true);
      expect(Number(again.headers['x-service-timestamp'])).toBeGreaterThanOrEqual(Number(first.headers['x-service-timestamp']));
      const delivery = await deliveryOf(first.body.id, m.projectId, (d) => d.attempts.length === 2 && d.status === 'delivered');
      expect(delivery.attempts.map((a: Json) => [a.attempt, a.statusCode])).toEqual([
        [1, 200],
        [2, 200],
      ]);
      expect(delivery.nextAttemptAt).toBeNull();
      await sleep(QUIET_MS);
      expect(hooks.received).toHaveLength(2);
    });

    it('an attempt started before a resend comes back late: the resent attempt’s outcome stands, the late one is kept as superseded', async () => {
      const hooks = await receiver();
      let answerFirst!: () => void;
      const firstHeld = new Promise<void>((resolve) => (answerFirst = resolve));
      hooks.answer = (_w, index) => (index === 1 ? { status: 500, body: 'поздно', after: firstHeld } : { status: 200, body: 'ok' });
      const m = await hookedMerchant(operator, { webhookUrl: hooks.url });
      // A webhook answered first: a URL gets a second slot (for the resend) once it has answered one (slow start).
      const answered = await arrival(hooks, 'invoice.paid', (await paidInvoice(operator, m.test)).id);
      await deliveryOf(answered.body.id, m.projectId, (d) => d.status === 'delivered');
      const invoice = await paidInvoice(operator, m.test);
      const first = await arrival(hooks, 'invoice.paid', invoice.id); // its answer is held
      const deliveryId = first.headers['x-service-delivery-id'] as string;

      expectStatus(await operator.http.post(`/admin/v1/webhook-deliveries/${deliveryId}/resend`), 202);
      await hooks.waitFor((all) => all.length === 3, 'the resent delivery');
      await deliveryOf(first.body.id, m.projectId, (d) => d.status === 'delivered' && d.attempts.length === 1);

      answerFirst();
      const delivery = await deliveryOf(first.body.id, m.projectId, (d) => d.attempts.length === 2);
      expect(delivery.status).toBe('delivered');
      expect(delivery.nextAttemptAt).toBeNull();
      expect(delivery.attempts.map((a: Json) => [a.attempt, a.statusCode, a.superseded])).toEqual([
        [1, 200, false],
        [2, 500, true],
      ]);
      await sleep(QUIET_MS);
      expect(hooks.received).toHaveLength(3);
    });

    it('an unknown delivery → 404 not_found', async () => {
      expectError(await operator.http.post('/admin/v1/webhook-deliveries/00000000-0000-4000-8000-000000000000/resend'), 404, 'not_found');
      expectError(await operator.http.post('/admin/v1/webhook-deliveries/not-a-delivery/resend'), 404, 'not_found');
    });
  });

  describe('failed attempts', () => {
    it('a receiver that never answers: cut at 10 s (statusCode null, the limit in the error), retried after 60 s on the clock', async () => {
      const hooks = await receiver();
      hooks.answer = (_w, index) => (index === 0 ? 'hang' : { status: 200, body: 'ok' });
      const m = await hookedMerchant(operator, { webhookUrl: hooks.url });
      const invoice = await paidInvoice(operator, m.test);
      const first = await arrival(hooks, 'invoice.paid', invoice.id);
      const pending = await deliveryOf(first.body.id, m.projectId, (d) => d.attempts.length === 1);
      expect(pending.status).toBe('pending');
      expect(pending.attempts[0]).toEqual({
        attempt: 1,
        at: expect.stringMatching(ISO_UTC),
        statusCode: null,
        body: null,
        durationMs: expect.any(Number),
        error: expect.stringMatching(/10 ?s/),
        superseded: false,
      });
      expect(pending.attempts[0].durationMs).toBeGreaterThanOrEqual(9_900);
      expect(pending.attempts[0].durationMs).toBeLessThan(12_000);
      // The next attempt is 60 s (on the clock) after the attempt ended.
      const gap = new Date(pending.nextAttemptAt).getTime() - new Date(pending.attempts[0].at).getTime();
      expect(gap).toBeGreaterThanOrEqual(60_000 + 9_900);
      expect(gap).toBeLessThan(60_000 + 12_000);
      expect(hooks.received).toHaveLength(1);

      await operator.advance(60);
      await hooks.waitFor((all) => all.length === 2, 'the second attempt');
      expect(hooks.received[1]!.headers['x-service-delivery-id']).toBe(first.headers['x-service-delivery-id']);
      const delivered = await deliveryOf(first.body.id, m.projectId, (d) => d.status === 'delivered');
      expect(delivered.attempts.map((a: Json) => a.statusCode)).toEqual([null, 200]);
    });

    it('a 302 with a Location is not followed and counts as a failure (statusCode 302)', async () => {
      const hooks = await receiver();
      const hits: string[] = [];
      const redirector = http.createServer((req, res) => {
        hits.push(req.method ?? '');
        req.resume();
        req.on('end', () => res.writeHead(302, { location: `${hooks.url}/followed` }).end('moved'));
      });
      await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}/hooks`;
        const m = await hookedMerchant(operator, { webhookUrl: url });
        await paidInvoice(operator, m.test);
        const [delivery] = await poll(
          async () => (await deliveries(`projectId=${m.projectId}`)).items,
          (items) => items.length === 1 && items[0].attempts.length === 1,
          'the first attempt',
        );
        expect(delivery.status).toBe('pending');
        expect(delivery.nextAttemptAt).toMatch(ISO_UTC);
        expect(delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: 302, body: 'moved' });
        expect(hits).toEqual(['POST']);
        await sleep(QUIET_MS);
        expect(hooks.received).toEqual([]);
        expect(hits).toHaveLength(1);
      } finally {
        redirector.closeAllConnections();
        await new Promise((resolve) => redirector.close(resolve));
      }
    });

    it('a reply body over 4096 bytes is kept cut at 4096', async () => {
      const hooks = await receiver();
      const big = `${'a'.repeat(3000)}${'b'.repeat(7000)}`;
      hooks.answer = () => ({ status: 500, body: big });
      const m = await hookedMerchant(operator, { webhookUrl: hooks.url });
      const invoice = await paidInvoice(operator, m.test);
      const w = await arrival(hooks, 'invoice.paid', invoice.id);
      const delivery = await deliveryOf(w.body.id, m.projectId, (d) => d.attempts.length === 1);
      expect(delivery.attempts[0].statusCode).toBe(500);
      expect(delivery.attempts[0].body).toBe(big.slice(0, 4096));
      expect(delivery.status).toBe('pending');
    });

    it('a dropped connection is a failed attempt (statusCode null, an error) and the next attempt is scheduled', async () => {
      const hooks = await receiver();
      hooks.answer = () => 'drop';
      const m = await hookedMerchant(operator, { webhookUrl: hooks.url });
      const invoice = await paidInvoice(operator, m.test);
      const w = await arrival(hooks, 'invoice.paid', invoice.id);
      const delivery = await deliveryOf(w.body.id, m.projectId, (d) => d.attempts.length === 1);
      expect(delivery.status).toBe('pending');
      expect(delivery.nextAttemptAt).toMatch(ISO_UTC);
      expect(delivery.attempts[0]).toMatchObject({ attempt: 1, statusCode: null, body: null });
      expect(delivery.attempts[0].error).toEqual(expect.any(String));
      expect(delivery.attempts[0].error).not.toBe('');
    });

    it('retries after 60, 300, 1800, 7200, 43200 and 86400 s on the clock, then fails for good', async () => {
      const hooks = await receiver();
      hooks.answer = () => ({ status: 500, body: 'сломалось' });
      const m = await hookedMerchant(operator, { webhookUrl: hooks.url });
      const invoice = await paidInvoice(operator, m.test);
      const first = await arrival(hooks, 'invoice.paid', invoice.id);
      const eventId = first.body.id as string;

      for (let i = 1; i <= SCHEDULE.length; i++) {
        const delay = SCHEDULE[i - 1]!;
        const recorded = await deliveryOf(eventId, m.projectId, (d) => d.attempts.length === i);
        expect(recorded.status).toBe('pending');
        const lastAt = new Date(recorded.attempts[i - 1].at).getTime();
        const next = new Date(recorded.nextAttemptAt).getTime();
        expect(next - lastAt).toBeGreaterThanOrEqual(delay * 1000);
        expect(next - lastAt).toBeLessThan(delay * 1000 + 2000);
        // Up to 5 s before the attempt is due: nothing is sent.
        const now = (await operator.advance(0)).getTime();
        await operator.advance(Math.floor((next - now) / 1000) - 5);
        await sleep(QUIET_MS);
        expect(hooks.received).toHaveLength(i);
        await operator.advance(6);
        await hooks.waitFor((all) => all.length === i + 1, `attempt ${i + 1}`);
      }

      const failed = await deliveryOf(eventId, m.projectId, (d) => d.attempts.length === 7 && d.status === 'failed');
      expect(failed.nextAttemptAt).toBeNull();
      expect(failed.id).toBe(first.headers['x-service-delivery-id']);
      expect(failed.attempts).toEqual(
        [1, 2, 3, 4, 5, 6, 7].map((attempt) => ({
          attempt,
          at: expect.stringMatching(ISO_UTC),
          statusCode: 500,
          body: 'сломалось',
          durationMs: expect.any(Number),
          error: null,
          superseded: false,
        })),
      );
      for (let i = 1; i < 7; i++) {
        expect(new Date(failed.attempts[i].at).getTime() - new Date(failed.attempts[i - 1].at).getTime()).toBeGreaterThanOrEqual(SCHEDULE[i - 1]! * 1000);
      }
      // Every attempt: the same delivery id and body, a fresh timestamp (the attempt's moment on the clock).
      expect(hooks.received).toHaveLength(7);
      const stamps = hooks.received.map((w) => Number(w.headers['x-service-timestamp']));
      hooks.received.forEach((w, i) => {
        expect(w.headers['x-service-delivery-id']).toBe(failed.id);
        expect(w.rawBody).toBe(first.rawBody);
        expect(validSignature(w, m.secret)).toBe(true);
        expect(stamps[i]).toBe(Math.floor(new Date(failed.attempts[i].at).getTime() / 1000));
        if (i > 0) expect(stamps[i]! - stamps[i - 1]!).toBeGreaterThanOrEqual(SCHEDULE[i - 1]!);
      });

      // Past the schedule's longest delay: nothing more is sent. Less than ENDPOINT_FAILING_DAYS
      // from the first failure, so that the resent attempt's failure below does not disable the
      // endpoint (endpoint-health.spec.ts): with two days here it did whenever the health worker ran first.
      await operator.advance(86_400 + 3_600);
      await sleep(QUIET_MS);
      expect(hooks.received).toHaveLength(7);
      expect((await deliveryOf(eventId, m.projectId)).attempts).toHaveLength(7);

      // A resend of the failed delivery sends it now and starts the schedule again.
      expectStatus(await operator.http.post(`/admin/v1/webhook-deliveries/${failed.id}/resend`), 202);
      await hooks.waitFor((all) => all.length === 8, 'the resent attempt');
      expect(hooks.received[7]!.rawBody).toBe(first.rawBody);
      const resent = await deliveryOf(eventId, m.projectId, (d) => d.attempts.length === 8);
      expect(resent.status).toBe('pending');
      const gap = new Date(resent.nextAttemptAt).getTime() - new Date(resent.attempts[7].at).getTime();
      expect(gap).toBeGreaterThanOrEqual(60_000);
      expect(gap).toBeLessThan(62_000);
    });
  });
});

/** The first non-loopback IPv4 address of this machine's own interfaces (the issue's way in: 192.0.2.2 here). */
function interfaceAddress(): string {
  const address = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .find((i) => i.family === 'IPv4' && !i.internal)?.address;
  if (!address) throw new Error('this machine has no non-loopback IPv4 interface: the own-interface webhook test cannot run here');
  return address;
}

describe('webhooks: deliveries to private addresses (WEBHOOK_ALLOW_PRIVATE_NETWORKS unset, both modes)', () => {
  let gw: InvoiceGateway;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    // CLOCK=manual: the retry schedule's hours and days pass through the operator's clock.
    gw = await startInvoiceGateway({ CLOCK: 'manual' });
    hooks = await startWebhookReceiver();
  });
  afterAll(async () => {
    await hooks?.close();
    await gw?.close();
  });

  /** A URL stored before the gateway refused literal private addresses when they are set (straight into the table). */
  async function storedWebhookUrl(projectId: string, url: string): Promise<void> {
    const r = await gw.db.pool.query('UPDATE projects SET webhook_url = $2 WHERE id = $1', [projectId, url]);
    expect(r.rowCount).toBe(1);
    // The outbox addresses an event with the settings of its time (project_webhook_settings).
    await gw.db.pool.query('UPDATE project_webhook_settings SET webhook_url = $2 WHERE project_id = $1', [projectId, url]);
  }

  const deliveriesOf = async (projectId: string): Promise<Json[]> => {
    const r = await gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${projectId}`);
    expectStatus(r, 200);
    return r.body.items;
  };

  it('a webhook URL with a literal private, reserved or own address is refused when it is set (400 validation, param webhookUrl)', async () => {
    const account = await gw.operator.createAccount();
    const urls = [
      hooks.url,
      'http://2130706433/hooks',
      'http://[::1]:8080/hooks',
      'http://[64:ff9b::7f00:1]/hooks',
      'http://[2002:7f00:1::]/hooks',
      'http://[::7f00:1]/hooks',
      'http://[fec0::1]/hooks',
      `http://${interfaceAddress()}:${new URL(gw.baseUrl).port}/admin/v1/clock/advance`,
      'http://198.51.100.1/hooks',
      'http://203.0.113.1/hooks',
      'http://240.0.0.1/hooks',
      'http://255.255.255.255/hooks',
      'http://169.254.169.254/latest/meta-data/',
    ];
    for (const webhookUrl of urls) {
      const created = await gw.operator.http.post('/admin/v1/projects', { accountId: account, name: 'Магазин', webhookUrl });
      expectError(created, 400, 'validation', 'webhookUrl');
      expect({ webhookUrl, message: created.body.error.message }).toEqual({ webhookUrl, message: expect.stringContaining('WEBHOOK_ALLOW_PRIVATE_NETWORKS') });
    }
    const project = await gw.operator.createProject(account, { name: 'Магазин' });
    for (const webhookUrl of urls)
      expectError(await gw.operator.http.patch(`/admin/v1/projects/${project.id}`, { webhookUrl }), 400, 'validation', 'webhookUrl');
    expect((await gw.operator.http.get(`/admin/v1/projects/${project.id}`)).body.webhookUrl).toBeNull();
    // A public address, or a host name (checked at each delivery), is accepted.
    expect((await gw.operator.patchProject(project.id, { webhookUrl: 'https://8.8.8.8/hooks' })).webhookUrl).toBe('https://8.8.8.8/hooks');
    expect((await gw.operator.patchProject(project.id, { webhookUrl: 'https://shop.example/hooks' })).webhookUrl).toBe('https://shop.example/hooks');
  });

  // 2,048 characters of CJK were accepted (about 6 KB): the outbox's batch with that project's event could not be
  // queued (the queue's URL index takes at most 2704 bytes) and was retried for ever, every project's webhooks held back.
  it('a webhook URL of more than 2048 bytes in UTF-8 is refused (400 too_long), however few its characters', async () => {
    const account = await gw.operator.createAccount();
    const webhookUrl = `https://shop.example/${'中'.repeat(700)}`;
    expect(webhookUrl.length).toBeLessThan(2048);
    const created = await gw.operator.http.post('/admin/v1/projects', { accountId: account, name: 'Магазин', webhookUrl });
    expectError(created, 400, 'validation', 'webhookUrl');
    expect(created.body.error.details).toEqual([{ param: 'webhookUrl', code: 'too_long', message: 'webhookUrl: не длиннее 2048 байт в UTF-8' }]);
    const project = await gw.operator.createProject(account, { name: 'Магазин' });
    expectError(await gw.operator.http.patch(`/admin/v1/projects/${project.id}`, { webhookUrl }), 400, 'validation', 'webhookUrl');
    // A lone surrogate is refused as such (the byte count of class-validator's IsByteLength threw on it: a 500).
    const lone = await gw.operator.http.patch(`/admin/v1/projects/${project.id}`, { webhookUrl: 'https://shop.example/\ud800' });
    expectError(lone, 400, 'validation', 'webhookUrl');
    expect(lone.body.error.details).toEqual([expect.objectContaining({ code: 'invalid_character' })]);
    // At the limit it is taken, and its project's webhooks are queued.
    const atTheLimit = `https://shop.example/${'中'.repeat((2048 - 'https://shop.example/'.length - 2) / 3)}ab`;
    expect(Buffer.byteLength(atTheLimit)).toBe(2048);
    expect((await gw.operator.patchProject(project.id, { webhookUrl: atTheLimit })).webhookUrl).toBe(atTheLimit);
    const m = await hookedMerchant(gw.operator, { webhookUrl: atTheLimit });
    await paidInvoice(gw.operator, m.test);
    await poll(
      async () => (await gw.db.pool.query('SELECT 1 FROM webhook_queue WHERE url = $1', [atTheLimit])).rowCount,
      (rows) => rows !== null && rows > 0,
      'the invoice.paid delivery queued to the URL at the limit',
    );
  });

  it('a webhook URL with a user name or password is refused when it is set: they would not be sent, and the URL is shown with each delivery', async () => {
    const account = await gw.operator.createAccount();
    const project = await gw.operator.createProject(account, { name: 'Магазин' });
    for (const webhookUrl of ['https://shop:s3cret@shop.example/hooks', 'https://shop@shop.example/hooks', 'https://:s3cret@shop.example/hooks']) {
      const created = await gw.operator.http.post('/admin/v1/projects', { accountId: account, name: 'Магазин', webhookUrl });
      expectError(created, 400, 'validation', 'webhookUrl');
      expect(created.body.error.details).toEqual([{ param: 'webhookUrl', code: 'credentials_in_url', message: expect.stringContaining('подпись') }]);
      expectError(await gw.operator.http.patch(`/admin/v1/projects/${project.id}`, { webhookUrl }), 400, 'validation', 'webhookUrl');
    }
    expect((await gw.operator.http.get(`/admin/v1/projects/${project.id}`)).body.webhookUrl).toBeNull();
    // Credentials and a private address: one detail for the field, the first rule it breaks.
    const both = await gw.operator.http.patch(`/admin/v1/projects/${project.id}`, { webhookUrl: 'http://shop:s3cret@10.0.0.1/hooks' });
    expect(both.body.error.details.map((d: Json) => d.code)).toEqual(['credentials_in_url']);
  });

  it(`a webhook to this host's own non-loopback interface address (${interfaceAddress()}) is refused in both modes: nothing reaches a receiver there or the gateway's operator API, no reply body is stored`, async () => {
    const address = interfaceAddress();
    const onInterface = await startWebhookReceiver(address);
    try {
      // The issue's path: the gateway's own operator API through the interface address.
      const operatorApi = `http://${address}:${new URL(gw.baseUrl).port}/admin/v1/clock/advance`;
      const targets = [onInterface.url, operatorApi];
      const merchants: Hooked[] = [];
      for (const url of targets) {
        const m = await hookedMerchant(gw.operator, { webhookUrl: 'https://shop.example/hooks' });
        await storedWebhookUrl(m.projectId, url);
        merchants.push(m);
        await paidInvoice(gw.operator, m.live);
        await paidInvoice(gw.operator, m.test);
      }
      for (const [i, m] of merchants.entries()) {
        const items = await poll(
          () => deliveriesOf(m.projectId),
          (list) => list.length === 2 && list.every((d: Json) => d.attempts.length === 1),
          'both refused attempts',
        );
        expect(items.map((d: Json) => d.isTest).sort()).toEqual([false, true]);
        for (const d of items) {
          expect(d).toMatchObject({ url: targets[i], status: 'pending' });
          expect(d.attempts[0]).toMatchObject({ attempt: 1, statusCode: null, body: null });
          expect(d.attempts[0].error).toMatch(/refused: .*gateway host itself|refused: .*not a globally routable/);
        }
      }
      await sleep(QUIET_MS);
      expect(onInterface.received).toHaveLength(0);
      const metrics = await fetch(`${gw.baseUrl}/metrics`, { headers: { authorization: `Bearer ${gw.gateway.adminToken}` } });
      expect(metrics.status).toBe(200);
      const clockCalls = (await metrics.text())
        .split('\n')
        .filter((line) => line.startsWith('http_requests_total{') && line.includes('route="/admin/v1/clock/advance"'));
      expect(clockCalls).toEqual([]);
    } finally {
      await onInterface.close();
    }
  });

  it('a live invoice.paid to 127.0.0.1 is refused and recorded; a test-mode one is refused too (one guard for both modes)', async () => {
    const m = await hookedMerchant(gw.operator, { webhookUrl: 'https://shop.example/hooks' });
    await storedWebhookUrl(m.projectId, hooks.url);
    const live = await paidInvoice(gw.operator, m.live);
    const [refused] = await poll(
      () => deliveriesOf(m.projectId),
      (items) => items.length === 1 && items[0].attempts.length === 1,
      'the refused attempt',
    );
    expect(refused).toMatchObject({ eventType: 'invoice.paid', isTest: false, status: 'pending', url: hooks.url });
    expect(refused.attempts[0]).toMatchObject({ attempt: 1, statusCode: null, body: null });
    expect(refused.attempts[0].error).toMatch(/refused|private/i);

    const test = await paidInvoice(gw.operator, m.test);
    const both = await poll(
      () => deliveriesOf(m.projectId),
      (items) => items.length === 2 && items.every((d: Json) => d.attempts.length === 1),
      'the test-mode attempt',
    );
    const sandbox = both.find((d: Json) => d.isTest === true);
    expect(sandbox).toMatchObject({ eventType: 'invoice.paid', status: 'pending', url: hooks.url });
    expect(sandbox.attempts[0]).toMatchObject({ attempt: 1, statusCode: null, body: null });
    expect(sandbox.attempts[0].error).toMatch(/refused/);
    await sleep(QUIET_MS);
    expect(hooks.received.map(idOf)).not.toContain(test.id);
    expect(hooks.received.map(idOf)).not.toContain(live.id);
  });

  it('a host name that resolves to a loopback address is refused too (checked on the address connected to)', async () => {
    const before = hooks.received.length;
    const m = await hookedMerchant(gw.operator, { webhookUrl: hooks.url.replace('127.0.0.1', 'localhost') });
    await paidInvoice(gw.operator, m.live);
    const [refused] = await poll(
      async () => (await gw.operator.http.get(`/admin/v1/webhook-deliveries?projectId=${m.projectId}`)).body.items,
      (items) => items.length === 1 && items[0].attempts.length === 1,
      'the refused attempt',
    );
    expect(refused.attempts[0]).toMatchObject({ statusCode: null, body: null });
    // One sentence: the name, the address it resolves to, and why that address is refused.
    expect(refused.attempts[0].error).toMatch(/^refused: localhost resolves to (127\.0\.0\.1|::1), which is not a globally routable address \(loopback\)$/);
    await sleep(QUIET_MS);
    expect(hooks.received).toHaveLength(before);
  });
});
