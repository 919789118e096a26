/**
 * GET /v1/balance/transactions (issue 36, item 2): every movement of the merchant's
 * balance with its cause. For a seeded random history of payments, hold releases,
 * refunds and payouts: the transactions of any period sum to the balance change over
 * it (the balance rebuilt from the event log), each bucket's balanceAfter follows its
 * movements, and a payout's transactions add up to what it paid out. A CSV of 100,000
 * rows streams in flat memory.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { Client, expectError, expectStatus, InvoiceGateway, Json, Merchant, orderId, poll, startInvoiceGateway } from '../support/merchant-fixtures';
import { balanceOf, fromKopecks, paidInvoice, payoutAddress, PHONE, toKopecks, transition } from '../support/money-out-fixtures';
import { fastCheckSeed, seededRandom } from '../support/test-seed';
import { login, request } from '../console/console-fixture';

const signed = (money: string): number => (money.startsWith('-') ? -toKopecks(money.slice(1)) : toKopecks(money));
const total = (b: { available: string; pending: string; reserved: string }) => signed(b.available) + signed(b.pending) + signed(b.reserved);

/** Every transaction of `query`, newest first, following the cursors. */
async function allTransactions(client: Client, query = ''): Promise<Json[]> {
  const items: Json[] = [];
  let cursor: string | null = null;
  do {
    const r = await client.get(`/v1/balance/transactions?limit=100${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expectStatus(r, 200);
    items.push(...r.body.items);
    cursor = r.body.nextCursor;
  } while (cursor);
  return items;
}

describe('GET /v1/balance/transactions', () => {
  let gw: InvoiceGateway;
  const merchants: Merchant[] = [];
  /** Each payout made: its id, amount, and how it ended. */
  const payouts: { owner: Merchant; id: number; amount: number; ending: 'paid' | 'rejected' | 'pending' }[] = [];

  const logBalance = async (m: Merchant, asOf?: Date) => {
    const r = await gw.operator.http.get(`/admin/v1/accounts/${m.accountId}/balance?mode=live${asOf ? `&asOf=${asOf.toISOString()}` : ''}`);
    expectStatus(r, 200);
    return r.body as { available: string; pending: string; reserved: string };
  };

  beforeAll(async () => {
    gw = await startInvoiceGateway({
      // Holds end and refunds complete when the test moves the clock.
      CLOCK: 'manual',
      // One key sends many requests in a row; the rate limit has its own suite.
      RATE_LIMIT_PER_SECOND: '1000000',
    });
    const random = seededRandom('balance transactions history');
    for (let n = 0; n < 2; n++) {
      const m = await gw.operator.merchant({ holdHours: 1 });
      merchants.push(m);
      const address = await payoutAddress(gw.operator, m.accountId, { method: 'sbp', account: PHONE });
      const invoices: { id: string; left: number }[] = [];
      for (let step = 0; step < 24; step++) {
        const roll = random.next();
        if (roll < 0.4 || invoices.length === 0) {
          const amount = random.int(200_00, 3000_00);
          invoices.push({ id: await paidInvoice(gw.operator, m.live, fromKopecks(amount)), left: amount });
        } else if (roll < 0.55) {
          await gw.operator.advance(random.int(0, 5400));
        } else if (roll < 0.75) {
          const invoice = invoices[random.int(0, invoices.length - 1)]!;
          const amount = random.int(1, Math.max(1, Math.floor(invoice.left / 3)));
          const r = await m.live.post(`/v1/invoices/${invoice.id}/refund`, { amount: fromKopecks(amount) });
          if (r.status === 202) {
            invoice.left -= amount;
            if (random.chance(0.3)) await gw.operator.http.post(`/admin/v1/refunds/${r.body.id}/fail`, { reason: 'банк отказал' });
          } else expect([409, 422]).toContain(r.status);
        } else {
          const available = signed((await balanceOf(m.live)).available);
          if (available < 100_00) continue;
          const amount = random.int(100_00, Math.min(available, 2000_00));
          const r = await m.live.post('/v1/payouts', { amount: fromKopecks(amount), addressId: address.id, orderId: orderId('bt') });
          if (r.status !== 201) {
            expect([409, 422]).toContain(r.status);
            continue;
          }
          const ending = random.chance(0.6) ? 'paid' : random.chance(0.7) ? 'rejected' : 'pending';
          if (ending === 'paid') for (const t of ['approve', 'process', 'pay']) expectStatus(await transition(gw.operator, r.body.id, t), 200);
          if (ending === 'rejected') expectStatus(await transition(gw.operator, r.body.id, 'reject', { reason: 'отказ' }), 200);
          payouts.push({ owner: m, id: r.body.id, amount, ending });
        }
      }
      // Whatever the random history did, each merchant has a paid payout for the payoutId filter to show.
      if (!payouts.some((p) => p.owner === m)) {
        await paidInvoice(gw.operator, m.live, '1000.00');
        await gw.operator.advance(7200);
        await poll(
          () => balanceOf(m.live),
          (b) => signed(b.available) >= 500_00,
          'the payment available',
        );
        const r = await m.live.post('/v1/payouts', { amount: fromKopecks(500_00), addressId: address.id, orderId: orderId('bt') });
        expectStatus(r, 201);
        for (const t of ['approve', 'process', 'pay']) expectStatus(await transition(gw.operator, r.body.id, t), 200);
        payouts.push({ owner: m, id: r.body.id, amount: 500_00, ending: 'paid' });
      }
    }
    // Every hold due and every refund complete; then the read model caught up with the log.
    await gw.operator.advance(7200);
    // GET /v1/balance reads the log past the ledger read model; the transactions are that read model's rows: both waited for.
    const bucketSums = (items: Json[]) =>
      Object.fromEntries(
        (['available', 'pending', 'reserved'] as const).map((b) => [
          b,
          fromKopecks(items.filter((t) => t.bucket === b).reduce((sum, t) => sum + signed(t.amount), 0)),
        ]),
      );
    for (const m of merchants) {
      await poll(
        async () => [await logBalance(m), await balanceOf(m.live), bucketSums(await allTransactions(m.live))],
        ([log, model, listed]) =>
          log!.pending === '0.00' && (['available', 'pending', 'reserved'] as const).every((b) => log![b] === model![b] && listed![b] === model![b]),
        'holds released and the read models caught up',
        30_000,
      );
    }
  }, 300_000);
  afterAll(async () => {
    await gw?.close();
  });

  it("each bucket's balanceAfter follows its movements and all of them sum to the balance", async () => {
    for (const m of merchants) {
      const items = await allTransactions(m.live);
      expect(items.length).toBeGreaterThan(10);
      const balance = await balanceOf(m.live);
      expect(items.reduce((sum, t) => sum + signed(t.amount), 0)).toBe(total(balance));
      const running: Record<string, number> = { available: 0, pending: 0, reserved: 0 };
      for (const t of [...items].reverse()) {
        running[t.bucket] += signed(t.amount);
        expect(signed(t.balanceAfter)).toBe(running[t.bucket]);
        expect(t).toMatchObject({ currency: 'RUB', createdAt: expect.any(String) });
        if (t.type === 'payment') expect(t.invoiceId).toEqual(expect.any(String));
      }
      for (const bucket of ['available', 'pending', 'reserved'] as const) expect(fromKopecks(running[bucket]!)).toBe(balance[bucket]);
      // A hold released is a move between buckets: its two transactions net to zero.
      const released = items.filter((t) => t.type === 'hold_released');
      expect(released.length).toBeGreaterThan(0);
      expect(released.reduce((sum, t) => sum + signed(t.amount), 0)).toBe(0);
      // The test key sees the test ledger: nothing here.
      expect((await m.test.get('/v1/balance/transactions')).body).toEqual({ items: [], nextCursor: null, hasMore: false });
    }
  });

  it('the transactions of a random period sum to the balance change over it (from the event log)', async () => {
    for (const m of merchants) {
      // Periods that have ended, whose rows are final (a `to` still to come lists the read model,
      // which trails the log: a refund settled by its worker meanwhile may be in the log, not yet listed).
      const now = (await gw.operator.advance(0)).getTime();
      const items = await allTransactions(m.live, `&to=${new Date(now).toISOString()}`);
      // The ledger's own entries, from the event log (all of those dated up to now, once they are final there):
      // what the balance did, independent of the read model.
      const stream = await gw.operator.http.get(`/admin/v1/streams/ledger-live_${m.accountId}?limit=1000`);
      expectStatus(stream, 200);
      const entries = (stream.body.events as Json[]).map((e) => ({
        at: Date.parse(e.data.occurredAt),
        moved: (e.data.postings as Json[]).filter((p) => ['available', 'pending', 'reserved'].includes(p.account)).reduce((sum, p) => sum + p.amount, 0),
      }));
      const first = Date.parse(items[items.length - 1].createdAt) - 60_000;
      const last = Math.min(Date.parse(items[0].createdAt) + 60_000, now);
      // Boundaries on the entries' own instants too, where off-by-one mistakes show.
      // In microseconds: a bound a fraction of a millisecond past an entry's instant must leave it out of from and in to.
      const instants = fc
        .tuple(
          fc.oneof(fc.integer({ min: first, max: last }), fc.constantFrom(...entries.map((e) => e.at))),
          fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 999 })),
        )
        .map(([ms, us]) => ms * 1000 + us);
      const written = (us: number) => new Date(Math.floor(us / 1000)).toISOString().replace('Z', `${String(us % 1000).padStart(3, '0')}Z`);
      await fc.assert(
        fc.asyncProperty(instants, instants, async (a, b) => {
          const [from, to] = a <= b ? [a, b] : [b, a];
          const period = await allTransactions(m.live, `&from=${written(from)}&to=${written(to)}`);
          const change = entries.filter((e) => e.at * 1000 >= from && e.at * 1000 < to).reduce((sum, e) => sum + e.moved, 0);
          expect(period.reduce((sum, t) => sum + signed(t.amount), 0)).toBe(change);
        }),
        { seed: fastCheckSeed('balance transactions periods'), numRuns: 25 },
      );
    }
  });

  it("a payout's transactions add up to what it paid out; other filters and the CSV agree", async () => {
    expect(payouts.length).toBeGreaterThan(0);
    for (const p of payouts) {
      const items = await allTransactions(p.owner.live, `&payoutId=${p.id}`);
      expect(items.every((t) => t.payoutId === p.id)).toBe(true);
      expect(items.reduce((sum, t) => sum + signed(t.amount), 0)).toBe(p.ending === 'paid' ? -p.amount : 0);
      const types = items.map((t) => t.type).sort();
      const reserved = ['payout_reserved', 'payout_reserved'];
      expect(types).toEqual(
        p.ending === 'paid' ? ['payout_paid', ...reserved] : p.ending === 'rejected' ? [...reserved, 'payout_returned', 'payout_returned'] : reserved,
      );
      if (p.ending === 'paid') expect(items.find((t) => t.type === 'payout_paid').fee).toMatch(/^\d+\.\d{2}$/);
    }
    const m = merchants[0]!;
    const all = await allTransactions(m.live);
    const payments = await allTransactions(m.live, '&type=payment');
    expect(payments.map((t) => t.id)).toEqual(all.filter((t) => t.type === 'payment').map((t) => t.id));
    for (const t of payments) expect(signed(t.amount)).toBeGreaterThan(0);
    const csv = await fetch(`${gw.baseUrl}/v1/balance/transactions`, { headers: { authorization: `Bearer ${m.keys.live.secretKey}`, accept: 'text/csv' } });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    // A download named by mode and period, as the operator's reports are.
    expect(csv.headers.get('content-disposition')).toBe('attachment; filename="balance-transactions-live.csv"');
    const period = await fetch(`${gw.baseUrl}/v1/balance/transactions?format=csv&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00.500Z`, {
      headers: { authorization: `Bearer ${m.keys.live.secretKey}` },
    });
    expect(period.headers.get('content-disposition')).toBe(
      'attachment; filename="balance-transactions-live-from-20260101T000000Z-to-20260201T000000.500Z.csv"',
    );
    await period.text();
    const lines = (await csv.text()).trimEnd().split('\r\n');
    expect(lines[0]).toBe('id,type,amount,bucket,balanceAfter,fee,currency,createdAt,availableAt,invoiceId,refundId,payoutId');
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual(all.map((t) => t.id));
  });

  it('a payment whose fee is nothing shows fee 0.00, not null (a zero fee posts nothing to the fees account)', async () => {
    const m = await gw.operator.merchant({ methods: { sbp: { feePct: '0.00' } } });
    await paidInvoice(gw.operator, m.live, '100.00');
    // Posted by the payments reactor after the payment: waited for.
    const [payment] = await poll(
      () => allTransactions(m.live, '&type=payment'),
      (items) => items.length === 1,
      'the payment in the ledger',
    );
    expect(payment).toMatchObject({ type: 'payment', amount: '100.00', fee: '0.00' });
  });

  it("the operator console's merchant page shows the latest balance transactions of the mode", async () => {
    const m = merchants[0]!;
    const latest = (await m.live.get('/v1/balance/transactions?limit=20')).body.items as Json[];
    const cookie = await login(gw.baseUrl, gw.gateway.adminToken);
    const page = await request(gw.baseUrl, 'GET', `/admin/accounts/${m.accountId}?mode=live`, { cookie });
    expect(page.status).toBe(200);
    expect(page.html).toContain('Движения баланса');
    const rows = [...page.html.matchAll(/<tr class="transaction"><td>[^]*?<\/td><td>([a-z_]+)<div/g)].map((r) => r[1]);
    expect(rows).toEqual(latest.map((t) => t.type));
  });

  it('refuses a bad query with the spec error', async () => {
    const m = merchants[0]!;
    expectError(await m.live.get('/v1/balance/transactions?type=gift'), 400, 'validation', 'type');
    expectError(await m.live.get('/v1/balance/transactions?payoutId=0'), 400, 'validation', 'payoutId');
    expectError(await m.live.get('/v1/balance/transactions?from=soon'), 400, 'validation', 'from');
    expectError(await m.live.get('/v1/balance/transactions?format=xml'), 400, 'validation', 'format');
    expectError(await m.live.get('/v1/balance/transactions?cursor=x!'), 400, 'validation', 'cursor');
    // A period that ends before it starts is refused, as by the statements and reports (not an empty page).
    const reversed = await m.live.get('/v1/balance/transactions?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z');
    expectError(reversed, 400, 'validation', 'to');
    expect(reversed.body.error.details).toEqual([expect.objectContaining({ param: 'to', code: 'invalid_range' })]);
    expectError(await m.live.get('/v1/balance/transactions?from=2026-01-01T00:00:00.0002Z&to=2026-01-01T00:00:00.0001Z'), 400, 'validation', 'to');
    expectError(await m.live.get('/v1/balance/transactions?from=2026-01-01T00:00:00.000000002Z&to=2026-01-01T00:00:00.000000001Z'), 400, 'validation', 'to');
    // An empty period (from = to, however written) is a period with nothing in it.
    expect((await m.live.get('/v1/balance/transactions?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z')).body).toMatchObject({ items: [] });
    expect((await m.live.get('/v1/balance/transactions?from=2026-01-01T00:00:00.0010Z&to=2026-01-01T00:00:00.001Z')).body).toMatchObject({ items: [] });
    expect((await m.live.get('/v1/balance/transactions?from=2026-01-01T00:00:00.0000001Z&to=2026-01-01T00:00:00.000000100Z')).body).toMatchObject({
      items: [],
    });
  });

  // The ledger projection writes a held payment's availableAt as its hold's scheduled end, never the later release.
  it("a held payment's availableAt is its hold's scheduled end (paid + 1 h), however late the hold was released", async () => {
    let late = 0;
    for (const m of merchants) {
      const items = await allTransactions(m.live);
      const payments = items.filter((t) => t.type === 'payment' && t.bucket === 'pending');
      expect(payments.length).toBeGreaterThan(0);
      for (const payment of payments) {
        const invoice = (await m.live.get(`/v1/invoices/${payment.invoiceId}`)).body as Json;
        expect({ invoice: payment.invoiceId, availableAt: payment.availableAt }).toEqual({
          invoice: payment.invoiceId,
          availableAt: new Date(Date.parse(invoice.paidAt) + 3_600_000).toISOString(),
        });
        const released = items.find((t) => t.type === 'hold_released' && t.invoiceId === payment.invoiceId)!;
        expect(released.availableAt).toBe(released.createdAt);
        expect(Date.parse(released.createdAt)).toBeGreaterThanOrEqual(Date.parse(payment.availableAt));
        if (Date.parse(released.createdAt) > Date.parse(payment.availableAt)) late++;
      }
    }
    // The clock jumps past the ends: most holds were released late.
    expect(late).toBeGreaterThan(0);
  });

  it('a CSV of 100,000 rows streams in flat memory', async () => {
    // A ledger of 100,000 payments written straight into the read model (the CSV reads nothing else).
    const m = await gw.operator.merchant();
    await gw.db.pool.query(
      `WITH e AS (
         INSERT INTO ledger_entries (entry_id, account_id, mode, seq, kind, cause, occurred_at, log_position)
         SELECT gen_random_uuid(), $1, 'test', i, 'payment_recorded', 'payment:' || gen_random_uuid(), now() + i * interval '1 second', 'seeded'
         FROM generate_series(0, 99999) AS i RETURNING entry_id, seq)
       INSERT INTO ledger_postings (entry_id, ordinal, account, amount, balance_after)
       SELECT entry_id, 0, 'available', 100, (seq + 1) * 100 FROM e`,
      [m.accountId],
    );
    const rss = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${gw.gateway.child.pid}/status`, 'utf8'))![1]) * 1024;
    // A first export warms the route up (code, pools, buffers) before the peak is read.
    await (
      await fetch(`${gw.baseUrl}/v1/balance/transactions?format=csv&to=${new Date(Date.now() - 86_400_000).toISOString()}`, {
        headers: { authorization: `Bearer ${m.keys.test.secretKey}` },
      })
    ).text();
    const before = rss();
    const reply = await fetch(`${gw.baseUrl}/v1/balance/transactions?format=csv`, { headers: { authorization: `Bearer ${m.keys.test.secretKey}` } });
    expect(reply.headers.get('content-length')).toBeNull();
    let bytes = 0;
    let rows = -1;
    const decoder = new TextDecoder();
    for await (const chunk of reply.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      rows += (decoder.decode(chunk, { stream: true }).match(/\r\n/g) ?? []).length;
    }
    const grew = rss() - before;
    console.log(`CSV of ${rows} rows, ${bytes} bytes: the gateway's peak RSS grew by ${grew} bytes`);
    expect(rows).toBe(100_000);
    // Held whole, the text alone would take `bytes` (and the driver's row objects several times that).
    expect(grew).toBeLessThan(bytes);
  }, 120_000);
});
