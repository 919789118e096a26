/**
 * The invoice list when its read model trails the log: the API alone (`npm run
 * start:api`), no projector running, as between a deploy's steps or while the projector
 * restarts (its rows come only from a projector).
 *
 * - By orderId (0 or 1 item) it is a lookup: it read only the read model and answered
 *   no item for an invoice just answered 201, which a client takes for "no such order".
 *   It reads the invoice's stream now, as GET /invoices/{id} does (review 89 M1).
 * - A period that has ended was listed at once, without an invoice of it the read model
 *   lacked; reaching it later, above the pages read, the invoice was skipped for good.
 *   It is listed once final, as the balance transactions are (review 89 M2).
 * - An open invoice past its expiresAt was listed (and filtered) created or pending
 *   until the expiry worker, in the projector, recorded it; its GET already said expired
 *   (review 89 L1).
 *
 * CLOCK=manual: the cases move the clock past a period's end and an invoice's expiresAt.
 */
import { expectStatus, InvoiceGateway, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { PROJECTOR_PUBLIC_URL, startProcess } from '../support/gateway-process';

describe('the invoice list while its read model trails', () => {
  let gw: InvoiceGateway;

  beforeAll(async () => {
    gw = await startInvoiceGateway({ CLOCK: 'manual' }, 'api');
  });
  afterAll(async () => {
    await gw?.close();
  });

  const q = encodeURIComponent;

  it('by orderId: an invoice just answered 201 is listed at once, as its GET shows it, and its filters apply', async () => {
    const m = await gw.operator.merchant();
    const order = orderId('listed-at-once');
    const created = await m.test.post('/v1/invoices', { amount: '100.00', orderId: order });
    expectStatus(created, 201);
    const got = await m.test.get(`/v1/invoices/${created.body.id}`);
    expectStatus(got, 200);
    const listed = await m.test.get(`/v1/invoices?orderId=${q(order)}`);
    expectStatus(listed, 200);
    expect(listed.body).toEqual({ items: [got.body], nextCursor: null, hasMore: false });
    // No projector runs: the read model has no row of it (the list's pages show nothing).
    expect((await m.test.get('/v1/invoices')).body.items).toEqual([]);
    const by = async (query: string) => (await m.test.get(`/v1/invoices?orderId=${q(order)}&${query}`)).body.items.length;
    expect(await by('status=created')).toBe(1);
    expect(await by('status=paid')).toBe(0);
    expect(await by(`from=${q(got.body.createdAt)}`)).toBe(1);
    expect(await by(`to=${q(got.body.createdAt)}`)).toBe(0);
    // Another mode's or project's orderId is not this one's.
    expect((await m.live.get(`/v1/invoices?orderId=${q(order)}`)).body.items).toEqual([]);
    const other = await gw.operator.merchant();
    expect((await other.test.get(`/v1/invoices?orderId=${q(order)}`)).body.items).toEqual([]);
  });

  it('a period that has ended is listed once final: until the read model has every invoice of it, 503 and Retry-After', async () => {
    const m = await gw.operator.merchant();
    const created = await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('in-period') });
    expectStatus(created, 201);
    const { createdAt } = (await m.test.get(`/v1/invoices/${created.body.id}`)).body;
    await gw.operator.advance(60);
    const to = new Date(Date.parse(createdAt) + 1_000).toISOString();
    // The period has ended, the invoice is not in the read model (no projector runs): a page of it would skip it for good.
    const early = await m.test.get(`/v1/invoices?to=${q(to)}`);
    expect({ status: early.status, code: early.body.error?.code, retryAfter: early.headers.get('retry-after') }).toEqual({
      status: 503,
      code: 'provider_unavailable',
      retryAfter: '1',
    });
    const projector = startProcess('projector', { DATABASE_URL: gw.db.url, PUBLIC_URL: PROJECTOR_PUBLIC_URL, CLOCK: 'manual' });
    try {
      const listed = await poll(
        () => m.test.get(`/v1/invoices?to=${q(to)}`),
        (r) => r.status === 200,
        'the period final',
        60_000,
      );
      expect(listed.body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
    } finally {
      await projector.kill();
    }
  });

  it('an open invoice past its expiresAt is listed expired, and filtered so, before the expiry worker records it', async () => {
    const m = await gw.operator.merchant();
    const created = await m.test.post('/v1/invoices', { amount: '100.00', orderId: orderId('expires'), expire: 1 });
    expectStatus(created, 201);
    // A projector brings the row into the read model, and stops before the invoice expires (its expiry worker with it).
    const projector = startProcess('projector', { DATABASE_URL: gw.db.url, PUBLIC_URL: PROJECTOR_PUBLIC_URL, CLOCK: 'manual' });
    try {
      await poll(
        async () => (await m.test.get('/v1/invoices')).body.items,
        (items: { id: string }[]) => items.some((i) => i.id === created.body.id),
        'the invoice in the list',
      );
    } finally {
      await projector.kill();
    }
    await gw.operator.advance(120);
    const got = await m.test.get(`/v1/invoices/${created.body.id}`);
    expect(got.body.status).toBe('expired');
    const listed = await m.test.get('/v1/invoices');
    expect(listed.body.items).toEqual([got.body]);
    const ids = async (status: string) => (await m.test.get(`/v1/invoices?status=${status}`)).body.items.map((i: { id: string }) => i.id);
    expect(await ids('expired')).toEqual([created.body.id]);
    expect(await ids('created')).toEqual([]);
  });
});
