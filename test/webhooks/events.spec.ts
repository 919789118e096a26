/**
 * GET /v1/events (issue 36, item 1): the merchant's webhook events, each the body its
 * webhook has, listable with their delivery status, so a receiver that was down
 * catches up on its own.
 */
import { Client, expectError, expectStatus, InvoiceGateway, Json, Merchant, orderId, poll, sleep } from '../support/merchant-fixtures';
import { hookedGateway, WebhookReceiver } from '../support/webhook-receiver';

/** Every event of `query`, following the cursors. */
async function allEvents(client: Client, query: string, limit = 7): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | null = null;
  do {
    const r = await client.get(`/v1/events?limit=${limit}&${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expectStatus(r, 200);
    items.push(...r.body.items);
    expect(r.body.hasMore).toBe(r.body.nextCursor !== null);
    cursor = r.body.nextCursor;
  } while (cursor);
  return items;
}

async function paidInvoice(gw: InvoiceGateway, client: Client, outcome: 'paid' | 'failed' = 'paid'): Promise<string> {
  const created = await client.post('/v1/invoices', { amount: '100.00', orderId: orderId('ev'), method: 'sbp' });
  expectStatus(created, 201);
  expectStatus(await gw.operator.payment(created.body.id, outcome), 200);
  return created.body.id;
}

describe('GET /v1/events', () => {
  let gw: InvoiceGateway;
  let receiver: WebhookReceiver;
  let shop: Merchant;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ gw, receiver, shop, close } = await hookedGateway());
  });
  afterAll(() => close?.());

  it('a receiver that was down while 20 events happened recovers all 20 from the list, with no operator call', async () => {
    receiver.answer = () => ({ status: 503, body: 'down' });
    const invoices: string[] = [];
    for (let i = 0; i < 20; i++) invoices.push(await paidInvoice(gw, shop.test));
    await receiver.waitFor((r) => r.length === 20, 'the 20 failed attempts');

    // The merchant, back up: what failed, newest first, in pages of 7.
    const failing = await poll(
      () => allEvents(shop.test, 'deliveryStatus=failing'),
      (items) => items.length === 20,
      'the 20 failing events',
    );
    expect(failing.map((e) => e.data.invoice.id)).toEqual([...invoices].reverse());
    expect(new Set(failing.map((e) => e.id))).toEqual(new Set(receiver.received.map((w) => w.body.id)));
    for (const e of failing) expect(e).toMatchObject({ type: 'invoice.paid', isTest: true, deliveryStatus: 'failing' });

    // Each one by id is the webhook's body, byte for byte.
    for (const attempt of receiver.received.slice(0, 3)) {
      const one = await fetch(`${gw.baseUrl}/v1/events/${attempt.body.id}`, { headers: { authorization: `Bearer ${shop.keys.test.secretKey}` } });
      expect(one.status).toBe(200);
      expect(await one.text()).toBe(attempt.rawBody);
    }
    // Nothing of the live mode or of another project.
    expect((await shop.live.get('/v1/events')).body).toEqual({ items: [], nextCursor: null, hasMore: false });
    expectError(await shop.live.get(`/v1/events/${failing[0].id}`), 404, 'not_found');
    const other = await gw.operator.merchant();
    expectError(await other.test.get(`/v1/events/${failing[0].id}`), 404, 'not_found');
  });

  it('shows delivered and not subscribed events, filtered by type and time', async () => {
    receiver.answer = () => ({ status: 200, body: 'ok' });
    const hooked = await gw.operator.merchant({ webhookUrl: receiver.url, webhookEvents: ['invoice.paid'] } as never);
    const paid = await paidInvoice(gw, hooked.test);
    const failed = await paidInvoice(gw, hooked.test, 'failed');
    const items = await poll(
      () => allEvents(hooked.test, ''),
      (all) => all.length === 2 && all.every((e) => e.deliveryStatus !== 'pending'),
      'both events, the paid one delivered',
    );
    expect(items.map((e) => [e.type, e.data.invoice.id, e.deliveryStatus])).toEqual([
      ['invoice.failed', failed, 'not_subscribed'],
      ['invoice.paid', paid, 'delivered'],
    ]);
    expect((await allEvents(hooked.test, 'type=invoice.paid')).map((e) => e.id)).toEqual([items[1].id]);
    expect((await allEvents(hooked.test, 'deliveryStatus=not_subscribed')).map((e) => e.id)).toEqual([items[0].id]);
    const at = encodeURIComponent(items[0].createdAt);
    expect((await allEvents(hooked.test, `from=${at}`)).map((e) => e.id)).toEqual([items[0].id]);
    expect((await allEvents(hooked.test, `to=${at}`)).map((e) => e.id)).toEqual([items[1].id]);
  });

  it('takes from and to with 7 and 9 fraction digits (.NET, Go, Java), to the last digit written', async () => {
    const m = await gw.operator.merchant();
    await paidInvoice(gw, m.test);
    await sleep(15); // distinct createdAt values
    await paidInvoice(gw, m.test);
    const [later, earlier] = await poll(
      () => allEvents(m.test, ''),
      (all) => all.length === 2,
      'both invoice.paid events',
    );
    expect(later.createdAt).toMatch(/\.\d{3}Z$/);
    const at = (digits: string) => encodeURIComponent(later.createdAt.replace('Z', `${digits}Z`));
    const msBefore = (digits: string) => encodeURIComponent(new Date(Date.parse(later.createdAt) - 1).toISOString().replace('Z', `${digits}Z`));
    const ids = async (query: string) => (await allEvents(m.test, query)).map((e) => e.id);
    for (const [exact, past, short] of [
      ['0000', '0001', '9999'],
      ['000000', '000001', '999999'],
    ] as const) {
      expect(await ids(`from=${at(exact)}`)).toEqual([later.id]);
      expect(await ids(`to=${at(exact)}`)).toEqual([earlier.id]);
      // A digit past the microsecond decides: the later event happened before …0001 and after …9999 of the millisecond before.
      expect(await ids(`from=${at(past)}`)).toEqual([]);
      expect(await ids(`to=${at(past)}`)).toEqual([later.id, earlier.id]);
      expect(await ids(`from=${msBefore(short)}`)).toEqual([later.id]);
      expect(await ids(`to=${msBefore(short)}`)).toEqual([earlier.id]);
      expectError(await m.test.get(`/v1/events?from=${at(past.replace(/1$/, '2'))}&to=${at(past)}`), 400, 'validation', 'to');
      expect(await ids(`from=${at(past)}&to=${at(past.replace(/1$/, '2'))}`)).toEqual([]);
    }
  });

  it('an event the operator resends after it was delivered stays delivered, never failing: while resent, and when the resend fails', async () => {
    receiver.answer = () => ({ status: 200, body: 'ok' });
    const resent = await gw.operator.merchant({ webhookUrl: receiver.url } as never);
    const invoice = await paidInvoice(gw, resent.test);
    const event = async (): Promise<Json> => (await allEvents(resent.test, ''))[0];
    const first = await poll(event, (e) => e?.deliveryStatus === 'delivered', 'the event delivered');
    const delivery = receiver.received.find((w) => w.body?.id === first.id)!.headers['x-service-delivery-id'] as string;
    const withStatus = async (status: string): Promise<string[]> => (await allEvents(resent.test, `deliveryStatus=${status}`)).map((e) => e.id);

    // The receiver holds the resent attempt, then refuses it.
    let answerResent!: () => void;
    const held = new Promise<void>((resolve) => (answerResent = resolve));
    const before = receiver.received.length;
    receiver.answer = () => ({ status: 503, body: 'busy', after: held });
    expectStatus(await gw.operator.http.post(`/admin/v1/webhook-deliveries/${delivery}/resend`), 202);
    await receiver.waitFor((all) => all.length > before, 'the resent attempt');
    const record = async (): Promise<Json> => (await gw.operator.http.get(`/admin/v1/webhook-deliveries?eventId=${first.id}`)).body.items[0];
    expect(await record()).toMatchObject({ status: 'pending', attempts: [{ statusCode: 200 }] });
    expect(await event()).toMatchObject({ id: first.id, data: { invoice: { id: invoice } }, deliveryStatus: 'delivered' });
    expect(await withStatus('failing')).toEqual([]);
    expect(await withStatus('delivered')).toEqual([first.id]);

    answerResent();
    await poll(record, (d) => d.attempts.length === 2, 'the resent attempt recorded');
    expect(await record()).toMatchObject({ status: 'pending', attempts: [{ statusCode: 200 }, { statusCode: 503 }] });
    expect((await event()).deliveryStatus).toBe('delivered');
    expect(await withStatus('failing')).toEqual([]);
    receiver.answer = () => ({ status: 200, body: 'ok' });
  });

  it('refuses a bad query with the spec error and an unknown id with 404', async () => {
    expectError(await shop.test.get('/v1/events?deliveryStatus=lost'), 400, 'validation', 'deliveryStatus');
    expectError(await shop.test.get('/v1/events?type=invoice.sent'), 400, 'validation', 'type');
    expectError(await shop.test.get('/v1/events?from=yesterday'), 400, 'validation', 'from');
    expectError(await shop.test.get('/v1/events?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z'), 400, 'validation', 'to');
    expectError(await shop.test.get('/v1/events?cursor=%21'), 400, 'validation', 'cursor');
    expectError(await shop.test.get('/v1/events/not-an-id'), 404, 'not_found');
    expectError(await shop.test.get('/v1/events/00000000-0000-4000-8000-000000000000'), 404, 'not_found');
    expectStatus(await gw.operator.http.get('/v1/events'), 401);
  });
});
