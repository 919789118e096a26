/**
 * Endpoint health (issue 36, item 4): a webhook endpoint whose deliveries all fail for
 * 3 days in a row on the gateway clock is disabled; the merchant's events say
 * endpoint_disabled; the operator console shows it with a button that re-enables it
 * and sends what is still owed.
 */
import { expectStatus, InvoiceGateway, Json, Merchant, orderId, poll } from '../support/merchant-fixtures';
import { hookedGateway, WebhookReceiver } from '../support/webhook-receiver';
import { formTokenOf, login, request } from '../console/console-fixture';
import { RETRY_SCHEDULE_SECONDS } from '#payments/webhooks';

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

  it('disables an endpoint failing for 3 days, and the console button re-enables it and sends what is owed', async () => {
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

    // The console shows it with the button; pressing it re-enables the endpoint and sends the three.
    receiver.answer = () => ({ status: 200, body: 'ok' });
    const cookie = await login(gw.baseUrl, gw.gateway.adminToken);
    const page = await request(gw.baseUrl, 'GET', `/admin/accounts/${shop.accountId}?mode=test`, { cookie });
    expect(page.html).toContain('вебхуки отключены');
    const action = `/admin/projects/${shop.projectId}/webhook-endpoint/enable`;
    expect(page.html).toContain(`action="${action}"`);
    const pressed = await request(gw.baseUrl, 'POST', action, { cookie, form: { formToken: formTokenOf(page.html), accountId: shop.accountId, mode: 'test' } });
    expect(pressed.status).toBe(303);
    await receiver.waitFor((r) => r.length === sent + 3, 'the owed deliveries');
    expect(new Set(receiver.received.slice(sent).map((w) => w.body.id))).toEqual(new Set(owed.map((e) => e.id)));
    await poll(events, (items) => items.every((e) => e.deliveryStatus === 'delivered'), 'all delivered');
    expect((await gw.operator.http.get(`/admin/v1/projects/${shop.projectId}`)).body.webhookDisabledAt).toBeNull();
    expect((await request(gw.baseUrl, 'GET', `/admin/accounts/${shop.accountId}?mode=test`, { cookie })).html).not.toContain('вебхуки отключены');
  });
});
