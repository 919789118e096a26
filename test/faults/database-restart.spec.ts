/**
 * PostgreSQL restarted under load. This file runs its own embedded PostgreSQL (the
 * shared server of the test run is used by other files at the same time), a gateway
 * process (API + projector + workers) against it, and a steady load of invoice
 * creates with orderIds and payments. The server is stopped, the load goes on for a
 * few seconds, the server is started again on the same port, the load goes on.
 *
 * - During the outage every request is answered: success, or 503 provider_unavailable
 *   with Retry-After; never a 500 or another error.
 * - Nothing is half-applied: every 201 exists; every 503 is retried after recovery
 *   with its orderId and answers 200 or 201, one invoice per orderId.
 * - The service recovers by itself (the gateway is not restarted): readiness is back,
 *   new writes succeed, the projections catch up, ledger:verify passes.
 */
import { RunningGateway, startGateway, startProcess, temporaryDataDir } from '../support/gateway-process';
import { Client, expectStatus, Json, listAll, Merchant, Operator, orderId, poll, Reply, sleep } from '../support/merchant-fixtures';
import { PrivatePostgres, startPrivatePostgres } from '../support/private-postgres';

const ADMIN_TOKEN = 'operator-token-for-database-restart-42';
const OUTAGE_MS = 3000;

jest.setTimeout(120_000);

interface Sent {
  readonly kind: 'create' | 'payment';
  readonly phase: 'before' | 'outage' | 'after';
  /** The answer, or undefined when there was none (`error` says why). */
  readonly reply?: Reply;
  readonly error?: string;
}

interface InvoiceAttempt {
  readonly orderId: string;
  readonly amount: string;
  answers: Reply[];
}

