/**
 * CLOCK=manual over several processes on one database (docs/operations.md, "Deployment
 * and scaling": API processes and a projector). When POST /admin/v1/clock/advance
 * answers, every live process decides on the new time; a process that died does not
 * hold advances up, and one that is frozen makes them answer 503 (nothing moved).
 */
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { RunningGateway, RunningProcess, startGateway, startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { ADMIN_TOKEN, api, expectError, expectStatus, Merchant, Operator, orderId } from '../support/merchant-fixtures';

describe('the manual clock shared by two API processes and a projector', () => {
  let db: TestDatabase;
  let a: RunningGateway;
  let b: RunningGateway;
  let projector: RunningProcess;
  let operatorA: Operator;
  let operatorB: Operator;
  let merchant: Merchant;

  beforeAll(async () => {
    db = await createTestDatabase({ migrate: false });
    // As docs/operations.md starts them: ADMIN_TOKEN and PUBLIC_URL set on every process.
    const env = { DATABASE_URL: db.url, ADMIN_TOKEN, PUBLIC_URL: PROJECTOR_PUBLIC_URL, CLOCK: 'manual' };
    // One process migrates first; the others start on the migrated database together.
    a = await startGateway('api', env);
    [b, projector] = await Promise.all([
      startGateway('api', env),
      (async () => {
        const p = startProcess('projector', env);
        await p.waitForOutput(/running \d+ projections/);
        return p;
      })(),
    ]);
    operatorA = new Operator(a.baseUrl, ADMIN_TOKEN);
    operatorB = new Operator(b.baseUrl, ADMIN_TOKEN);
    merchant = await operatorA.merchant();
  });
  afterAll(async () => {
    await Promise.all([a?.kill(), b?.kill(), projector?.kill()]);
    await db?.drop();
  });

  const createInvoice = async (expire: number) => {
    const r = await merchant.test.post('/v1/invoices', { orderId: orderId('clock'), amount: '100.00', method: 'sbp', expire });
    expectStatus(r, 201);
    return r.body;
  };

  it('a payment recorded through B right after A moved the clock past expiresAt is refused 409, round after round', async () => {
    for (let round = 0; round < 6; round++) {
      const invoice = await createInvoice(1);
      await operatorA.advance(65);
      const late = await operatorB.payment(invoice.id, 'paid');
      if (late.status !== 409) throw new Error(`round ${round}: ${late.status} ${JSON.stringify(late.body)}`);
      expectError(late, 409, 'conflict');
    }
  });

  it('an invoice created through A right after a long advance is paid through B at or after its creation', async () => {
    for (let round = 0; round < 4; round++) {
      const now = await operatorA.advance(600);
      const invoice = await createInvoice(60);
      const paid = await operatorB.payment(invoice.id, 'paid');
      expectStatus(paid, 200);
      expect(paid.body.id).toBe(invoice.id);
      expect(Date.parse(paid.body.createdAt)).toBeGreaterThanOrEqual(now.getTime());
      expect(Date.parse(paid.body.paidAt)).toBeGreaterThanOrEqual(Date.parse(paid.body.createdAt));
    }
  });

  it.each([
    ['API process B', () => b],
    ['the projector', () => projector],
  ])('%s frozen makes an advance answer 503 without moving the clock; thawed, the advance goes through', async (_, frozen) => {
    const before = await operatorA.advance(0);
    frozen().child.kill('SIGSTOP');
    try {
      const refused = await api(a.baseUrl, ADMIN_TOKEN).post('/admin/v1/clock/advance', { seconds: 3600 });
      expectError(refused, 503, 'provider_unavailable');
      expect(refused.headers.get('retry-after')).toBe('1');
    } finally {
      frozen().child.kill('SIGCONT');
    }
    const after = await operatorB.advance(0);
    // Only real time passed: the refused hour was not added.
    expect(after.getTime() - before.getTime()).toBeLessThan(3600_000);
  });

  it('a process that died does not hold advances up', async () => {
    await b.kill('SIGKILL');
    const invoice = await createInvoice(1);
    await operatorA.advance(65);
    expectError(await operatorA.payment(invoice.id, 'paid'), 409, 'conflict');
  });

  it('the clock is not moved past year 9000 (past 9999 no ISO instant names it, and every projection would stop for good)', async () => {
    // The clock as about 700 advances of ten years leave it, set in the table the advances move (0 s reads it back).
    const late = Date.parse('8995-06-01T00:00:00Z');
    await db.pool.query('UPDATE manual_clock SET offset_ms = $1::bigint - (extract(epoch FROM clock_timestamp()) * 1000)::bigint', [late]);
    const now = Date.parse((await operatorA.advance(0)).toISOString());
    expect(now).toBeGreaterThanOrEqual(late);
    const refused = await operatorA.http.post('/admin/v1/clock/advance', { seconds: 10 * 365 * 24 * 3600 });
    expectError(refused, 400, 'validation');
    expect(refused.body.error.param).toBe('seconds');
    expect(Date.parse((await operatorA.advance(0)).toISOString()) - now).toBeLessThan(60_000);
    // A year is still allowed, and the gateway works on it.
    await operatorA.advance(365 * 24 * 3600);
    const invoice = await createInvoice(60);
    expect(invoice.expiresAt.startsWith('8996-')).toBe(true);
  });

  it('concurrent advances near year 9000 never take the clock past it: the database refuses what the race lets through', async () => {
    const bound = Date.parse('9000-01-01T00:00:00Z');
    // An hour before the bound (set as above); then 12 advances of 20 minutes at once, each within it on its own.
    await db.pool.query('UPDATE manual_clock SET offset_ms = $1::bigint - (extract(epoch FROM clock_timestamp()) * 1000)::bigint', [bound - 3600_000]);
    expect((await operatorA.advance(0)).getTime()).toBeGreaterThanOrEqual(bound - 3600_000);
    const replies = await Promise.all(Array.from({ length: 12 }, () => api(a.baseUrl, ADMIN_TOKEN).post('/admin/v1/clock/advance', { seconds: 1200 })));
    const refused = replies.filter((r) => r.status === 400);
    expect(replies.filter((r) => r.status === 200).length + refused.length).toBe(replies.length);
    expect(refused.length).toBeGreaterThanOrEqual(9);
    for (const r of refused) {
      expectError(r, 400, 'validation', 'seconds');
      expect(r.body.error.message).toContain('часы нельзя перевести дальше 9000 года');
    }
    expect((await operatorA.advance(0)).getTime()).toBeLessThanOrEqual(bound);
  });

  it('once real time takes the clock past year 9000, {"seconds": 0} still reads it and any move is refused', async () => {
    const bound = Date.parse('9000-01-01T00:00:00Z');
    // Where real time leaves a clock advanced to just before the bound (set as above): a minute past it.
    await db.pool.query('UPDATE manual_clock SET offset_ms = $1::bigint - (extract(epoch FROM clock_timestamp()) * 1000)::bigint', [bound + 60_000]);
    const now = await operatorA.advance(0);
    expect(now.getTime()).toBeGreaterThan(bound);
    expect((await operatorA.advance(0)).getTime()).toBeGreaterThanOrEqual(now.getTime());
    expectError(await operatorA.http.post('/admin/v1/clock/advance', { seconds: 1 }), 400, 'validation', 'seconds');
    expect((await operatorA.advance(0)).getTime() - now.getTime()).toBeLessThan(60_000);
  });
});
