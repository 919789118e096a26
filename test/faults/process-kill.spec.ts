/**
 * SIGKILL under load, in the split deployment: one database, one `api` process and
 * one `projector` process. A steady load of merchant writes runs the whole time:
 * invoice creates with orderIds, operator payments, refunds of paid invoices, and
 * payouts with orderIds (each taken through approve, process, pay) of a funded live
 * merchant.
 *
 * (a) The projector is killed mid-load, the load goes on, the projector is started
 *     again: every write is still answered, the read models converge on the log
 *     (GET /v1/invoices lists every acknowledged invoice with its stream's status,
 *     GET /v1/balance equals the balance rebuilt from the log), and ledger:verify
 *     passes.
 * (b) The API is killed mid-load and started again on a new port; every request that
 *     was never answered is sent again with its orderId. Every acknowledged invoice
 *     and payout exists exactly once, nothing acknowledged is lost, the read models
 *     converge and ledger:verify passes.
 */
import { RunningGateway, RunningProcess, startGateway, startProcess, PROJECTOR_PUBLIC_URL } from '../support/gateway-process';
import { api, Client, expectStatus, Json, listAll, Merchant, Operator, orderId, poll, Reply, sleep } from '../support/merchant-fixtures';
import { fund, payoutAddress, PHONE } from '../support/money-out-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import type { Random } from '../../apps/tools/src/seed/random';
import { intBelow, seededRandom } from '../support/test-seed';

const ADMIN_TOKEN = 'operator-token-for-process-kill-0042';

jest.setTimeout(150_000);

interface Attempt {
  readonly orderId: string;
  readonly amount: string;
  /** The last answer: undefined while none arrived (the request died with the API). */
  answer?: Reply;
}

/** Everything the load sent and what it was told. */
interface Ledger {
  readonly invoices: Attempt[];
  /** Invoices whose payment was acknowledged (200). */
  readonly paid: Set<string>;
  /** Acknowledged refunds (202): refund id → invoice id. */
  readonly refunds: Map<string, string>;
  readonly payouts: Attempt[];
  /** Requests that got no answer (connection refused or reset). */
  unanswered: number;
  /** Every answer, as "status code" (e.g. "201", "409 too_many_pending"). */
  readonly statuses: Map<string, number>;
}

const statusOf = (r: Reply) => (r.status < 300 ? String(r.status) : `${r.status} ${r.body?.error?.code}`);