describe('PostgreSQL restarted under load', () => {
  let dataDir: { dir: string; remove(): void };
  let server: PrivatePostgres | null = null;
  let port: number;
  let databaseUrl: string;
  let gateway: RunningGateway | null = null;

  beforeAll(async () => {
    dataDir = temporaryDataDir();
    server = await startPrivatePostgres(dataDir.dir);
    databaseUrl = server.url;
    port = Number(new URL(databaseUrl).port);
    gateway = await startGateway('gateway', {
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN,
      // The load Sends more than 60 requests a second with one key; the rate limit has its own suite (rate-limits.spec.ts).
      RATE_LIMIT_PER_SECOND: '1000000',
    });
  });

  afterAll(async () => {
    await gateway?.kill('SIGKILL');
    await server?.stop();
    dataDir?.remove();
  });

  it('answers 503 provider_unavailable or succeeds, applies nothing by half, and recovers by itself', async () => {
    const operator = new Operator(gateway!.baseUrl, ADMIN_TOKEN);
    // holdHours 0: paid money is released by the hold-release worker, a periodic worker that must outlive the outage.
    const merchant: Merchant = await operator.merchant({ holdHours: 0 });
    const client: Client = merchant.test;

    const sent: Sent[] = [];
    const invoices: InvoiceAttempt[] = [];
    /** Invoices created (201) and not yet paid; payments answered 200; payments answered 503. */
    const unpaid: string[] = [];
    const paid = new Set<string>();
    const paymentsRefused = new Set<string>();
    let phase: Sent['phase'] = 'before';
    let pageDuringOutage: { status: number; retryAfter: string | null; type: string | null } | null = null;
    let running = true;

    const record = async (kind: Sent['kind'], request: () => Promise<Reply>): Promise<Reply | null> => {
      const at = phase;
      try {
        const reply = await request();
        sent.push({ kind, phase: at, reply });
        return reply;
      } catch (error) {
        sent.push({ kind, phase: at, error: String((error as Error).cause ?? error) });
        await sleep(50);
        return null;
      }
    };
    const createLoop = async () => {
      while (running) {
        const attempt: InvoiceAttempt = { orderId: orderId('restart'), amount: '150.00', answers: [] };
        invoices.push(attempt);
        const r = await record('create', () => client.post('/v1/invoices', { amount: attempt.amount, orderId: attempt.orderId, method: 'sbp' }));
        if (r) attempt.answers.push(r);
        if (r?.status === 201) unpaid.push(r.body.id);
        await sleep(r?.status === 503 ? 50 : 10);
      }
    };
    const payLoop = async () => {
      while (running) {
        const id = unpaid.shift();
        if (id === undefined) {
          await sleep(20);
          continue;
        }
        const r = await record('payment', () => operator.payment(id, 'paid'));
        if (r?.status === 200) paid.add(id);
        else paymentsRefused.add(id);
        await sleep(r?.status === 503 ? 50 : 10);
      }
    };
    const loops = [createLoop(), createLoop(), payLoop()];

    const tally = () => {
      const counts: Record<string, number> = {};
      for (const s of sent) {
        const key = `${s.phase} ${s.kind} ${!s.reply ? `no answer (${s.error})` : s.reply.status < 300 ? s.reply.status : `${s.reply.status} ${s.reply.body?.error?.code}`}`;
        counts[key] = (counts[key] ?? 0) + 1;
      }
      return counts;
    };
    try {
      await sleep(1500);
      phase = 'outage';
      await server!.stop();
      server = null;
      // The buyer's payment page of an invoice made before: a 503 page with Retry-After, as every route answers.
      const shown = invoices.flatMap((a) => a.answers).find((r) => r.status === 201)!.body.id as string;
      const page = await fetch(`${gateway!.baseUrl}/pay/${shown}`, { headers: { accept: 'text/html' } });
      pageDuringOutage = { status: page.status, retryAfter: page.headers.get('retry-after'), type: page.headers.get('content-type') };
      await sleep(OUTAGE_MS);
      server = await startPrivatePostgres(dataDir.dir, { port });
      phase = 'after';
      // Until writes go through again, and a little longer.
      await poll(
        async () => sent.filter((s) => s.phase === 'after' && s.kind === 'create' && s.reply?.status === 201).length,
        (n) => n >= 10,
        'writes to succeed again after the restart',
        30_000,
      );
    } catch (error) {
      console.log('answers so far:', tally(), '\ngateway output:\n', gateway!.output().slice(-5000));
      throw error;
    } finally {
      running = false;
      await Promise.all(loops);
    }

    // The gateway process lived through it (nobody restarted it).
    expect(gateway!.child.exitCode).toBeNull();
    console.log('answers:', tally());

    // Every request was answered: success, or 503 provider_unavailable with Retry-After.
    for (const s of sent) {
      expect({ answered: s.reply !== undefined, error: s.error }).toEqual({ answered: true, error: undefined });
      const reply = s.reply!;
      if (reply.status === 503) {
        expect({ code: reply.body?.error?.code, retryAfter: reply.headers.get('retry-after') }).toEqual({
          code: 'provider_unavailable',
          retryAfter: expect.stringMatching(/^\d+$/),
        });
      } else {
        expect({ kind: s.kind, status: reply.status, body: reply.status >= 400 ? reply.body : null }).toEqual({
          kind: s.kind,
          status: s.kind === 'create' ? 201 : 200,
          body: null,
        });
      }
    }
    expect(pageDuringOutage).toEqual({ status: 503, retryAfter: expect.stringMatching(/^\d+$/), type: 'text/html; charset=utf-8' });
    // The outage was seen, and the load went on both sides of it.
    expect(sent.some((s) => s.phase === 'outage' && s.reply?.status === 503)).toBe(true);
    expect(sent.some((s) => s.phase === 'before' && s.reply?.status === 201)).toBe(true);

    // The service is ready again, by itself.
    await poll(
      () => fetch(`${gateway!.baseUrl}/health/ready`).then((r) => r.status),
      (s) => s === 200,
      'GET /health/ready to answer 200',
      30_000,
    );

    // Every create that got no 201 is retried with its orderId: 200 (it was written) or 201 (it was not).
    const retried: Record<string, number> = {};
    for (const attempt of invoices) {
      if (attempt.answers.some((a) => a.status === 201)) continue;
      const r = await client.post('/v1/invoices', { amount: attempt.amount, orderId: attempt.orderId, method: 'sbp' });
      expect([200, 201]).toContain(r.status);
      attempt.answers.push(r);
      retried[`create ${r.status}`] = (retried[`create ${r.status}`] ?? 0) + 1;
    }
    // Payments answered 503 are sent again: paid now, or already paid (409 conflict) by the first attempt.
    for (const id of paymentsRefused) {
      const r = await operator.payment(id, 'paid');
      retried[`payment ${r.status}`] = (retried[`payment ${r.status}`] ?? 0) + 1;
      expect({ id, status: r.status, code: r.body?.error?.code }).toEqual({
        id,
        status: r.status === 200 ? 200 : 409,
        code: r.status === 200 ? undefined : 'conflict',
      });
      paid.add(id);
    }
    console.log('retried after recovery:', retried);
    // A new write succeeds.
    const fresh = await client.post('/v1/invoices', { amount: '150.00', orderId: orderId('after-restart'), method: 'sbp' });
    expectStatus(fresh, 201);

    // One invoice per orderId, the one the answers named; the projections caught up with all of them.
    const ids = new Map<string, string>();
    for (const attempt of invoices) {
      const named = new Set(attempt.answers.filter((a) => a.status === 200 || a.status === 201).map((a) => a.body.id as string));
      expect({ orderId: attempt.orderId, ids: named.size }).toEqual({ orderId: attempt.orderId, ids: 1 });
      ids.set(attempt.orderId, [...named][0]!);
    }
    const listed = await poll(
      () => listAll(client),
      (items) =>
        [...ids.values(), fresh.body.id].every((id) => items.some((i: Json) => i.id === id)) &&
        [...paid].every((id) => items.find((i: Json) => i.id === id)?.status === 'paid'),
      'GET /v1/invoices to list every invoice, the paid ones paid',
      30_000,
    );
    expect(listed).toHaveLength(ids.size + 1);
    for (const [order, id] of ids) {
      const r = await client.get(`/v1/invoices?orderId=${encodeURIComponent(order)}`);
      expectStatus(r, 200);
      expect({ order, ids: r.body.items.map((i: Json) => i.id) }).toEqual({ order, ids: [id] });
    }
    expect(paid.size).toBeGreaterThan(0);

    // The projection runners are live again, and the workers run: every paid invoice's money
    // was released from pending (hold-release), the read model equal to the ledger rebuilt from the log.
    const ready = await poll(
      () =>
        fetch(`${gateway!.baseUrl}/health/ready`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as Json,
        })),
      (r) => r.status === 200 && (r.body.projections as Json[]).every((p) => p.state === 'live'),
      'every projection live again',
      30_000,
    );
    expect((ready.body.projections as Json[]).length).toBeGreaterThan(0);
    const rebuilt = await poll(
      () => operator.http.get(`/admin/v1/accounts/${merchant.accountId}/balance?mode=test`),
      (r) => r.status === 200 && r.body.pending === '0.00',
      'the hold-release worker to release every paid invoice',
      30_000,
    );
    expect(rebuilt.body.available).not.toBe('0.00');
    await poll(
      () => client.get('/v1/balance'),
      (r) => r.status === 200 && r.body.available === rebuilt.body.available && r.body.pending === '0.00',
      'GET /v1/balance to equal the ledger',
      30_000,
    );

    const verify = startProcess('ledger-verify', { DATABASE_URL: databaseUrl });
    const code = await verify.exited;
    expect({ code, output: verify.output() }).toEqual({ code: 0, output: expect.stringContaining('OK') });
  });
});
