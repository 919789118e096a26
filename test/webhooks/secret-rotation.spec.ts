/**
 * A webhook secret rotated while deliveries wait claimed ahead for a slow receiver (the
 * gateway as `npm start` runs it, on the manual clock so that nothing is retried, allowed
 * to deliver to loopback): every attempt started after the rotation is answered is signed
 * with the new secret (docs/operator-api.md: "the old one signs nothing from then"),
 * not with the one read when the delivery was claimed.
 */
import { expectStatus, poll } from '../support/merchant-fixtures';
import { paidInvoice } from '../support/money-out-fixtures';
import { hookedGateway, validSignature, validTimestampedSignature } from '../support/webhook-receiver';

jest.setTimeout(120_000);

/** A rotation is seen within the dispatcher's look (200 ms) and its next round (100 ms); attempts then in flight were started before it. */
const SEEN_WITHIN_MS = 500;

it('deliveries claimed ahead before a rotation are signed with the new secret from the rotation on', async () => {
  const { gw, receiver, shop, close } = await hookedGateway();
  try {
    const oldSecret = shop.project.webhookSecret as string;
    // A slow receiver: a backlog builds up, claimed ahead by the dispatcher.
    receiver.answer = () => ({ status: 200, body: 'ok', delayMs: 1_000 });
    const invoices = 40;
    for (let i = 0; i < invoices; i++) await paidInvoice(gw.operator, shop.test, '100.00');
    // The URL gains its slots (and what it holds ahead) as the receiver answers: slow start.
    await poll(
      async () => Number((await gw.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM webhook_queue WHERE leased_until IS NOT NULL')).rows[0]!.n),
      // The 8 in flight included: more than 20 is a dozen and more waiting claimed ahead.
      (n) => n > 20,
      'more than 20 deliveries leased',
      30_000,
    );

    const rotated = await gw.operator.http.post(`/admin/v1/projects/${shop.projectId}/webhook-secret/rotate`);
    expectStatus(rotated, 201);
    const answeredAt = Date.now();
    const newSecret = rotated.body.webhookSecret as string;
    const paid = (w: { body: { type?: string } }) => w.body?.type === 'invoice.paid';
    await receiver.waitFor((r) => r.filter(paid).length >= invoices, 'every invoice.paid', 60_000);

    const before = receiver.received.filter((w) => w.receivedAt < answeredAt);
    const after = receiver.received.filter((w) => w.receivedAt > answeredAt + SEEN_WITHIN_MS);
    expect(before.length).toBeGreaterThan(0);
    expect(before.every((w) => validSignature(w, oldSecret))).toBe(true);
    expect(after.length).toBeGreaterThan(10);
    const signedWith = (w: (typeof after)[number]) =>
      validSignature(w, newSecret) && validTimestampedSignature(w, newSecret) ? 'new' : validSignature(w, oldSecret) ? 'old' : 'neither';
    expect(after.map(signedWith)).toEqual(after.map(() => 'new'));
  } finally {
    await close();
  }
});
