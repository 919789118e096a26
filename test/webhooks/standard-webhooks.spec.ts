/**
 * Every delivery carries Standard Webhooks' headers beside the spec's (issue 36, item
 * 3): `webhook-id` (the event's id, the same in every attempt), `webhook-timestamp`
 * and `webhook-signature`, checked here with the `standardwebhooks` npm package, a
 * verifier nobody here wrote, given `whsec_` + the project's webhook secret in base64.
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { expectStatus, InvoiceGateway, Merchant, orderId } from '../support/merchant-fixtures';
import { hookedGateway, WebhookReceiver } from '../support/webhook-receiver';

describe('Standard Webhooks headers on every delivery', () => {
  let gw: InvoiceGateway;
  let receiver: WebhookReceiver;
  let shop: Merchant;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ gw, receiver, shop, close } = await hookedGateway());
  });
  afterAll(() => close?.());

  it('verify with the stock library, keep their id across a retry, and fail on one changed byte', async () => {
    receiver.answer = (_request, index) => (index === 0 ? { status: 500, body: 'down' } : { status: 200, body: 'ok' });
    const created = await shop.test.post('/v1/invoices', { amount: '500.00', orderId: orderId('standard'), method: 'sbp' });
    expectStatus(created, 201);
    expectStatus(await gw.operator.payment(created.body.id, 'paid'), 200);
    await receiver.waitFor((r) => r.length === 1, 'the first attempt');
    await gw.operator.advance(61);
    await receiver.waitFor((r) => r.length === 2, 'the retry');

    const verifier = new Webhook(`whsec_${Buffer.from(shop.project.webhookSecret, 'utf8').toString('base64')}`);
    const [first, retry] = receiver.received;
    for (const attempt of [first!, retry!]) {
      const headers = {
        'webhook-id': String(attempt.headers['webhook-id']),
        'webhook-timestamp': String(attempt.headers['webhook-timestamp']),
        'webhook-signature': String(attempt.headers['webhook-signature']),
      };
      expect(verifier.verify(attempt.rawBody, headers)).toEqual(attempt.body);
      // The id is the event's (the body's `id`, the receiver's idempotency key); the timestamp the attempt's.
      expect(headers['webhook-id']).toBe(attempt.body.id);
      expect(headers['webhook-timestamp']).toBe(String(attempt.headers['x-service-timestamp']));
      // The spec's own headers are still there.
      expect(attempt.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
      expect(() => verifier.verify(attempt.rawBody.replace('"paid"', '"pai d"'), headers)).toThrow(WebhookVerificationError);
    }
    // The served OpenAPI document describes every header a delivery carries, each value within its schema.
    const doc = (await (await fetch(`${gw.baseUrl}/v1/openapi.json`)).json()) as {
      webhooks: Record<string, { post: { parameters: { name: string; in: string; schema: { pattern?: string; format?: string } }[] } }>;
    };
    const described = new Map(doc.webhooks['invoice.paid']!.post.parameters.filter((p) => p.in === 'header').map((p) => [p.name.toLowerCase(), p.schema]));
    const sent = Object.keys(first!.headers).filter((name) => name.startsWith('x-service-') || name.startsWith('webhook-'));
    expect(sent).toEqual(expect.arrayContaining(['webhook-id', 'webhook-timestamp', 'webhook-signature']));
    for (const name of sent) {
      expect([name, described.has(name)]).toEqual([name, true]);
      const schema = described.get(name)!;
      if (schema.pattern) expect(String(first!.headers[name])).toMatch(new RegExp(schema.pattern));
      if (schema.format === 'uuid') expect(String(first!.headers[name])).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
    expect(retry!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(Number(retry!.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(Number(first!.headers['webhook-timestamp']) + 60);
    // Another project's secret does not verify it.
    const other = await gw.operator.merchant();
    const stranger = new Webhook(`whsec_${Buffer.from(other.project.webhookSecret, 'utf8').toString('base64')}`);
    expect(() =>
      stranger.verify(first!.rawBody, {
        'webhook-id': String(first!.headers['webhook-id']),
        'webhook-timestamp': String(first!.headers['webhook-timestamp']),
        'webhook-signature': String(first!.headers['webhook-signature']),
      }),
    ).toThrow(WebhookVerificationError);
  });
});