describe('SIGKILL of the API and of the projector under load (split deployment)', () => {
  let db: TestDatabase;
  let apiProcess: RunningGateway | null = null;
  let projector: RunningProcess | null = null;
  let merchant: Merchant;
  let addressId: number;
  /** The load's choices (amounts, which invoice): seeded per test, printed, replayed with TEST_SEED. */
  let rng: Random;
  beforeEach(() => {
    rng = seededRandom(`process-kill ${expect.getState().currentTestName ?? ''}`);
  });
  const env = () => ({
    DATABASE_URL: db.url,
    ADMIN_TOKEN,
    // The campaign's refunds complete within its convergence wait, not 10 s after each was asked for.
    REFUND_PROCESSING_SECONDS: '1',
    // The load Sends more than 60 requests a second with one key; the rate limit has its own suite (rate-limits.spec.ts).
    RATE_LIMIT_PER_SECOND: '1000000',
    // The convergence check reads every acknowledged invoice, some of them twice within 3 s.
    POLL_INTERVAL_SECONDS: '0',
  });
  const log: Ledger = { invoices: [], paid: new Set(), refunds: new Map(), payouts: [], unanswered: 0, statuses: new Map() };

  /** Clients of the API process running now (a restarted API listens on a new port). */
  const merchantClient = (): Client => api(apiProcess!.baseUrl, merchant.keys.live.secretKey);
  const operator = (): Operator => new Operator(apiProcess!.baseUrl, ADMIN_TOKEN);

  const startProjector = async () => {
    projector = startProcess('projector', { ...env(), PUBLIC_URL: PROJECTOR_PUBLIC_URL });
    await projector.waitForOutput(/running \d+ projections/);
  };

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    apiProcess = await startGateway('api', env());
    await startProjector();
    merchant = await operator().merchant({ holdHours: 0 });
    await fund(operator(), merchant, 'live', ['5000.00', '5000.00', '5000.00', '5000.00']);
    addressId = (await payoutAddress(operator(), merchant.accountId, { method: 'sbp', account: PHONE })).id;
  });

  afterAll(async () => {
    await apiProcess?.kill('SIGKILL');
    await projector?.kill('SIGKILL');
    await db?.drop();
  });

  /** One request through the API running now; undefined when the API did not answer. */
  async function send(request: () => Promise<Reply>): Promise<Reply | undefined> {
    try {
      const reply = await request();
      log.statuses.set(statusOf(reply), (log.statuses.get(statusOf(reply)) ?? 0) + 1);
      return reply;
    } catch {
      log.unanswered++;
      await sleep(50);
      return undefined;
    }
  }

  /** Takes an acknowledged payout through approve, process and pay (a 409 means that step is behind it). */
  async function finishPayout(id: number): Promise<boolean> {
    for (const step of ['approve', 'process', 'pay']) {
      const r = await send(() => operator().http.post(`/admin/v1/payouts/${id}/${step}`));
      if (r === undefined) return false;
      if (r.status !== 200 && r.status !== 409) throw new Error(`payout ${id} ${step}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    return true;
  }

  /** The steady load: several loops of writes until `stop()`; resolves when they all ended. */
  function startLoad(): { stop(): Promise<void> } {
    let running = true;
    const loop = async (step: () => Promise<void>) => {
      while (running) {
        await step();
        await sleep(10);
      }
    };
    const createInvoice = async () => {
      const attempt: Attempt = { orderId: orderId('kill-invoice'), amount: `${intBelow(rng, 500, 3000)}.00` };
      log.invoices.push(attempt);
      attempt.answer = await send(() => merchantClient().post('/v1/invoices', { amount: attempt.amount, orderId: attempt.orderId, method: 'sbp' }));
    };
    const payInvoice = async () => {
      const unpaid = log.invoices.filter((a) => a.answer?.status === 201 && !log.paid.has(a.answer.body.id));
      if (unpaid.length === 0) return sleep(20);
      const id = unpaid[intBelow(rng, 0, unpaid.length)]!.answer!.body.id as string;
      const r = await send(() => operator().payment(id, 'paid'));
      if (r?.status === 200) log.paid.add(id);
    };
    const refund = async () => {
      const paid = [...log.paid];
      if (paid.length === 0) return sleep(20);
      const invoiceId = paid[intBelow(rng, 0, paid.length)]!;
      const r = await send(() => merchantClient().post(`/v1/invoices/${invoiceId}/refund`, { amount: `${intBelow(rng, 10, 60)}.00` }));
      if (r?.status === 202) log.refunds.set(r.body.id, invoiceId);
    };
    const payout = async () => {
      const attempt: Attempt = { orderId: orderId('kill-payout'), amount: `${intBelow(rng, 100, 200)}.00` };
      log.payouts.push(attempt);
      attempt.answer = await send(() => merchantClient().post('/v1/payouts', { amount: attempt.amount, addressId, orderId: attempt.orderId }));
      if (attempt.answer?.status === 201) await finishPayout(attempt.answer.body.id);
    };
    const loops = [loop(createInvoice), loop(createInvoice), loop(payInvoice), loop(refund), loop(payout)];
    return {
      async stop() {
        running = false;
        await Promise.all(loops);
      },
    };
  }

  /** Lets the load run for at least `ms` and until `n` more invoices were acknowledged. */
  async function waitForProgress(n: number, ms = 1000): Promise<void> {
    const start = log.invoices.filter((a) => a.answer?.status === 201).length;
    await sleep(ms);
    await poll(
      async () => log.invoices.filter((a) => a.answer?.status === 201).length,
      (count) => count >= start + n,
      `${n} more invoices acknowledged`,
      30_000,
    );
  }

  /** The read models have converged on the log and the ledger verifies. */
  async function expectConverged(): Promise<void> {
    const pool = db.pool;
    // Half-done requests are recovered, refunds complete (REFUND_PROCESSING_SECONDS=1).
    await poll(
      async () =>
        (
          await pool.query<{ n: string }>(
            `SELECT (SELECT count(*) FROM refunds WHERE status IN ('requested', 'pending')) + (SELECT count(*) FROM payouts WHERE status = 'requested') AS n`,
          )
        ).rows[0]!.n,
      (n) => n === '0',
      'refunds completed and half-done requests recovered',
      45_000,
    );
    const client = merchantClient();
    const acknowledged = log.invoices.filter((a) => a.answer?.status === 201 || a.answer?.status === 200);
    // Every acknowledged invoice is listed, with the status its own stream has.
    const listed = await poll(
      () => listAll(client),
      (items) => acknowledged.every((a) => items.some((i: Json) => i.id === a.answer!.body.id)),
      'GET /v1/invoices to list every acknowledged invoice',
      30_000,
    );
    // Each invoice's own stream against the list, both read again until they agree: a
    // refund's outcome reaches its invoice through the refund_outcomes reactor, after the
    // refunds read model shows it succeeded.
    const streamStatuses = async (): Promise<Map<string, string>> => {
      const statuses = new Map<string, string>();
      for (const a of acknowledged) {
        const r = await client.get(`/v1/invoices/${a.answer!.body.id}`);
        expectStatus(r, 200);
        statuses.set(r.body.id, r.body.status);
      }
      return statuses;
    };
    const { streamStatus, listedStatus } = await poll(
      async () => ({
        streamStatus: await streamStatuses(),
        listedStatus: new Map((await listAll(client)).map((i: Json) => [i.id as string, i.status as string])),
      }),
      ({ streamStatus, listedStatus }) => [...streamStatus].every(([id, status]) => listedStatus.get(id) === status),
      'the listed statuses to equal the streams',
      30_000,
    );
    for (const [id, status] of streamStatus) expect({ id, status: listedStatus.get(id) }).toEqual({ id, status });
    expect(listed.length).toBeGreaterThanOrEqual(acknowledged.length);
    // No acknowledged payment lost: paid, or refunded since.
    for (const id of log.paid) expect(['paid', 'partially_refunded', 'refunded']).toContain(streamStatus.get(id));
    // Every acknowledged refund exists and has succeeded.
    for (const [refundId, invoiceId] of log.refunds) {
      const r = await client.get(`/v1/refunds/${refundId}`);
      expectStatus(r, 200);
      expect({ refundId, invoiceId: r.body.invoiceId, status: r.body.status }).toEqual({ refundId, invoiceId, status: 'succeeded' });
    }
    // The balance the merchant sees equals the one rebuilt from the log.
    const rebuilt = await operator().http.get(`/admin/v1/accounts/${merchant.accountId}/balance?mode=live`);
    expectStatus(rebuilt, 200);
    const seen = await poll(
      () => client.get('/v1/balance'),
      (r) => r.status === 200 && ['available', 'pending', 'reserved'].every((k) => r.body[k] === rebuilt.body[k]),
      'GET /v1/balance to equal the ledger rebuilt from the log',
      30_000,
    );
    expect({ available: seen.body.available, pending: seen.body.pending, reserved: seen.body.reserved }).toEqual({
      available: rebuilt.body.available,
      pending: rebuilt.body.pending,
      reserved: rebuilt.body.reserved,
    });
    const verify = startProcess('ledger-verify', { DATABASE_URL: db.url });
    const code = await verify.exited;
    expect({ code, output: verify.output() }).toEqual({ code: 0, output: expect.stringContaining('OK') });
  }

  /**
   * Every acknowledged payout exists once: found by its orderId, with one reservation in
   * the ledger; or, when its request died half-way and the ledger then refused it, rejected
   * and shown with that refusal recorded once (the retry with its orderId answered it, 200).
   */
  async function expectPayoutsOnce(): Promise<void> {
    const accepted = log.payouts.filter((p) => p.answer?.status === 201 || p.answer?.status === 200);
    expect(new Set(accepted.map((p) => p.answer!.body.id)).size).toBe(accepted.length);
    for (const p of accepted) {
      const r = await merchantClient().get(`/v1/payouts?orderId=${encodeURIComponent(p.orderId)}`);
      expectStatus(r, 200);
      expect({ orderId: p.orderId, id: r.body.id, amount: r.body.amount }).toEqual({ orderId: p.orderId, id: p.answer!.body.id, amount: p.amount });
    }
    const reservations = await db.pool.query<{ cause: string; kind: string; n: string }>(
      `SELECT data->>'cause' AS cause, data->>'kind' AS kind, count(*) AS n FROM events
       WHERE stream_name = $1 AND data->>'kind' IN ('funds_reserved', 'reservation_refused') GROUP BY 1, 2`,
      [`ledger-live_${merchant.accountId}`],
    );
    const reserved = new Map(reservations.rows.filter((r) => r.kind === 'funds_reserved').map((r) => [r.cause, Number(r.n)]));
    const refused = new Map(reservations.rows.filter((r) => r.kind === 'reservation_refused').map((r) => [r.cause, Number(r.n)]));
    for (const p of accepted) {
      const cause = `reserve:po_${p.answer!.body.id}`;
      const rejected = refused.has(cause) ? (await merchantClient().get(`/v1/payouts?orderId=${encodeURIComponent(p.orderId)}`)).body.status : null;
      expect({ payout: p.answer!.body.id, reservations: reserved.get(cause) ?? 0, refusals: refused.get(cause) ?? 0, rejected }).toEqual({
        payout: p.answer!.body.id,
        reservations: refused.has(cause) ? 0 : 1,
        refusals: refused.has(cause) ? 1 : 0,
        rejected: refused.has(cause) ? 'rejected' : null,
      });
    }
    for (const [refundId] of log.refunds) expect({ refundId, reservations: reserved.get(`reserve:${refundId}`) }).toEqual({ refundId, reservations: 1 });
  }

  it('(a) projector killed mid-load and restarted: every write answered, read models converge, ledger verifies', async () => {
    const load = startLoad();
    await waitForProgress(10);
    await projector!.kill('SIGKILL');
    // The API goes on taking writes without its projector.
    await waitForProgress(15, 2000);
    // Nothing projects meanwhile: the invoices acknowledged since the kill are not listed yet.
    const listedDuringOutage = new Set((await listAll(merchantClient())).map((i: Json) => i.id as string));
    expect(log.invoices.filter((a) => a.answer?.status === 201 && !listedDuringOutage.has(a.answer.body.id)).length).toBeGreaterThanOrEqual(15);
    await startProjector();
    await waitForProgress(10);
    await load.stop();

    // The API never went away: every request was answered, none with a server error.
    expect(log.unanswered).toBe(0);
    const tally = Object.fromEntries(log.statuses);
    console.log('(a) answers:', tally, 'invoices', log.invoices.length, 'paid', log.paid.size, 'refunds', log.refunds.size, 'payouts', log.payouts.length);
    for (const status of log.statuses.keys())
      expect(status).toMatch(/^(200|201|202|409 (too_many_pending|conflict)|422 (insufficient_balance|refund_exceeds_amount))$/);
    expect(log.invoices.every((a) => a.answer?.status === 201)).toBe(true);
    expect(log.paid.size).toBeGreaterThan(0);
    expect(log.refunds.size).toBeGreaterThan(0);
    expect(log.payouts.some((p) => p.answer?.status === 201)).toBe(true);

    await expectConverged();
    await expectPayoutsOnce();
  });

  it('(b) API killed mid-load and restarted: unanswered requests retried by orderId, each acknowledged write exists once', async () => {
    log.unanswered = 0;
    log.statuses.clear();
    const load = startLoad();
    await waitForProgress(10);
    await apiProcess!.kill('SIGKILL');
    const unansweredAtKill = log.unanswered;
    // The load keeps knocking (connections refused) while a new API process starts.
    await sleep(500);
    apiProcess = await startGateway('api', env());
    await waitForProgress(10);
    await load.stop();
    expect(log.unanswered).toBeGreaterThan(unansweredAtKill);

    // The merchant retries what was never answered, with the same orderIds.
    const unansweredInvoices = log.invoices.filter((a) => a.answer === undefined);
    const unansweredPayouts = log.payouts.filter((p) => p.answer === undefined);
    console.log('(b) unanswered: invoices', unansweredInvoices.length, 'payouts', unansweredPayouts.length, 'requests', log.unanswered);
    const retried = new Map<string, number>();
    for (const a of unansweredInvoices) {
      a.answer = await merchantClient().post('/v1/invoices', { amount: a.amount, orderId: a.orderId, method: 'sbp' });
      // 200: the dead API had written it before dying; 201: it had not.
      expect([200, 201]).toContain(a.answer.status);
      retried.set(`invoice ${a.answer.status}`, (retried.get(`invoice ${a.answer.status}`) ?? 0) + 1);
    }
    // Payouts left half-way through their steps by the kill are finished first (at most three may be unfinished).
    for (const p of log.payouts) if (p.answer?.status === 201 || p.answer?.status === 200) expect(await finishPayout(p.answer.body.id)).toBe(true);
    for (const p of unansweredPayouts) {
      p.answer = await merchantClient().post('/v1/payouts', { amount: p.amount, addressId, orderId: p.orderId });
      expect(statusOf(p.answer)).toMatch(/^(200|201|409 too_many_pending|422 insufficient_balance)$/);
      retried.set(`payout ${statusOf(p.answer)}`, (retried.get(`payout ${statusOf(p.answer)}`) ?? 0) + 1);
      if (p.answer.status === 201 || p.answer.status === 200) expect(await finishPayout(p.answer.body.id)).toBe(true);
    }
    console.log('(b) retries answered:', Object.fromEntries(retried));

    for (const status of log.statuses.keys())
      expect(status).toMatch(/^(200|201|202|409 (too_many_pending|conflict)|422 (insufficient_balance|refund_exceeds_amount))$/);
    await expectConverged();
    // Each invoice exactly once: one per orderId, the one acknowledged.
    for (const a of log.invoices) {
      const r = await merchantClient().get(`/v1/invoices?orderId=${encodeURIComponent(a.orderId)}`);
      expectStatus(r, 200);
      expect({ orderId: a.orderId, ids: r.body.items.map((i: Json) => i.id) }).toEqual({ orderId: a.orderId, ids: [a.answer!.body.id] });
    }
    await expectPayoutsOnce();
  });
});
