/**
 * `npm run projections:rebuild` against a running gateway (issue 33, item 1), as
 * docs/operations.md tells an operator to run it: the gateway (`npm start`: API,
 * projector and workers in one process) stays up and idle, no write wakes its
 * projector. The command takes every projection over from the projector before it
 * changes anything; meanwhile every read of a read model is right (old or rebuilt)
 * or 503 with Retry-After, never an empty or zero answer; readiness shows the
 * rebuild with its progress; afterwards the projector is the active instance again.
 * A command interrupted at any point (Ctrl-C: SIGINT; or SIGKILL) leaves the read
 * models whole: the projector finishes the rebuild and the reads come back right.
 */
import { RunningGateway, RunningProcess, startGateway, startProcess } from '../support/gateway-process';
import { Client, expectStatus, Merchant, Operator, orderId, poll } from '../support/merchant-fixtures';
import { fromKopecks, fund, PHONE, payoutAddress, toKopecks } from '../support/money-out-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ADMIN_TOKEN = 'operator-token-for-rebuild-while-running-0042';
const INVOICES = 40;

interface Seen {
  readonly what: string;
  readonly status: number;
  readonly body: string;
}

describe('projections:rebuild while the gateway runs', () => {
  let db: TestDatabase;
  let gateway: RunningGateway;
  let operator: Operator;
  let shop: Merchant;
  let client: Client;
  /** What the merchant sees when nothing is being rebuilt. */
  let balance: { available: string; pending: string; reserved: string };
  let listed: string[];
  /** The live payouts (the most a merchant may have in processing), newest first. */
  let payouts: number[];

  const readBalance = async () => (await client.get('/v1/balance')).body;
  const readList = async () => (((await client.get('/v1/invoices?limit=100')).body.items ?? []) as { id: string }[]).map((i) => i.id).sort();

  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 2 });
    gateway = await startGateway('gateway', { DATABASE_URL: db.url, ADMIN_TOKEN });
    operator = new Operator(gateway.baseUrl, ADMIN_TOKEN);
    shop = await operator.merchant({ holdHours: 0 });
    client = shop.test;
    // Live payouts, for the payout list's cursor (its read model is renumbered by a rebuild too).
    await fund(operator, shop, 'live', ['1000.00']);
    const address = await payoutAddress(operator, shop.accountId, { method: 'sbp', account: PHONE, bank: 'Сбербанк' });
    payouts = [];
    for (let i = 0; i < 3; i++) {
      const payout = await shop.live.post('/v1/payouts', { amount: '100.00', addressId: address.id, orderId: orderId('payout') });
      expectStatus(payout, 201);
      payouts.unshift(payout.body.id as number);
    }
    let net = 0;
    for (let i = 0; i < INVOICES; i++) {
      const created = await client.post('/v1/invoices', { amount: `${100 + i}.00`, orderId: orderId('rebuild'), method: 'sbp' });
      expectStatus(created, 201);
      expectStatus(await operator.payment(created.body.id, 'paid'), 200);
      net += toKopecks(created.body.netAmount);
    }
    // The read models have it all: every invoice listed, every payment's net amount available (no hold).
    listed = await poll(readList, (ids) => ids.length === INVOICES, 'every invoice listed', 30_000);
    balance = await poll(readBalance, (b) => b.available === fromKopecks(net) && b.pending === '0.00', `${fromKopecks(net)} available`, 30_000);
    await poll(
      async () => (await operator.http.get('/health/ready')).body.projections as { state: string }[],
      (projections) => projections.every((p) => p.state === 'live'),
      'every projection live',
    );
  });
  afterAll(async () => {
    await gateway?.kill();
    await db?.drop();
  });

  /** Reads the balance and the list until `done`; every answer must be the known one or 503 with Retry-After. */
  async function watchReads(done: () => boolean): Promise<Seen[]> {
    const seen: Seen[] = [];
    while (!done()) {
      const [b, l] = await Promise.all([client.get('/v1/balance'), client.get('/v1/invoices?limit=100')]);
      const listedIds = (body: { items?: { id: string }[] }) => JSON.stringify((body.items ?? []).map((i) => i.id).sort());
      for (const [what, r, right] of [
        ['balance', b, JSON.stringify(b.body) === JSON.stringify(balance)],
        ['list', l, l.status === 200 && listedIds(l.body) === JSON.stringify(listed)],
      ] as const) {
        if (r.status === 200 && right) continue;
        seen.push({ what, status: r.status, body: JSON.stringify(r.body) });
        if (r.status !== 503 || r.body?.error?.code !== 'provider_unavailable' || !/^\d+$/.test(r.headers.get('retry-after') ?? '')) {
          throw new Error(
            `${what} during the rebuild: ${r.status} ${JSON.stringify(r.body)} (neither the read model, ${JSON.stringify(what === 'balance' ? balance : listed)}, nor 503 with Retry-After)`,
          );
        }
      }
      // Two reads a round, some 30 a second: within the key's 60 a second (the test runs at the defaults).
      await new Promise((r) => setTimeout(r, 60));
    }
    return seen;
  }

  /** The reads right again: an API process's view of the marks may trail the database by up to a second (503 meanwhile). */
  const expectReadsRight = async () => {
    await poll(readBalance, (b) => JSON.stringify(b) === JSON.stringify(balance), 'the balance right again', 10_000);
    await poll(readList, (ids) => JSON.stringify(ids) === JSON.stringify(listed), 'the list right again', 10_000);
  };

  const projectorLiveAgain = () =>
    poll(
      async () => (await operator.http.get('/health/ready')).body as { projections: { projection: string; state: string }[]; rebuilds?: unknown[] },
      (r) => r.projections.every((p) => p.state === 'live') && r.rebuilds === undefined,
      'the projector live again on every projection, no rebuild left',
      30_000,
    );

  it('takes the projections over from the idle projector, answers right or 503 meanwhile, shows its progress, and gives them back', async () => {
    // A merchant paging through the list when the rebuild starts (a rebuild renumbers the rows): the cursor goes on where it stopped.
    const firstPage = await client.get('/v1/invoices?limit=3');
    const cursor = firstPage.body.nextCursor as string;
    const restOf = async () => ((await client.get(`/v1/invoices?limit=100&cursor=${cursor}`)).body.items as { id: string }[]).map((i) => i.id);
    const rest = await restOf();
    expect(rest).toHaveLength(INVOICES - 3);
    const firstPayout = await poll(
      () => shop.live.get('/v1/payouts?limit=1'),
      (r) => r.status === 200 && r.body.items.length === 1 && r.body.hasMore === true,
      'the payouts listed',
    );
    expect(firstPayout.body.items[0].id).toBe(payouts[0]);
    const payoutCursor = firstPayout.body.nextCursor as string;
    const payoutsAfter = async () => ((await shop.live.get(`/v1/payouts?limit=10&cursor=${payoutCursor}`)).body.items as { id: number }[]).map((p) => p.id);
    expect(await payoutsAfter()).toEqual(payouts.slice(1));
    const rebuild = startProcess('rebuild', { DATABASE_URL: db.url }, ['--batch-size', '5']);
    let exited = false;
    void rebuild.exited.then(() => (exited = true));
    const progress: number[] = [];
    const progressOf = new Map<string, number[]>();
    const states = new Set<string>();
    // A projection being rebuilt, as readiness shows it: handed over, never a plain standby (operations.md, a stuck projection).
    const whileRebuilt = new Set<string>();
    const readiness = (async () => {
      while (!exited) {
        const r = (await operator.http.get('/health/ready')).body as {
          projections: { projection: string; state: string }[];
          rebuilds?: { projection: string; progress: number }[];
        };
        for (const p of r.projections) states.add(p.state);
        for (const p of r.projections) if (r.rebuilds?.some((x) => x.projection === p.projection)) whileRebuilt.add(p.state);
        for (const x of r.rebuilds ?? []) {
          progress.push(x.progress);
          progressOf.set(x.projection, [...(progressOf.get(x.projection) ?? []), x.progress]);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const seen = await watchReads(() => exited);
    await readiness;
    expect(await rebuild.exited).toBe(0);
    expect(rebuild.output()).toMatch(/took over stream_catalog, ledger, invoices, refunds, payouts/);
    // The gateway serves: the rebuild waited for it to see the mark before emptying anything.
    expect(rebuild.output()).toMatch(/waited 3 s for the serving processes \(\d+ sessions\) to see it/);
    // The rebuild was seen: answered 503 for a while, handed over, with progress.
    expect(seen.filter((s) => s.status === 503).length).toBeGreaterThan(0);
    // An answer, not a failure: one info line per request, no error line with a stack (operations.md).
    expect(gateway.output()).not.toMatch(/"level":50[^\n]*"msg":"request failed"/);
    expect(states).toContain('handed_over');
    expect(whileRebuilt).toContain('handed_over');
    expect(whileRebuilt).not.toContain('standby');
    expect(progress.length).toBeGreaterThan(0);
    for (const p of progress) expect(p >= 0 && p <= 1).toBe(true);
    // Each read model's progress only grows: 0 while marked and not yet emptied (it read 1 there, the old checkpoint), then up.
    for (const [projection, seen] of progressOf) expect({ projection, seen }).toEqual({ projection, seen: [...seen].sort((x, y) => x - y) });

    await projectorLiveAgain();
    await expectReadsRight();
    expect(await restOf()).toEqual(rest);
    expect(await payoutsAfter()).toEqual(payouts.slice(1));
    // The projector follows the log again: a new invoice reaches the list without anyone's help.
    const created = await client.post('/v1/invoices', { amount: '50.00', orderId: orderId('after'), method: 'sbp' });
    expectStatus(created, 201);
    listed = await poll(readList, (ids) => ids.includes(created.body.id), 'the new invoice listed', 15_000);
  });

  for (const [signal, moment] of [
    ['SIGINT', 'while it waits for the API processes to see its mark'],
    ['SIGINT', 'in the middle of its passes'],
    ['SIGKILL', 'in the middle of its passes'],
  ] as const) {
    it(`interrupted with ${signal} ${moment}: the read models stay whole, and the projector finishes the rebuild`, async () => {
      const rebuild: RunningProcess = startProcess('rebuild', { DATABASE_URL: db.url }, ['--batch-size', '1']);
      let interrupted = false;
      const watching = watchReads(() => interrupted);
      await rebuild.waitForOutput(/took over/);
      if (moment === 'in the middle of its passes') {
        await poll(
          async () => (await db.pool.query<{ n: string }>(`SELECT events_applied AS n FROM projection_checkpoints WHERE projection = 'ledger'`)).rows[0]!.n,
          (n) => Number(n) > 0,
          'the ledger pass to have applied a batch',
          20_000,
        );
      }
      rebuild.child.kill(signal);
      await rebuild.exited;
      // The projector takes the projections back and finishes what the command began.
      await projectorLiveAgain();
      interrupted = true;
      await watching;
      await expectReadsRight();
    });
  }

  it('exits 2 naming the holder, having changed nothing, when a projection is not handed over in time', async () => {
    // A session that wants the ledger's lock as a projector of another kind would, deaf to hand-over requests:
    // queued behind the running projector, it gets the lock when the projector hands the ledger over.
    const holder = await db.pool.connect();
    const locked = holder.query(`SELECT pg_advisory_lock(48213, hashtext('ledger'))`);
    try {
      await poll(
        async () =>
          (await db.pool.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = (hashtext('ledger')::bigint & 4294967295)`))
            .rowCount,
        (n) => n === 1,
        'the deaf holder queued for the ledger',
      );
      const rebuild = startProcess('rebuild', { DATABASE_URL: db.url }, ['--handover-wait', '5']);
      expect(await rebuild.exited).toBe(2);
      expect(rebuild.output()).toMatch(/projection ledger is held by .*nothing was changed/);
      const marked = await db.pool.query(`SELECT projection FROM projection_checkpoints WHERE rebuild_started_at IS NOT NULL`);
      expect(marked.rows).toEqual([]);
    } finally {
      await locked;
      await holder.query(`SELECT pg_advisory_unlock(48213, hashtext('ledger'))`);
      holder.release();
    }
    await projectorLiveAgain();
    await expectReadsRight();
  });

  // The refusal said "stop that projector (or let its batch finish)" when the holder was another rebuild.
  it('a second rebuild while one holds the projection: exit 2 saying another rebuild holds it until it ends; the first ends well', async () => {
    const first = startProcess('rebuild', { DATABASE_URL: db.url }, ['invoices']);
    await first.waitForOutput(/took over invoices/);
    // Held where it is, its locks with it (its session lives), while the second one asks.
    process.kill(first.child.pid!, 'SIGSTOP');
    try {
      const second = startProcess('rebuild', { DATABASE_URL: db.url }, ['--handover-wait', '1', 'invoices']);
      expect({ code: await second.exited, output: second.output() }).toEqual({
        code: 2,
        output: expect.stringMatching(
          /projection invoices is being rebuilt by \S+ \(projections:rebuild\), another rebuild, which holds it until it ends .*wait for that rebuild to end .*nothing was changed/,
        ),
      });
    } finally {
      process.kill(first.child.pid!, 'SIGCONT');
    }
    expect(await first.exited).toBe(0);
    await projectorLiveAgain();
    await expectReadsRight();
  });
});
